"""EncoderSpec, and the one way to make it from what a user names.

`encoder_spec()` turns a model preset, an `export-model` folder or TF-Hub handles, plus the
encoder flags, into a checked EncoderSpec: run, eval, search, similarity and tokens all call it,
so a preset's defaults, the flag choices and the pooling names are applied and checked in one
place. An EncoderSpec holds handles only (it travels to Beam workers); `build()` loads the model.
This module imports no TensorFlow: choices are checked before any model loads.
"""

from __future__ import annotations

import dataclasses

from beam_embed.models.encoder_choices import (
    ACCELERATORS,
    GRANULARITIES,
    LONG_TEXT_MODES,
    PRECISIONS,
    TOKEN_DTYPES,
    TOKEN_UNITS,
)
from beam_embed.models.encoders import KINDS, encoder_kind

DEFAULT_MODEL = "minilm"


def check_choice(flag: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"unknown --{flag} {value!r}; expected one of {list(choices)}")


def check_positive(flag: str, value) -> int:
    if value is None or value < 1:
        raise ValueError(f"--{flag} must be a positive integer, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class EncoderSpec:
    """Everything a worker needs to build the embedder; handles only, no loaded objects."""

    kind: str
    encoder: str
    preprocessor: str | None
    max_seq_length: int | None  # None: the whole text (text-in embedders)
    poolings: tuple[str, ...]
    normalize: bool
    long_text: str
    options: tuple[tuple[str, str], ...] = ()  # encoder-kind specific, e.g. ELMo's signature
    granularity: str = "sentence"
    token_layer: str | None = None
    token_unit: str = "word"
    token_dtype: str = "float32"
    precision: str = "fp32"  # fp32 | bf16 | fp16: the encoder's compute precision
    intra_op_threads: int = 0  # TensorFlow pools per worker process; 0: TF's default (all cores)
    inter_op_threads: int = 0
    name: str = ""  # the model's name, for manifests and messages
    accelerator: str = "auto"  # auto | gpu | tpu (models/accelerators.py)
    # tpu: one call's token budget and most rows, from which each length bucket's fixed batch
    # size is derived (models/fixed_shapes.py)
    batch_tokens: int = 16384
    max_batch_size: int = 512
    # The accelerator's code path on this machine's CPU, without its device: a launcher whose
    # workers hold the device checks the model so. Never set in the spec workers get.
    on_host: bool = False
    # Matryoshka: keep each vector's first K dimensions (normalized again when `normalize`)
    truncate_dim: int | None = None
    # prepended to each text before it is tokenized ("": none); `prompt_name`: the model's
    # prompt it is, when named (models/prompts.py)
    prompt: str = ""
    prompt_name: str | None = None
    # False: the model's Pooling leaves the prompt's tokens out (include_prompt false)
    prompt_in_pooling: bool = True
    # ORG/NAME@COMMIT: the Hugging Face Hub model the export was made from (None: not the Hub)
    hub: str | None = None

    def parsed_poolings(self):
        """The poolings as beam_embed.models.pooling.Pooling, checked against the encoder kind."""
        return encoder_kind(self.kind).parse_poolings(self.poolings)

    def fingerprint(self) -> str:
        """The model's fingerprint, as its kind computes it (beam_embed.models.encoder.Encoder)."""
        return fingerprint(self.kind, self.encoder, self.preprocessor)

    def max_positions(self) -> int | None:
        """The longest --max-seq-length the model can run, as its kind reads it; None: no limit
        known."""
        return encoder_kind(self.kind).encoder_class().max_positions(self)

    def fixed_shapes(self):
        """The (rows, length) shapes a TPU's calls run in (beam_embed.models.fixed_shapes.FixedShapes,
        from the kind's length buckets); None on other accelerators, whose shapes follow each
        batch."""
        if self.accelerator != "tpu":
            return None
        return encoder_kind(self.kind).fixed_shapes(self.batch_tokens, self.max_batch_size,
                                                    self.max_seq_length)

    def warm_up(self) -> bool:
        """Starts loading and running the encoder once on a background thread (models/warm_up.py),
        for `build` to find ready; False for kinds that load only in `build`, and on a TPU (the
        warm-up runs the graph's call, which the TPU path does not use)."""
        from beam_embed.models import warm_up

        if self.accelerator == "tpu":
            return False
        return warm_up.start(encoder_kind(self.kind).encoder_class(), self)

    def build(self):
        """An Embedder (sentence vectors) or a TokenEmbedder (token granularity)."""
        from beam_embed.models.accelerators import strategy
        from beam_embed.models.embedder import Embedder, configure_threads
        from beam_embed.models.tokens import TokenEmbedder

        configure_threads(self.intra_op_threads, self.inter_op_threads)  # before the model loads
        kind = encoder_kind(self.kind)
        kind.check_precision(self.precision)
        kind.check_accelerator(self.accelerator)
        strategy(self.accelerator, self.on_host)  # a missing device is refused before loading
        encoder = kind.encoder_class().from_spec(self)
        if self.granularity == "token":
            return TokenEmbedder(encoder, self.token_layer, self.token_unit, self.token_dtype)
        return Embedder(encoder, self.parsed_poolings(), normalize=self.normalize,
                        long_text=self.long_text, truncate_dim=self.truncate_dim,
                        prompt=self.prompt, prompt_in_pooling=self.prompt_in_pooling)


def fingerprint(kind: str, encoder: str, preprocessor: str | None = None) -> str:
    """The fingerprint a manifest records for a model of `kind` at these handles (the kind's
    Encoder.fingerprint: for SavedModels, over every file that decides the vectors)."""
    return encoder_kind(kind).encoder_class().fingerprint(encoder, preprocessor)


EARLIER_FINGERPRINT = ("its manifest records the model's fingerprint as earlier versions of "
                       "beam-embed computed it, over saved_model.pb alone: a vocabulary or "
                       "weights changed since that run would not show")


SAME_CHECKPOINT = ("its manifest's model fingerprint {recorded} was taken over an earlier export "
                   "of the same checkpoint files in the same export format (cache entry "
                   "{entry}, now {now}), whose graph differed only in a table name holding a "
                   "memory address: the same vectors, accepted")


@dataclasses.dataclass(frozen=True)
class RecordedFingerprint:
    """How a fingerprint a manifest recorded stands to the model at its handles now."""
    now: str  # the model's fingerprint now
    same: bool  # the recorded one is the model's, as this version or an earlier one computed it
    earlier: bool  # accepted though not equal: computed by an earlier version, or over an
    # earlier export of the same checkpoint (`note` says which, in one line)
    note: str = ""


def recorded_fingerprint(recorded: str | None, kind: str, encoder: str,
                         preprocessor: str | None = None,
                         recorded_encoder: str | None = None) -> RecordedFingerprint:
    """`recorded` (a manifest's) against the model of `kind` at these handles now.
    `recorded_encoder`: the encoder handle the manifest names, which tells an export of the
    same checkpoint in the model cache (export_cache.same_cache_export)."""
    from beam_embed.models.export_cache import same_cache_export

    cls = encoder_kind(kind).encoder_class()
    now = cls.fingerprint(encoder, preprocessor)
    if recorded == now:
        return RecordedFingerprint(now, True, False)
    if recorded in cls.earlier_fingerprints(encoder, preprocessor):
        return RecordedFingerprint(now, True, True, EARLIER_FINGERPRINT)
    entry = same_cache_export(recorded_encoder, encoder)
    if entry is not None:
        return RecordedFingerprint(now, True, True, SAME_CHECKPOINT.format(
            recorded=recorded, entry=entry, now=now))
    return RecordedFingerprint(now, False, False)


def _check_tpu(accelerator: str, precision: str, granularity: str) -> None:
    """What a TPU cannot run, refused before any model loads."""
    if accelerator != "tpu":
        return
    if precision == "fp16":
        raise ValueError("--precision fp16 is not available with --accelerator tpu (TPUs compute "
                         "in bfloat16, not float16); expected one of ['bf16', 'fp32']")
    if granularity == "token":
        raise ValueError("--granularity token is not available with --accelerator tpu (its "
                         "fixed shapes cover sentence vectors); expected --granularity sentence")


def _check_options(options: tuple[tuple[str, str], ...]) -> None:
    """Each kind-specific option against the choices of the kinds that declare it."""
    for key, value in options:
        for kind in KINDS.values():
            if key in kind.options:
                flag, choices = kind.options[key]
                check_choice(flag, value, choices)


def _check_pooler(found, chosen: tuple[str, ...], registry) -> None:
    """pooled_output of an export whose checkpoint had no pooler is all zeros: refused here, with
    the poolings that do carry the text, rather than written as vectors."""
    if found.has_pooler or "pooled_output" not in chosen:
        return
    usable = sorted(p for p in registry.poolers if p != "pooled_output")
    layered = " (layered: e.g. mean@-2)" if registry.layered else ""
    raise ValueError(f"pooling 'pooled_output': {found.name} has no pooler (its checkpoint had no "
                     f"pooler/dense weights), so it would be all zeros; expected one of "
                     f"{usable}{layered}")


def _prompt(found, granularity: str, long_text: str, prompt_name: str | None,
            prompt: str | None):
    """The prompt the run applies (models/prompts.py), refused where it would reach only part
    of what is embedded: token vectors would include the prompt's tokens, and a chunked text's
    later windows would lack it."""
    from beam_embed.models.prompts import choose

    chosen = choose(found.name, found.prompts, prompt_name, prompt)
    if chosen.text and (granularity == "token" or long_text == "chunk"):
        flag, other = (("--granularity token", "--granularity sentence") if granularity == "token"
                       else ("--long-text chunk", "--long-text truncate"))
        given = ("--prompt" if prompt is not None else "--prompt_name" if prompt_name
                 else f"{found.name}'s default prompt")
        raise ValueError(f"{flag} does not take a prompt ({given} {chosen.text!r}): expected "
                         f"{other} with a prompt, or --prompt '' for none")
    return chosen


def encoder_spec(model: str | None = None, *, encoder: str | None = None,
                 preprocessor: str | None = None, kind: str | None = None,
                 poolings: tuple[str, ...] = (), normalize: bool | None = None,
                 max_seq_length: int | None = None, long_text: str = "truncate",
                 granularity: str = "sentence", token_layer: str | None = None,
                 token_unit: str = "word", token_dtype: str = "float32",
                 precision: str | None = None, options: tuple[tuple[str, str], ...] = (),
                 threads: tuple[int, int] = (0, 0), name: str | None = None,
                 presets: dict | None = None, accelerator: str = "auto",
                 batch: tuple[int, int] = (16384, 512),
                 truncate_dim: int | None = None, prompt_name: str | None = None,
                 prompt: str | None = None) -> EncoderSpec:
    """A checked EncoderSpec for `model` (a preset or an export-model folder) or for TF-Hub
    handles (`encoder`, `preprocessor`, optionally their `kind`). Unset flags take the model's
    recommendation (pooling, normalize, max length) or the accelerator's (precision: bf16 on a
    TPU, else fp32). `batch`: the token budget and most rows of one encoder call. `prompt`
    (a literal prefix) or `prompt_name` (one of the model's prompts), else the model's default
    prompt, is prepended to each text (models/prompts.py). Raises
    ValueError naming the bad value and the valid choices."""
    from beam_embed.models.presets import from_handles, resolve

    check_choice("accelerator", accelerator, ACCELERATORS)
    precision = precision or ("bf16" if accelerator == "tpu" else "fp32")
    _check_tpu(accelerator, precision, granularity)
    check_choice("long-text", long_text, LONG_TEXT_MODES)
    check_choice("granularity", granularity, GRANULARITIES)
    check_choice("token-unit", token_unit, TOKEN_UNITS)
    check_choice("token-dtype", token_dtype, TOKEN_DTYPES)
    check_choice("precision", precision, PRECISIONS)
    _check_options(options)
    if truncate_dim is not None:
        check_positive("truncate_dim", truncate_dim)
        if granularity == "token":
            raise ValueError("--truncate_dim applies to sentence vectors; expected --granularity "
                             "sentence")
    if granularity == "token" and long_text == "chunk":
        raise ValueError("--long-text chunk applies to sentence vectors; token granularity "
                         "truncates (use --split sentences for long documents)")
    found = (from_handles(encoder, preprocessor, kind) if encoder
             else resolve(model or DEFAULT_MODEL, presets))
    registry = encoder_kind(found.kind)
    chosen = tuple(poolings) or found.pooling or registry.default_pooling
    if granularity == "token":
        registry.parse_token_layer(token_layer)  # kinds without token vectors refuse here
    registry.parse_poolings(chosen)  # names (and fixed layers) checked before any load
    _check_pooler(found, chosen, registry)
    max_len = (max_seq_length if max_seq_length is not None
               else found.max_seq_length or registry.max_seq_length)
    if max_len is not None:
        check_positive("max-seq-length", max_len)
        if max_len < registry.min_seq_length:
            raise ValueError(f"--max-seq-length must be at least {registry.min_seq_length} "
                             f"([CLS] text [SEP]) for {found.kind} encoders, got {max_len}")
    registry.check_precision(precision)
    registry.check_accelerator(accelerator)
    prompted = _prompt(found, granularity, long_text, prompt_name, prompt)
    return EncoderSpec(
        kind=found.kind, encoder=found.encoder, preprocessor=found.preprocessor,
        max_seq_length=max_len, poolings=chosen,
        normalize=found.normalize if normalize is None else normalize, long_text=long_text,
        options=tuple(options), granularity=granularity, token_layer=token_layer,
        token_unit=token_unit, token_dtype=token_dtype, precision=precision,
        intra_op_threads=threads[0], inter_op_threads=threads[1], name=name or found.name,
        accelerator=accelerator, batch_tokens=batch[0], max_batch_size=batch[1],
        truncate_dim=truncate_dim, prompt=prompted.text, prompt_name=prompted.name,
        prompt_in_pooling=found.prompts.include_prompt, hub=found.hub)
