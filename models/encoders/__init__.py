"""The encoder kinds: one registry entry each, with the facts flags are checked against.

An entry names the class that implements models.encoder.Encoder (imported only to build one,
so this module and every flag check stay free of TensorFlow), the poolings the kind offers,
its compute precisions, its token layers and units, and its kind-specific options. Adding a
kind = one class + one entry here + its tests.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping

from models.pooling import ELMO_OUTPUTS, ELMO_POOLERS, LAYERED, POOLERS, parse_poolings


@dataclasses.dataclass(frozen=True)
class EncoderKind:
    name: str
    implementation: str  # "module:Class", imported by encoder_class()
    poolers: Mapping[str, Callable]
    layered: frozenset[str]  # poolings that take a layer (`mean@-2`)
    precisions: tuple[str, ...] = ("fp32",)
    named_layers: tuple[str, ...] = ()  # token layers by name (ELMo's outputs), else by index
    default_token_layer: str = "-1"
    token_units: tuple[str, ...] = ("word",)
    options: Mapping[str, tuple[str, tuple[str, ...]]] = dataclasses.field(
        default_factory=dict)  # option -> (its flag, its choices)

    def encoder_class(self):
        module, name = self.implementation.split(":")
        return getattr(importlib.import_module(module), name)

    def parse_poolings(self, specs):
        """models.pooling.Pooling per spec, checked against this kind's poolings."""
        return parse_poolings(list(specs), self.poolers, self.layered)

    def check_precision(self, precision: str) -> None:
        if precision not in self.precisions:
            raise ValueError(f"precision {precision!r} is not available for {self.name} "
                             f"encoders; expected one of {list(self.precisions)}")


PRECISIONS = ("fp32", "bf16", "fp16")  # models/bert_encoder.py implements the last two
ELMO_SIGNATURES = ("tokens", "default")
KINDS = {
    "bert": EncoderKind("bert", "models.encoders.bert:HubBertEncoder", POOLERS, LAYERED,
                        precisions=PRECISIONS,
                        token_units=("word", "wordpiece")),
    "elmo": EncoderKind("elmo", "models.encoders.elmo:HubElmoEncoder", ELMO_POOLERS,
                        frozenset(), named_layers=ELMO_OUTPUTS, default_token_layer="elmo",
                        options={"signature": ("elmo-signature", ELMO_SIGNATURES)}),
}


def encoder_kind(kind: str) -> EncoderKind:
    if kind not in KINDS:
        raise ValueError(f"unknown encoder kind {kind!r}; expected one of {sorted(KINDS)}")
    return KINDS[kind]
