"""Encoders by kind; each turns texts into an EncoderOutput. One registry, one file per kind."""

from __future__ import annotations


def _bert():
    from models.encoders.bert import HubBertEncoder
    return HubBertEncoder


def _elmo():
    from models.encoders.elmo import HubElmoEncoder
    return HubElmoEncoder


ENCODERS = {"bert": _bert, "elmo": _elmo}


def encoder_class(kind: str):
    if kind not in ENCODERS:
        raise ValueError(f"unknown encoder kind {kind!r}; expected one of {sorted(ENCODERS)}")
    return ENCODERS[kind]()
