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
