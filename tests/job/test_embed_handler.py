"""A record that breaks the encoder becomes a dead letter; the rest of its batch still embeds."""

from __future__ import annotations

import threading

import numpy as np

from beam_embed.models.embedder import Embedded
from beam_embed.models.spec import EncoderSpec
from beam_embed.pipeline.common.rows.records import DeadLetter, EmbeddedBatch, Record
from beam_embed.pipeline.job.embed import BundleBatch, BundleEnd, EncoderHandler


class _FailsOnBoom:
    """Embeds a text as its length; raises for texts containing "boom" (like a model error)."""

    def embed(self, texts):
        if any("boom" in t for t in texts):
            raise RuntimeError("kernel failed")
        n = np.array([len(t) for t in texts])
        return Embedded({"mean": n[:, None].astype(np.float32)}, n.astype(np.int32), n > 99)


def test_failing_record_is_isolated():
    spec = EncoderSpec("bert", "enc", "pre", 16, ("mean",), False, "truncate")
    handler = EncoderHandler(spec, progress_every_s=0)
    batch = [Record(f"r{i}", t, "src") for i, t in enumerate(["ab", "boom!", "abcd"])]
    out = handler.run_inference([batch], _FailsOnBoom())
    embedded = [o for o in out if isinstance(o, EmbeddedBatch)]
    dead = [o for o in out if isinstance(o, DeadLetter)]
    assert [b.records[0].id for b in embedded] == ["r0", "r2"]
    assert [float(b.vectors["mean"][0, 0]) for b in embedded] == [2.0, 4.0]
    assert len(dead) == 1 and dead[0].id == "r1"
    assert dead[0].reason == "encoder failed: RuntimeError: kernel failed"
    assert dead[0].excerpt == "boom!"


class _Gated(_FailsOnBoom):
    """Embeds once `gate` is set, recording the thread that ran it."""

    def __init__(self):
        self.gate, self.threads = threading.Event(), []

    def embed(self, texts):
        assert self.gate.wait(30), "the test never opened the gate"
        self.threads.append(threading.get_ident())
        return super().embed(texts)


def _ids(out):
    return [r.id for o in out for r in o.records]


def test_one_batch_in_flight_until_the_next_or_the_bundle_end():
    handler = EncoderHandler(EncoderSpec("bert", "enc", "pre", 16, ("mean",), False, "truncate"),
                             progress_every_s=0, in_flight=1)
    model = _Gated()
    first = BundleBatch("b1", tuple(Record(f"a{i}", "x" * (i + 1), "src") for i in range(3)))
    second = BundleBatch("b1", (Record("b0", "yy", "src"),))
    # returns while the encoder is still blocked: the batch is encoded in the background
    assert handler.run_inference([first], model) == []
    model.gate.set()
    out = handler.run_inference([second], model)
    assert _ids(out) == ["a0", "a1", "a2"]
    assert out[0].vectors["mean"][:, 0].tolist() == [1.0, 2.0, 3.0]
    assert _ids(handler.run_inference([BundleEnd("b1")], model)) == ["b0"]
    assert handler.run_inference([BundleEnd("b1")], model) == []
    assert threading.get_ident() not in model.threads


def test_two_in_flight_then_oldest_first_and_the_rest_at_the_bundle_end():
    handler = EncoderHandler(EncoderSpec("bert", "enc", "pre", 16, ("mean",), False, "truncate"),
                             progress_every_s=0)  # two in flight by default
    model = _Gated()
    batches = [BundleBatch("b1", tuple(Record(f"{k}{i}", "x" * (i + 1), "src") for i in range(2)))
               for k in "abc"]
    # the first two queue while the encoder is blocked: neither call waits
    assert handler.run_inference([batches[0]], model) == []
    assert handler.run_inference([batches[1]], model) == []
    model.gate.set()
    third = _ids(handler.run_inference([batches[2]], model))
    assert third[:2] == ["a0", "a1"]  # waited for the oldest; the second only if it was done
    rest = _ids(handler.run_inference([BundleEnd("b1")], model))
    assert third + rest == ["a0", "a1", "b0", "b1", "c0", "c1"]
    assert handler.run_inference([BundleEnd("b1")], model) == []


def test_batch_left_by_an_unfinished_bundle_is_dropped():
    handler = EncoderHandler(EncoderSpec("bert", "enc", "pre", 16, ("mean",), False, "truncate"),
                             progress_every_s=0)
    model = _Gated()
    model.gate.set()
    assert handler.run_inference([BundleBatch("failed", (Record("r0", "ab", "s"),))], model) == []
    # the runner retries the failed bundle as a new one: only the new bundle's records come out
    assert handler.run_inference([BundleBatch("retry", (Record("r0", "ab", "s"),))], model) == []
    assert _ids(handler.run_inference([BundleEnd("retry")], model)) == ["r0"]


def test_dead_letters_come_out_of_the_background_encoder_too():
    handler = EncoderHandler(EncoderSpec("bert", "enc", "pre", 16, ("mean",), False, "truncate"),
                             progress_every_s=0)
    batch = tuple(Record(f"r{i}", t, "src") for i, t in enumerate(["ab", "boom!"]))
    assert handler.run_inference([BundleBatch("b", batch)], _FailsOnBoom()) == []
    out = handler.run_inference([BundleEnd("b")], _FailsOnBoom())
    assert [type(o).__name__ for o in out] == ["EmbeddedBatch", "DeadLetter"]
    assert out[1].id == "r1"
