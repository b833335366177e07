"""The API's keyword arguments are the run's settings (RunSettings' fields, under the same names
as `beam-embed run`'s flags and --config's keys), checked by constructing a RunSettings: a bad
value is the command line's ValueError. Each public name takes the fields that apply to it,
and a keyword it does not take (a misspelling, or a setting that would be ignored there) is a
TypeError naming the ones it takes, never silently dropped.
"""

from __future__ import annotations

import dataclasses

from beam_embed.pipeline.common.command_line import hint
from beam_embed.pipeline.job.settings import RunSettings

# The settings that choose and shape the encoder, as `run` has them.
MODEL = ("model", "encoder", "preprocessor", "elmo_signature", "normalize", "max_seq_length",
         "long_text", "precision", "accelerator")
BATCHES = ("batch_tokens", "max_batch_size")
# How a text is taken from an element and prepared, as `run` reads a record.
TEXTS = ("text_field", "id_field", "clean", "max_text_bytes")


def run_settings(owner: str, given: dict, accepted: tuple[str, ...],
                 renamed: dict[str, str] | None = None, **defaults) -> RunSettings:
    """RunSettings from `owner`'s keyword arguments `given` (None: the setting's default).
    `renamed`: keyword -> field, for a keyword the API spells otherwise (`poolings`: the
    `pooling` field); `defaults`: the owner's own defaults, where they differ from `run`'s."""
    renamed = renamed or {}
    check_keywords(owner, given, accepted)
    values = {**defaults, **{renamed.get(k, k): v for k, v in given.items() if v is not None}}
    return RunSettings(**values)


def check_keywords(owner: str, given, accepted: tuple[str, ...]) -> None:
    """A TypeError naming the first of `given` that `owner` does not take, and those it does."""
    unknown = [k for k in given if k not in accepted]
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}"
                        f"{hint(unknown[0], accepted)} (it takes {', '.join(sorted(accepted))})")


def model_spec(settings: RunSettings, threads: tuple[int, int] = (0, 0)):
    """The encoder's checked spec for `settings`, with the model's limits checked as `run`
    checks them before reading data (a --max_seq_length beyond the model's positions, a
    --batch_tokens that cannot hold one full-length text)."""
    from beam_embed.models.tf_import import import_tensorflow
    from beam_embed.pipeline.job.resolved import ResolvedRun, check_model_limits

    import_tensorflow()  # resolving a model may load TensorFlow: quietly
    try:
        spec = settings.encoder_spec(threads)
    except OSError as e:  # Beam's IO errors hold their cause in a dict's repr: say it plainly
        from beam_embed.pipeline.common.errors import one_line

        handles = [h for h in (settings.encoder, settings.preprocessor) if h] or [settings.model]
        raise OSError(f"model {' and '.join(map(repr, handles))} cannot be read: "
                      f"{one_line(e)}") from e
    return check_model_limits(ResolvedRun(settings, spec), spec.max_positions()).encoder


def one_pooling(owner: str, spec, given: bool):
    """`spec` with one pooling (a handler's result is one vector a text): the one `given`, a
    ValueError when several were; else the model's first recommended."""
    if given and len(spec.poolings) != 1:
        raise ValueError(f"{owner} gives one vector a text: pooling= names one pooling, got "
                         f"{','.join(spec.poolings)!r}; expected one of them")
    return dataclasses.replace(spec, poolings=spec.poolings[:1])
