"""A record that breaks the encoder becomes a dead letter; the rest of its batch still embeds."""

from __future__ import annotations

import numpy as np

from models.embedder import Embedded
from pipeline.embed import EncoderHandler, EncoderSpec
from pipeline.records import DeadLetter, EmbeddedBatch, Record


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
