"""The keras_hub kind: a Hugging Face BERT folder given alone (`--encoder FOLDER`), run by
keras-hub, agrees with the `bert` kind's export of the same checkpoint."""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

from beam_embed.models.encoders.keras_hub import KerasHubBertEncoder
from beam_embed.models.spec import encoder_spec
from beam_embed.process.versions import install_command
from tests.job_helpers import parquet_rows, run_job, write_lines

TEXTS = ["The cat sat on the mat.", "A short one", "Embeddings of sentences, compared across "
         "two ways of running the same checkpoint: keras-hub and an export-model export.",
         "x"]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_a_lone_hugging_face_folder_is_the_keras_hub_kind(minilm_checkpoint):
    spec = encoder_spec(encoder=minilm_checkpoint, poolings=("mean",))
    assert (spec.kind, spec.max_seq_length, spec.max_positions()) == ("keras_hub", 512, 512)


def test_mean_pooling_matches_the_bert_export(minilm_checkpoint, minilm_export):
    poolings = ("mean", "cls", "max", "mean@-2")
    embedder = encoder_spec(encoder=minilm_checkpoint, poolings=poolings).build()
    ours = embedder.embed(TEXTS)
    export = encoder_spec(minilm_export, poolings=poolings).build().embed(TEXTS)
    np.testing.assert_array_equal(ours.num_tokens, export.num_tokens)  # the same pieces
    assert len(embedder.columns) == 4
    for column in embedder.columns:
        cosine = _cosines(ours.vectors[column], export.vectors[column])
        assert cosine.min() >= 0.9999, (column, cosine)


def test_fingerprint_is_over_the_folder_files(minilm_checkpoint, tmp_path):
    copy = str(tmp_path / "copy")
    shutil.copytree(minilm_checkpoint, copy)
    same = KerasHubBertEncoder.fingerprint(copy)
    assert same == KerasHubBertEncoder.fingerprint(minilm_checkpoint) and len(same) == 16
    with open(os.path.join(copy, "config.json"), "a") as f:
        f.write("\n")
    assert KerasHubBertEncoder.fingerprint(copy) != same


def test_what_it_lacks_is_refused_before_loading(minilm_checkpoint):
    with pytest.raises(ValueError, match="--granularity token is not available for keras_hub "
                                         r"encoders \(keras-hub's tokenizer gives no word"):
        encoder_spec(encoder=minilm_checkpoint, granularity="token")
    with pytest.raises(ValueError, match="unknown pooling 'pooled_output'"):
        encoder_spec(encoder=minilm_checkpoint, poolings=("pooled_output",))


def test_without_keras_hub_it_says_which_extra_to_install(minilm_checkpoint, monkeypatch):
    monkeypatch.setitem(sys.modules, "keras_hub", None)
    with pytest.raises(ValueError, match=r"needs keras-hub ") as e:
        encoder_spec(encoder=minilm_checkpoint)
    # this environment's own install command: the checkout it was installed from, not an index
    # that serves no beam-embed
    assert str(e.value).endswith(install_command("keras-hub"))
    assert "[keras-hub]" in str(e.value)


@pytest.mark.pipeline
def test_run_with_a_lone_hugging_face_folder(minilm_checkpoint, tmp_path):
    corpus = write_lines(str(tmp_path / "corpus.txt"), TEXTS)
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--encoder", minilm_checkpoint,
                       "--pooling", "mean,mean@-2")
    model = manifest["model"]
    assert (model["kind"], model["encoder"]) == ("keras_hub", minilm_checkpoint)
    assert model["fingerprint"] == KerasHubBertEncoder.fingerprint(minilm_checkpoint)
    assert [p["width"] for p in manifest["poolings"]] == [384, 384]
    rows = parquet_rows(out)
    assert len(rows) == len(TEXTS)
    # against keras-hub's backbone called directly: each text alone (no padding, no buckets),
    # tokenized by the folder's own tokenizer.json, pooled here
    direct = _keras_hub_directly(minilm_checkpoint, TEXTS)
    for pooling, layer in zip(manifest["poolings"], (-1, -2)):
        got = np.stack([rows[f"{corpus}:{i + 1}"][pooling["column"]] for i in range(len(TEXTS))])
        want = np.stack([tokens[layer].mean(axis=0) for tokens in direct])
        if pooling["normalize"]:
            want /= np.linalg.norm(want, axis=1, keepdims=True)
        assert got.shape == (4, 384)
        assert _cosines(got, want).min() >= 0.99999, pooling["column"]
        np.testing.assert_allclose(got, want, atol=5e-6)  # measured: 9.2e-7


def _keras_hub_directly(folder: str, texts: list[str]) -> list[dict[int, np.ndarray]]:
    """Per text, {-1: last layer's, -2: the one before's} token vectors [tokens, width], from
    keras-hub's BertBackbone run on the ids of the Hugging Face tokenizer (tokenizer.json)."""
    import keras
    import keras_hub
    import tokenizers

    ref = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    ref.no_padding()
    backbone = keras_hub.models.BertBackbone.from_preset(folder, dtype="float32")
    layers = keras.Model(backbone.input, [backbone.transformer_layers[-1].output,
                                          backbone.transformer_layers[-2].output])
    out = []
    for text in texts:
        ids = np.array([ref.encode(text).ids], np.int32)
        last, before = layers({"token_ids": ids, "segment_ids": np.zeros_like(ids),
                               "padding_mask": np.ones_like(ids)})
        out.append({-1: np.asarray(last)[0].astype(np.float64),
                    -2: np.asarray(before)[0].astype(np.float64)})
    return out
