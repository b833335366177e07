"""ELMo through the job: every pooling against numpy on the module's raw outputs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.elmo_fixture import build_tiny_elmo
from tests.job_helpers import parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

TEXTS = ["The man, in prison.", "cell", "He watched the animal from his cell!", "a b"]
WORDS = [["The", "man", ",", "in", "prison", "."], ["cell"],
         ["He", "watched", "the", "animal", "from", "his", "cell", "!"], ["a", "b"]]
OUTPUTS = ("elmo", "word_emb", "lstm_outputs1", "lstm_outputs2")


@pytest.fixture(scope="module")
def tiny_elmo(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("elmo") / "module")
    build_tiny_elmo(path)
    return path


def _raw(module_path, words):
    """The module's `tokens` signature on one padded batch of all texts."""
    module = tf.saved_model.load(module_path, tags=[])
    lengths = np.array([len(w) for w in words], np.int32)
    tokens = np.array([w + [""] * (lengths.max() - len(w)) for w in words], object)
    out = module.signatures["tokens"](tokens=tf.constant(tokens.astype(str)),
                                      sequence_len=tf.constant(lengths))
    return {k: v.numpy() for k, v in out.items()}, lengths


def test_every_elmo_pooling_matches_numpy_with_padding(tiny_elmo, tmp_path):
    corpus = write_lines(str(tmp_path / "c.txt"), TEXTS)
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--encoder", tiny_elmo,
                       "--pooling", "default," + ",".join(OUTPUTS), "--batch_tokens", "100000")
    assert manifest["model"]["kind"] == "elmo"
    raw, lengths = _raw(tiny_elmo, WORDS)
    mask = (np.arange(lengths.max())[None, :] < lengths[:, None]).astype(np.float64)[..., None]
    rows = parquet_rows(out)
    for i in range(len(TEXTS)):
        row = rows[f"{corpus}:{i + 1}"]
        assert row["num_tokens"] == lengths[i]
        np.testing.assert_allclose(row["default"], raw["default"][i], atol=1e-5)
        for name in OUTPUTS:
            want = (raw[name] * mask).sum(1)[i] / lengths[i]
            np.testing.assert_allclose(row[name], want, atol=1e-5, err_msg=name)
        # the module's default is the mask-aware mean of elmo; padding has non-zero garbage
        np.testing.assert_allclose(row["default"], row["elmo"], atol=1e-5)
        if lengths[i] < lengths.max():
            assert not np.allclose(raw["elmo"][i].mean(0), row["elmo"], atol=1e-3)


def test_default_signature_keeps_the_modules_space_split(tiny_elmo, tmp_path):
    corpus = write_lines(str(tmp_path / "c.txt"), TEXTS[:1])
    out = str(tmp_path / "out")
    run_job(out, "--input", corpus, "--encoder", tiny_elmo, "--elmo-signature", "default",
            "--granularity", "token")
    row = next(iter(parquet_rows(out).values()))
    assert row["tokens"] == ["The", "man,", "in", "prison."]
    module = tf.saved_model.load(tiny_elmo, tags=[])
    raw = module.signatures["default"](text=tf.constant(TEXTS[:1]))["elmo"].numpy()[0]
    np.testing.assert_allclose(np.array(row["vectors"]), raw, atol=1e-5)
