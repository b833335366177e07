"""The encoder kinds: one registry entry each, with the facts flags are checked against.

An entry names the class that implements beam_embed.models.encoder.Encoder (imported only to build one,
so this module and every flag check stay free of TensorFlow), the poolings the kind offers,
its compute precisions, its accelerators (and, for a TPU, the length buckets of its fixed
shapes), its token layers and units, its kind-specific options, and why it lacks what it lacks
(so a refused flag says so). Adding a kind = one class + one entry here + its
tests. A handle given alone (`--encoder H`) is matched against the kinds that say how they are
recognized (models/encoders/detect.py), in registry order.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping

from beam_embed.models.encoder_choices import ACCELERATORS, PRECISIONS
from beam_embed.models.fixed_shapes import SEQ_BUCKETS, FixedShapes
from beam_embed.models.pooling import (
    ELMO_OUTPUTS,
    ELMO_POOLERS,
    LAYERED,
    POOLERS,
    TEXT_POOLERS,
    parse_poolings,
)


@dataclasses.dataclass(frozen=True)
class EncoderKind:
    name: str
    implementation: str  # "module:Class", imported by encoder_class()
    poolers: Mapping[str, Callable]
    layered: frozenset[str]  # poolings that take a layer (`mean@-2`)
    default_pooling: tuple[str, ...] = ("cls",)  # when neither flags nor a preset name one
    precisions: tuple[str, ...] = ("fp32",)
    accelerators: tuple[str, ...] = ("auto", "gpu")  # tpu: XLA in fixed shapes (bert only)
    fixed_lengths: tuple[int, ...] = ()  # tpu: the length buckets of its fixed shapes
    named_layers: tuple[str, ...] = ()  # token layers by name (ELMo's outputs), else by index
    default_token_layer: str = "-1"
    token_units: tuple[str, ...] = ("word",)
    token_level: bool = True  # whether --granularity token is possible
    layers: int | None = None  # layers every model of the kind exposes, when fixed
    max_seq_length: int | None = 512  # default units per text; None: the whole text
    min_seq_length: int = 1  # the shortest --max-seq-length that leaves room for one unit
    recognized_by: str = ""  # how a lone handle is recognized; "" for kinds never guessed
    # The model comes as an encoder and a --preprocessor (a TF-Hub BERT pair): an encoder given
    # with a preprocessor and no kind is of the one kind that says so.
    preprocessor: bool = False
    wordpieces: bool = False  # a WordPiece tokenizer (Encoder.wordpieces): --split chunks counts with it
    why: Mapping[str, str] = dataclasses.field(default_factory=dict)  # what it lacks -> why
    options: Mapping[str, tuple[str, tuple[str, ...]]] = dataclasses.field(
        default_factory=dict)  # option -> (its flag, its choices)

    def encoder_class(self):
        module, name = self.implementation.split(":")
        return getattr(importlib.import_module(module), name)

    def fixed_shapes(self, batch_tokens: int, max_batch_size: int, max_seq_length: int):
        """The (rows, length) shapes its calls run in on a TPU
        (beam_embed.models.fixed_shapes.FixedShapes over `fixed_lengths`)."""
        return FixedShapes.of(batch_tokens, max_batch_size, self.fixed_lengths, max_seq_length)

    def _because(self, what: str) -> str:
        return f" ({self.why[what]})" if what in self.why else ""

    def parse_poolings(self, specs):
        """beam_embed.models.pooling.Pooling per spec, checked against this kind's poolings and, when the
        kind's layers are fixed, their layers."""
        try:
            parsed = parse_poolings(list(specs), self.poolers, self.layered)
        except ValueError as e:
            raise ValueError(f"{e}{self._because('poolings')}") from e
        for p in parsed:
            if p.layer is not None and self.layers is not None and \
                    not -self.layers <= p.layer < self.layers:
                raise ValueError(f"pooling {p.spec!r} asks for layer {p.layer}, but {self.name} "
                                 f"encoders expose {self.layers} layer(s){self._because('layers')}"
                                 f"; valid: {-self.layers}..{self.layers - 1}")
        return parsed

    def parse_token_layer(self, value, num_layers: int | None = None):
        """A token layer: an index (negative from the end, default -1) into `num_layers` (or
        the kind's fixed layers), or for kinds with named outputs (ELMo) an output name."""
        if not self.token_level:
            raise ValueError(f"--granularity token is not available for {self.name} encoders"
                             f"{self._because('granularity')}; use --granularity sentence")
        if self.named_layers:
            value = value if value not in (None, "") else self.default_token_layer
            if value not in self.named_layers:
                raise ValueError(f"unknown {self.name} token layer {value!r}; expected one of "
                                 f"{list(self.named_layers)}")
            return value
        n = num_layers if num_layers is not None else self.layers
        try:
            layer = -1 if value in (None, "") else int(value)
        except ValueError as e:
            raise ValueError(f"token layer {value!r} is not a layer number; expected an integer"
                             + (f" in {-n}..{n - 1}" if n else "")) from e
        if n is None:
            return layer
        if not -n <= layer < n:
            raise ValueError(f"token layer {layer} is outside the model's {n} layers (valid: "
                             f"{-n}..{n - 1}){self._because('layers')}")
        return layer - n if layer >= 0 else layer

    def check_accelerator(self, accelerator: str) -> None:
        if accelerator not in self.accelerators:
            raise ValueError(f"--accelerator {accelerator} is not available for {self.name} "
                             f"encoders{self._because('accelerator')}; expected one of "
                             f"{list(self.accelerators)}")

    def check_precision(self, precision: str) -> None:
        if precision not in self.precisions:
            raise ValueError(f"--precision {precision} is not available for {self.name} "
                             f"encoders{self._because('precision')}; expected one of "
                             f"{list(self.precisions)}")


ELMO_SIGNATURES = ("tokens", "default")
_TPU_WHY = ("the TPU path compiles the TF-Hub BERT contract's call; export BERT-family "
            "models with `beam-embed export-model`")
KINDS = {
    "bert": EncoderKind(
        "bert", "beam_embed.models.encoders.bert:HubBertEncoder", POOLERS, LAYERED, precisions=PRECISIONS,
        accelerators=ACCELERATORS, fixed_lengths=SEQ_BUCKETS, token_units=("word", "wordpiece"),
        min_seq_length=3, preprocessor=True, wordpieces=True),
    "bert_tf1": EncoderKind(
        "bert_tf1", "beam_embed.models.encoders.bert_tf1:HubBertTf1Encoder",
        {k: POOLERS[k] for k in ("cls", "pooled_output", "mean")}, frozenset({"cls", "mean"}),
        token_units=("word", "wordpiece"), layers=1, min_seq_length=3, wordpieces=True,
        recognized_by="tags [] with signatures tokens(input_ids, input_mask, segment_ids) and "
                      "tokenization_info()",
        why={"layers": "a TF1 Hub BERT module outputs only its last layer, sequence_output",
             "precision": "a TF1 Hub module runs its own graph, in fp32",
             "accelerator": _TPU_WHY}),
    "elmo": EncoderKind(
        "elmo", "beam_embed.models.encoders.elmo:HubElmoEncoder", ELMO_POOLERS, frozenset(),
        default_pooling=("default",), named_layers=ELMO_OUTPUTS, default_token_layer="elmo",
        recognized_by="tags [] with signatures default(text) and tokens(tokens, sequence_len)",
        options={"signature": ("elmo-signature", ELMO_SIGNATURES)},
        why={"accelerator": _TPU_WHY}),
    "text_in": EncoderKind(
        "text_in", "beam_embed.models.encoders.text_in:HubTextEncoder", TEXT_POOLERS, frozenset(),
        default_pooling=("default",), token_level=False, layers=0, max_seq_length=None,
        recognized_by="a TF2 SavedModel callable (or serving_default) taking one string tensor "
                      "[batch] and returning float [batch, D]",
        why={"poolings": "a text-in embedder returns one vector per text, the module's own",
             "granularity": "a text-in embedder returns one vector per text, no token vectors",
             "layers": "a text-in embedder returns one vector per text, no layers",
             "precision": "a TF-Hub SavedModel computes in its own precision",
             "accelerator": _TPU_WHY}),
    "keras_hub": EncoderKind(
        "keras_hub", "beam_embed.models.encoders.keras_hub:KerasHubBertEncoder",
        {k: POOLERS[k] for k in ("cls", "mean", "max")}, frozenset({"cls", "mean", "max"}),
        token_level=False, min_seq_length=3,
        recognized_by="a Hugging Face BERT folder: config.json (model_type bert) beside "
                      "model.safetensors, read by keras-hub",
        why={"granularity": "keras-hub's tokenizer gives no word offsets; export the folder "
                            "with `beam-embed export-model` for token vectors",
             "precision": "keras-hub's backbone runs in fp32 here",
             "accelerator": _TPU_WHY}),
}


def paired_kind() -> str:
    """The kind of an encoder given with a --preprocessor and no kind."""
    return next(k.name for k in KINDS.values() if k.preprocessor)


def encoder_kind(kind: str) -> EncoderKind:
    if kind not in KINDS:
        raise ValueError(f"unknown encoder kind {kind!r}; expected one of {sorted(KINDS)}")
    return KINDS[kind]
