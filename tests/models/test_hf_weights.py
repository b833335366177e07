"""Hugging Face folders read without keras-hub: safetensors (one file or sharded), any prefix,
both LayerNorm spellings, bf16 storage; extra heads listed, a missing pooler reported and its
pooled_output refused."""

from __future__ import annotations

import json
import os
import sys

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from beam_embed.models.export.checkpoint import CheckpointError
from beam_embed.models.export.convert import export_checkpoint
from beam_embed.models.export.weight_map import HF_NAMES, Tensors, map_weights
from beam_embed.models.spec import encoder_spec
from tests.bert_reference import forward, write_checkpoint

IDS = np.array([[2, 7, 9, 10, 5, 11, 3, 0], [2, 12, 13, 3, 14, 19, 3, 0], [2, 8, 3, 0, 0, 0, 0, 0]],
               np.int32)
MASK = (IDS != 0).astype(np.int32)
TYPES = np.array([[0] * 8, [0, 0, 0, 0, 1, 1, 1, 0], [0] * 8], np.int32)
REAL = MASK.astype(bool)


def _rewrite(folder, rename=lambda k: k, extra=None, shards=1, dtype=np.float32, drop=()):
    """Re-saves write_checkpoint's model.safetensors with other names, extras and sharding."""
    path = os.path.join(folder, "model.safetensors")
    tensors = {rename(k): v.astype(dtype) for k, v in load_file(path).items()
               if not any(k.endswith(d) for d in drop)} | (extra or {})
    os.remove(path)
    if shards == 1:
        save_file(tensors, path)
        return
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        shard = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = names[s::shards]
        save_file({n: tensors[n] for n in part}, os.path.join(folder, shard))
        weight_map.update(dict.fromkeys(part, shard))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


def _export_and_compare(src, out, weights):
    meta = export_checkpoint(src, out)
    enc = tf.saved_model.load(os.path.join(out, "encoder"))
    got = enc({"input_word_ids": IDS, "input_mask": MASK, "input_type_ids": TYPES})
    layers, pooled = forward(weights, IDS, MASK, TYPES, layers=2, heads=2)
    for mine, ref in zip(got["encoder_outputs"], layers):
        np.testing.assert_allclose(mine.numpy()[REAL], ref[REAL], atol=1e-5, rtol=1e-5)
    return meta, got["pooled_output"].numpy(), pooled


def test_sharded_prefixed_gamma_beta_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "keras_hub", None)
    src = str(tmp_path / "src")
    weights = write_checkpoint(src, seed=11, prefix="bert.")
    extra = {"cls.predictions.bias": np.zeros(30, np.float32),
             "cls.predictions.transform.dense.weight": np.ones((8, 8), np.float32),
             "bert.embeddings.position_ids": np.arange(64, dtype=np.int64)[None]}
    _rewrite(src, lambda k: k.replace("LayerNorm.weight", "LayerNorm.gamma")
             .replace("LayerNorm.bias", "LayerNorm.beta"), extra, shards=2)
    meta, pooled, ref_pooled = _export_and_compare(src, str(tmp_path / "out"), weights)
    np.testing.assert_allclose(pooled, ref_pooled, atol=1e-5, rtol=1e-5)
    assert meta["unused_variables"] == sorted(extra)
    assert meta["weights"].endswith("model.safetensors.index.json")
    assert meta["activation"] == "gelu" and "exact erf" in meta["activation_note"]


def test_unprefixed_bf16_checkpoint_with_a_classifier_head(tmp_path):
    src = str(tmp_path / "src")
    weights = write_checkpoint(src, seed=12, prefix="")
    extra = {"classifier.weight": np.ones((3, 8), np.float32),
             "classifier.bias": np.zeros(3, np.float32)}
    _rewrite(src, extra=extra, dtype=ml_dtypes.bfloat16)
    rounded = {k: v.astype(ml_dtypes.bfloat16).astype(np.float32) for k, v in weights.items()}
    meta, pooled, ref_pooled = _export_and_compare(src, str(tmp_path / "out"), rounded)
    np.testing.assert_allclose(pooled, ref_pooled, atol=1e-5, rtol=1e-5)
    assert meta["unused_variables"] == ["classifier.bias", "classifier.weight"]


def test_missing_pooler_exports_zeros_and_says_so(tmp_path, caplog):
    src = str(tmp_path / "src")
    weights = write_checkpoint(src, seed=13)
    _rewrite(src, drop=("pooler.dense.weight", "pooler.dense.bias"))
    meta, pooled, _ = _export_and_compare(src, str(tmp_path / "out"), weights)
    assert not pooled.any()
    assert meta["has_pooler"] is False and "no pooler" in meta["warnings"][0]
    assert "no pooler" in caplog.text
    with pytest.raises(ValueError, match=r"pooled_output.*no pooler.*'cls', 'lasttoken', 'max', 'mean'"):
        encoder_spec(str(tmp_path / "out"), poolings=("cls", "pooled_output"))
    assert encoder_spec(str(tmp_path / "out"), poolings=("cls", "mean")).poolings == ("cls", "mean")


CONFIG = {"hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2,
          "num_hidden_layers": 2, "vocab_size": 30, "max_position_embeddings": 64}


def _tensors(weights):
    return Tensors(tuple(weights), weights.__getitem__, HF_NAMES)


@pytest.fixture(scope="module")
def hf_weights(tmp_path_factory):
    return write_checkpoint(str(tmp_path_factory.mktemp("w")), prefix="")


@pytest.mark.parametrize("edit, config, message", [
    (lambda w: w.pop("encoder.layer.1.output.dense.bias"), {},
     "no tensor encoder.layer.1.output.dense.bias"),
    (lambda w: None, {"intermediate_size": 32},
     r"encoder.layer.0.intermediate.dense.weight has shape \[16, 8\] where the config implies "
     r"\[32, 8\]"),
    (lambda w: w.update({"student." + k: v for k, v in list(w.items())}), {},
     r"several BERT models in one checkpoint, under the prefixes \['', 'student.'\]"),
    (lambda w: w.clear(), {}, "no BERT word-embedding table"),
    (lambda w: None, {"num_attention_heads": 3}, "not a multiple of num_attention_heads 3"),
])
def test_weights_that_do_not_fit_fail_in_one_line(hf_weights, edit, config, message):
    weights = dict(hf_weights)
    edit(weights)
    with pytest.raises(CheckpointError, match=message) as info:
        map_weights(_tensors(weights), CONFIG | config, "gelu", "ckpt/model.safetensors")
    assert "\n" not in str(info.value) and str(info.value).startswith("ckpt/model.safetensors: ")
