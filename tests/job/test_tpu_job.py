"""`beam-embed run --accelerator tpu`, end to end on the CPU.

The job runs in-process exactly as on a TPU worker, except for one seam: the TPU's strategy
(beam_embed.models.accelerators.tpu_strategy) is TensorFlow's default strategy, on this CPU. Everything
else (fixed shapes, the XLA-compiled calls, padding dropped, bf16) is the production path.
Without the seam, a machine with no TPU refuses the run before reading anything.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from beam_embed.models import accelerators
from beam_embed.models.spec import encoder_spec
from beam_embed.pipeline.job.command import main
from tests.bert_reference import TINY_VOCAB
from tests.job_helpers import parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end


def _texts(n: int) -> list[str]:
    rng = np.random.default_rng(7)
    words = [w for w in TINY_VOCAB[5:] if not w.startswith("##")]
    return [" ".join(rng.choice(words, rng.integers(1, 30))) for _ in range(n)]


def test_the_tpu_job_embeds_every_record_once_as_the_graph_encoder_does(
        tiny_export, tmp_path, monkeypatch):
    monkeypatch.setattr(accelerators, "tpu_strategy", tf.distribute.get_strategy)
    texts = _texts(37)  # batches of 37 rows: every call group ends padded
    corpus = write_lines(str(tmp_path / "corpus.txt"), texts)
    manifest = run_job(str(tmp_path / "out"), "--input", corpus, "--model", tiny_export,
                       "--pooling", "mean,cls", "--accelerator", "tpu", "--precision", "fp32",
                       "--max_seq_length", "64", "--batch_tokens", "256",
                       "--max_batch_size", "64", "--format", "parquet")
    assert manifest["counts"]["read"] == manifest["counts"]["embedded"] == len(texts)
    rows = parquet_rows(str(tmp_path / "out"))
    assert len(rows) == len(texts)  # no padding row became a record
    want = encoder_spec(tiny_export, poolings=("mean", "cls"), max_seq_length=64).build()
    expected = want.embed(texts).vectors
    for i, text in enumerate(texts):
        row = rows[f"{corpus}:{i + 1}"]
        assert row["text"] == text
        for column in ("mean", "cls"):
            got = np.asarray(row[column])
            cosine = got @ expected[column][i] / np.linalg.norm(got) / np.linalg.norm(
                expected[column][i])
            assert cosine >= 0.99999, (column, i)


def test_without_a_tpu_the_run_is_refused_before_reading(tiny_export, tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "corpus.txt"), _texts(3))
    out = str(tmp_path / "out")
    code = main(["--input", corpus, "--model", tiny_export, "--accelerator", "tpu",
                 "--output", out, "--progress_every", "0"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--accelerator tpu: no TPU found on this machine" in err[0]
    assert not os.path.exists(out)
