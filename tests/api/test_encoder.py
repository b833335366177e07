"""load_encoder for notebooks: encode gives the run's vectors in the order given, whatever the
batch size; a text the run would dead-letter is named; tokens are the `tokens` command's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from beam_embed import load_encoder
from beam_embed.pipeline.cli import main as cli
from tests.api.helpers import ROWS, SETTINGS, cosine
from tests.job_helpers import parquet_rows

GOOD = {r["id"]: r["text"] for r in ROWS if r["id"] in ("r1", "r2", "r3", "r4")}
MODEL_SETTINGS = {k: v for k, v in SETTINGS.items() if k != "batch_tokens"}


@pytest.mark.pipeline
def test_encode_gives_the_runs_vectors_in_order(tiny_export, reference_run):
    rows = parquet_rows(reference_run[0])
    encoder = load_encoder(tiny_export, pooling="mean", **MODEL_SETTINGS)
    ids = list(GOOD)[::-1]  # not the length order the encoder batches in
    for pooling in ("mean", "cls"):
        vectors = encoder.encode([GOOD[i] for i in ids], pooling=None if pooling == "mean"
                                 else pooling)
        assert vectors.dtype == np.float32 and vectors.shape == (len(ids), 8)
        for rid, vector in zip(ids, vectors):
            assert cosine(vector, rows[rid][pooling]) >= 0.99999, (rid, pooling)


def test_batch_size_changes_nothing_and_one_text_is_one_vector(tiny_export):
    encoder = load_encoder(tiny_export, pooling="mean")
    texts = ["the cat sat on the mat", "a dog", "the river bank was big", "play"]
    whole = encoder.encode(texts)
    np.testing.assert_allclose(encoder.encode(texts, batch_size=1), whole, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(texts[1]), whole[1], atol=1e-5)
    assert encoder.encode([]).shape == (0, 8)
    with pytest.raises(ValueError, match=r"text 2: empty text"):
        encoder.encode(["a dog", "play", "\u00a0 "])
    with pytest.raises(ValueError, match=r"unknown pooling 'avg'"):
        encoder.encode(texts, pooling="avg")


def test_tokens_are_the_tokens_commands(tiny_export, capsys):
    text = "The cats sat, playing! café"
    assert cli(["tokens", text, "--model", tiny_export, "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)["texts"]
    words = shown["words"][tiny_export]
    assert load_encoder(tiny_export).tokens(text) == list(zip(shown["labels"], words))
    assert ("cats", ["cat", "##s"]) in load_encoder(tiny_export).tokens(text)


def test_settings_are_checked_as_the_runs(tiny_export):
    with pytest.raises(TypeError, match=r"load_encoder\(\) got an unexpected keyword argument "
                                        r"'poolings'; did you mean pooling\?"):
        load_encoder(tiny_export, poolings=["mean"])
    with pytest.raises(ValueError, match=r"--max_seq_length must be a positive integer"):
        load_encoder(tiny_export, max_seq_length=0)


def test_bad_model_paths_are_named_with_what_was_expected(tmp_path, monkeypatch):
    expected = r"; expected a preset, one of \[.*\], a folder written by `beam-embed export-model`"
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(ValueError, match=rf"^model '{missing}' does not exist{expected}"):
        load_encoder(missing)
    monkeypatch.chdir(tmp_path)
    # ./ : a path, never a Hugging Face Hub id (ORG/NAME, tests/models/test_hub_models.py)
    with pytest.raises(ValueError, match=rf"^model './models/mini' does not exist \(relative to "
                                         rf"{tmp_path}\){expected}"):
        load_encoder("./models/mini")
    (tmp_path / "model.txt").write_text("not a model")
    with pytest.raises(ValueError, match=rf"^model 'model.txt' is a file, not a model "
                                         rf"folder{expected}"):
        load_encoder("model.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty is neither a `beam-embed export-model` folder "
                                         r"\(no beam_embed.json, encoder/, preprocessor/\) nor a "
                                         r"SavedModel \(no saved_model.pb\); it holds nothing"):
        load_encoder(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match=rf"model handle '{missing}' is not a folder; give a "
                                         "SavedModel folder"):
        load_encoder(encoder=missing)


def test_a_model_on_unreachable_storage_is_named(monkeypatch):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    with pytest.raises(OSError, match=r"^model 'gs://bkt/model' cannot be read: cannot connect "
                                      rf"to Cloud Storage \(127.0.0.1:{port}"):
        load_encoder("gs://bkt/model")
