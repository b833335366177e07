"""The API's keyword arguments are the run's settings (RunSettings' fields, under the same names
as `beam-embed run`'s flags and --config's keys), checked by constructing a RunSettings: a bad
value is the command line's ValueError. Each public name takes the fields that apply to it,
and a keyword it does not take (a misspelling, or a setting that would be ignored there) is a
TypeError naming the ones it takes, never silently dropped.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys

from beam_embed.pipeline.common.settings.command_line import hint
from beam_embed.pipeline.job.settings import RunSettings

# The settings that choose and shape the encoder, as `run` has them.
MODEL = ("model", "encoder", "preprocessor", "elmo_signature", "normalize", "max_seq_length",
         "long_text", "precision", "accelerator", "prompt_name", "prompt")
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


# Keywords the API spelled otherwise before it took the command line's names (still taken, with
# a DeprecationWarning; left out of the names an unknown keyword's TypeError lists).
EARLIER_NAMES = ("poolings", "formats", "stores")


def renamed_keyword(owner: str, old: str, new: str, old_value, new_value):
    """The value of keyword `new`, or of its earlier name `old` (with a DeprecationWarning):
    one name for one setting, the command line's; a TypeError when both are given."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise TypeError(f"{owner}() got both {new}= and its earlier name {old}=; pass {new}=")
    import warnings

    warnings.warn(f"{owner}({old}=...) is now {owner}({new}=...), as the command line's "
                  f"--{new}", DeprecationWarning, stacklevel=4)  # the caller's line
    return old_value


def explicit_keywords(function):
    """`function` (a public constructor or function, with an explicit keyword signature, which
    IDEs and `inspect.signature` show) refusing a keyword it does not take with a TypeError that
    names the closest it does, and all of them, as check_keywords says it."""
    parameters = inspect.signature(function).parameters
    names = tuple(n for n, p in parameters.items() if n != "self" and p.kind in (
        p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    owner = function.__qualname__.split(".")[0]
    shown = tuple(n for n in names if n not in EARLIER_NAMES)

    @functools.wraps(function)
    def checked(*args, **keywords):
        check_keywords(owner, {k: v for k, v in keywords.items() if k not in names}, shown)
        return function(*args, **keywords)

    return checked


def check_keywords(owner: str, given, accepted: tuple[str, ...]) -> None:
    """A TypeError naming the first of `given` that `owner` does not take, and those it does."""
    unknown = [k for k in given if k not in accepted]
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}"
                        f"{hint(unknown[0], accepted)} (it takes {', '.join(sorted(accepted))})")


def _loads_tensorflow(settings: RunSettings) -> bool:
    """Whether resolving `settings`' model loads TensorFlow: a SavedModel (a TF-Hub handle or
    folder) is recognized by loading it, and a preset exported on first use is exported with
    it; a preset already exported and an export-model folder are read without it."""
    import os

    from beam_embed.models.export_cache import export_path
    from beam_embed.models.export_format import METADATA_FILE
    from beam_embed.models.gcs_copy import local_copy
    from beam_embed.models.hub_download import hub_id, hub_name
    from beam_embed.models.presets import checkpoint_folder, load_presets
    from beam_embed.models.spec import DEFAULT_MODEL

    if "tensorflow" in sys.modules:
        return False
    if settings.encoder:
        return True
    model = settings.model or DEFAULT_MODEL
    preset = load_presets().get(model)
    if preset is None and hub_id(model):  # a Hub id: exported on first use, as a preset is
        preset = {"checkpoint": model, "name": hub_name(hub_id(model)[0])}
    if preset is not None:
        if "checkpoint" not in preset:
            return True
        try:
            checkpoint = checkpoint_folder(preset["checkpoint"], download=False)
        except ValueError:  # a Hub model not downloaded yet
            return True
        folder = export_path(checkpoint, preset.get("name", model))
    elif model.startswith(("http://", "https://")):
        return True
    elif os.path.isdir(model) or model.startswith("gs://"):
        folder = local_copy(model)
    else:
        return False  # refused by name when resolved
    return not os.path.isfile(os.path.join(folder, METADATA_FILE))


def model_spec(settings: RunSettings, threads: tuple[int, int] = (0, 0)):
    """The encoder's checked spec for `settings`, with the model's limits checked as `run`
    checks them before reading data (a --max_seq_length beyond the model's positions, a
    --batch_tokens that cannot hold one full-length text). A preset or an export-model folder
    is resolved from its files, without TensorFlow (the API's constructors leave the host
    process as it was); a SavedModel needs TensorFlow to be recognized, which then loads here,
    without its start-up lines unless the user asked for them."""
    from beam_embed.models.export_format import recorded_positions
    from beam_embed.models.tf_import import import_tensorflow
    from beam_embed.pipeline.job.resolved import ResolvedRun, check_model_limits
    from beam_embed.process.log import library_quiet_wanted

    if _loads_tensorflow(settings):
        import_tensorflow(library_quiet_wanted())
    try:
        spec = settings.encoder_spec(threads)
    except OSError as e:  # Beam's IO errors hold their cause in a dict's repr: say it plainly
        from beam_embed.pipeline.common.settings.errors import one_line

        handles = [h for h in (settings.encoder, settings.preprocessor) if h] or [settings.model]
        raise OSError(f"model {' and '.join(map(repr, handles))} cannot be read: "
                      f"{one_line(e)}") from e
    positions = recorded_positions(spec.encoder) if spec.encoder else None
    if positions is None:
        if "tensorflow" not in sys.modules:
            import_tensorflow(library_quiet_wanted())
        positions = spec.max_positions()
    return check_model_limits(ResolvedRun(settings, spec), positions).encoder


def one_pooling(owner: str, spec, given: bool):
    """`spec` with one pooling (a handler's result is one vector a text): the one `given`, a
    ValueError when several were; else the model's first recommended."""
    if given and len(spec.poolings) != 1:
        raise ValueError(f"{owner} gives one vector a text: pooling= names one pooling, got "
                         f"{','.join(spec.poolings)!r}; expected one of them")
    return dataclasses.replace(spec, poolings=spec.poolings[:1])
