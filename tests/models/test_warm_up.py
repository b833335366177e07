"""The encoder's warm-up on a background thread (models/warm_up.py): the model it loads and
runs is the one the encoder then uses (loaded once), its failures surface from the encoder's
own load, and SavedModels asked for from two threads at once load once."""

from __future__ import annotations

import os
import shutil
import threading

import numpy as np
import pytest

from beam_embed.models import hub_loader, warm_up
from beam_embed.models.spec import encoder_spec

TEXTS = ["the cat sat on the mat", "a dog", "sat"]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_warmed_encoder_is_the_one_used(fresh_export, tiny_export, loads, precision):
    spec = encoder_spec(fresh_export, precision=precision, poolings=("mean", "cls"))
    assert spec.warm_up() and spec.warm_up()  # a second start joins the first
    warm_up.wait(spec.encoder, precision)
    handle = spec.encoder if precision == "fp32" else f"{spec.encoder}_{precision}"
    assert loads == [handle]  # loaded by the warm-up, before the encoder is built
    vectors = spec.build().embed(TEXTS).vectors
    assert loads == [handle, os.path.join(fresh_export, "preprocessor")]  # nothing twice
    # the same numbers as the same model built without a warm-up (another path)
    cold = encoder_spec(tiny_export, precision=precision, poolings=("mean", "cls")).build()
    for column, want in cold.embed(TEXTS).vectors.items():
        np.testing.assert_allclose(vectors[column], want, atol=1e-6)


def test_a_failed_warm_up_is_reported_by_the_encoders_own_load(fresh_export, loads):
    spec = encoder_spec(fresh_export, precision="bf16")
    shutil.rmtree(f"{spec.encoder}_bf16")
    shutil.rmtree(spec.encoder)  # gone after the checks: the load fails on both threads
    assert spec.warm_up()
    warm_up.wait(spec.encoder, "bf16")  # the thread ended without raising
    with pytest.raises(ValueError, match="is not a folder"):
        spec.build()


def test_kinds_without_a_warm_up_load_as_before(fresh_export):
    from beam_embed.models.encoders.bert_tf1 import HubBertTf1Encoder

    spec = encoder_spec(fresh_export)
    assert not HubBertTf1Encoder.warms_up
    tf1 = spec.__class__(**{**spec.__dict__, "kind": "bert_tf1"})
    assert tf1.warm_up() is False
    warm_up.wait(tf1.encoder, tf1.precision)  # nothing started: returns at once


def test_one_handle_asked_for_by_two_threads_loads_once(fresh_export, loads):
    handle = os.path.join(fresh_export, "preprocessor")
    got, barrier = [], threading.Barrier(2)

    def load():
        barrier.wait()
        got.append(hub_loader.load_once(handle))

    threads = [threading.Thread(target=load) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == [handle] and got[0] is got[1]
