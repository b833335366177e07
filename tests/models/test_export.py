"""export-model: the exported SavedModels honour the TF-Hub BERT contracts and the checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from beam_embed.models.export.checkpoint import CheckpointError
from beam_embed.models.export.convert import export_checkpoint
from tests.bert_reference import forward, write_checkpoint

IDS = np.array([[2, 7, 9, 10, 5, 11, 3, 0, 0], [2, 12, 13, 3, 14, 19, 3, 0, 0],
                [2, 8, 3, 0, 0, 0, 0, 0, 0]], np.int32)
MASK = (IDS != 0).astype(np.int32)
TYPES = np.array([[0] * 9, [0, 0, 0, 0, 1, 1, 1, 0, 0], [0] * 9], np.int32)
RELOAD = textwrap.dedent("""
    import sys, json, numpy as np
    sys.modules["keras_hub"] = None  # the export must not need keras-hub
    import tensorflow as tf, tensorflow_text
    enc = tf.saved_model.load(sys.argv[1] + "/encoder")
    out = enc({"input_word_ids": tf.constant(json.loads(sys.argv[2])),
               "input_mask": tf.constant(json.loads(sys.argv[3])),
               "input_type_ids": tf.constant(json.loads(sys.argv[4]))})
    np.savez(sys.argv[5], pooled=out["pooled_output"].numpy(), default=out["default"].numpy(),
             seq=out["sequence_output"].numpy(),
             **{f"layer{i}": t.numpy() for i, t in enumerate(out["encoder_outputs"])})
""")


def _reload_outputs(export_dir, tmp_path):
    result = tmp_path / "out.npz"
    subprocess.run([sys.executable, "-c", RELOAD, export_dir, json.dumps(IDS.tolist()),
                    json.dumps(MASK.tolist()), json.dumps(TYPES.tolist()), str(result)],
                   check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return np.load(result)


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_tiny_export_matches_numpy_bert_without_its_source(tmp_path, hidden_act):
    src = str(tmp_path / "src")
    weights = write_checkpoint(src, hidden_act=hidden_act, seed=3)
    out = str(tmp_path / "export")
    export_checkpoint(src, out)
    shutil.rmtree(src)  # the export must be self-contained
    got = _reload_outputs(out, tmp_path)
    layers, pooled = forward(weights, IDS, MASK, TYPES, layers=2, heads=2, hidden_act=hidden_act)
    real = MASK.astype(bool)
    for i, ref in enumerate(layers):
        np.testing.assert_allclose(got[f"layer{i}"][real], ref[real], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got["seq"], got["layer1"])
    np.testing.assert_allclose(got["pooled"], pooled, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got["default"], got["pooled"])


def test_tiny_export_matches_keras_hub_backbone(tmp_path):
    """keras-hub's BertBackbone (tanh GELU) on the same checkpoint agrees with a gelu_new export."""
    import keras_hub

    src = str(tmp_path / "src")
    write_checkpoint(src, hidden_act="gelu_new", seed=5)
    out = str(tmp_path / "export")
    export_checkpoint(src, out)
    backbone = keras_hub.models.BertBackbone.from_preset(src, dtype="float32")
    ref = backbone({"token_ids": IDS, "segment_ids": TYPES, "padding_mask": MASK})
    enc = tf.saved_model.load(os.path.join(out, "encoder"))
    got = enc({"input_word_ids": IDS, "input_mask": MASK, "input_type_ids": TYPES})
    real = MASK.astype(bool)
    np.testing.assert_allclose(got["sequence_output"].numpy()[real],
                               np.asarray(ref["sequence_output"])[real], atol=1e-5)
    np.testing.assert_allclose(got["pooled_output"].numpy(), np.asarray(ref["pooled_output"]),
                               atol=1e-5)


def test_encoder_accepts_any_sequence_length(tiny_export):
    enc = tf.saved_model.load(os.path.join(tiny_export, "encoder"))
    for seq in (3, 17, 64):
        ids = np.full((2, seq), 5, np.int32)
        out = enc({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                   "input_type_ids": np.zeros_like(ids)})
        assert out["sequence_output"].shape == (2, seq, 8)
        assert len(out["encoder_outputs"]) == 2


def test_preprocessor_contract(tiny_export):
    pre = tf.saved_model.load(os.path.join(tiny_export, "preprocessor"))
    tokens = pre.tokenize(tf.constant(["The cats sat.", "Café!", ""]))
    assert tokens.shape.rank == 3  # [batch, words, pieces]
    # lower-casing strips accents, so "Café" is "cafe", which this vocab lacks: [UNK] (id 1)
    assert tokens.to_list() == [[[5], [7, 19], [9], [23]], [[1], [25]], []]
    packed = pre.bert_pack_inputs([tokens], seq_length=6)
    np.testing.assert_array_equal(packed["input_word_ids"].numpy(),
                                  [[2, 5, 7, 19, 9, 3], [2, 1, 25, 3, 0, 0], [2, 3, 0, 0, 0, 0]])
    np.testing.assert_array_equal(packed["input_mask"].numpy()[1], [1, 1, 1, 1, 0, 0])
    pair = pre.bert_pack_inputs([tokens, tokens], seq_length=10)
    np.testing.assert_array_equal(pair["input_type_ids"].numpy()[1], [0, 0, 0, 0, 1, 1, 1, 0, 0, 0])
    assert pre(tf.constant(["a dog"]))["input_word_ids"].shape == (1, 128)


def test_metadata_reads_sentence_transformers_pooling(minilm_export):
    with open(os.path.join(minilm_export, "beam_embed.json")) as f:
        meta = json.load(f)
    assert (meta["pooling"], meta["normalize"], meta["width"], meta["layers"]) == ("mean", True, 384, 6)
    assert meta["max_seq_length"] == 256 and meta["lower_case"] is True


def test_minilm_reference_vector(minilm_export):
    """sentence-transformers' published all-MiniLM-L6-v2 vector for this sentence."""
    pre = tf.saved_model.load(os.path.join(minilm_export, "preprocessor"))
    enc = tf.saved_model.load(os.path.join(minilm_export, "encoder"))
    packed = pre(tf.constant(["This is an example sentence"]))
    seq = enc(packed)["sequence_output"].numpy()
    mask = packed["input_mask"].numpy()[..., None]
    v = (seq * mask).sum(1) / mask.sum(1)
    v = v / np.linalg.norm(v)
    np.testing.assert_allclose(v[0, :5], [0.0677, 0.0634, 0.0488, 0.0793, 0.0374], atol=1e-3)


def test_minilm_agrees_with_keras_hub(minilm_export, minilm_checkpoint):
    import keras_hub

    pre = tf.saved_model.load(os.path.join(minilm_export, "preprocessor"))
    enc = tf.saved_model.load(os.path.join(minilm_export, "encoder"))
    sentences = ["A man is playing a guitar.", "The stock market fell sharply on Monday.",
                 "Proteins fold into three-dimensional structures.", "Kids play in the park."]
    packed = pre.bert_pack_inputs([pre.tokenize(tf.constant(sentences))], seq_length=24)
    ours = enc(packed)["sequence_output"].numpy()
    backbone = keras_hub.models.BertBackbone.from_preset(minilm_checkpoint, dtype="float32")
    ref = np.asarray(backbone({"token_ids": packed["input_word_ids"],
                               "segment_ids": packed["input_type_ids"],
                               "padding_mask": packed["input_mask"]})["sequence_output"])
    mask = packed["input_mask"].numpy()[..., None]
    a, b = (ours * mask).sum(1) / mask.sum(1), (ref * mask).sum(1) / mask.sum(1)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() >= 0.99999


def _broken(tmp_path, edit):
    src = str(tmp_path / "bad")
    write_checkpoint(src)
    edit(src)
    return src


@pytest.mark.parametrize("edit, message", [
    (lambda d: os.remove(os.path.join(d, "config.json")), "has no config.json"),
    (lambda d: os.remove(os.path.join(d, "vocab.txt")), "has no vocab.txt"),
    (lambda d: os.remove(os.path.join(d, "model.safetensors")), "no weights"),
    (lambda d: _rewrite_config(d, model_type="gpt2"), "'gpt2' is not a BERT-family"),
    (lambda d: _append(os.path.join(d, "vocab.txt"), "extra\n"), "does not belong to these weights"),
    (lambda d: os.rename(os.path.join(d, "model.safetensors"), os.path.join(d, "pytorch_model.bin")),
     "holds pytorch_model.bin; reading it needs PyTorch"),
])
def test_bad_checkpoints_fail_with_one_clear_line(tmp_path, monkeypatch, edit, message):
    monkeypatch.setitem(sys.modules, "torch", None)  # as on a machine without PyTorch
    src = _broken(tmp_path, edit)
    with pytest.raises(CheckpointError, match=message) as info:
        export_checkpoint(src, str(tmp_path / "out"))
    assert "\n" not in str(info.value) and src in str(info.value)


def _rewrite_config(folder, **changes):
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        config = json.load(f)
    config.update(changes)
    with open(path, "w") as f:
        json.dump(config, f)


def _append(path, text):
    with open(path, "a") as f:
        f.write(text)


@pytest.mark.pipeline
def test_cli_export_model(tiny_checkpoint, tmp_path, capsys):
    from beam_embed.pipeline.cli import main

    out = str(tmp_path / "cli_export")
    assert main(["export-model", tiny_checkpoint[0], out, "--name", "tiny"]) == 0
    assert "exported tiny (2 layers, width 8" in capsys.readouterr().out
    assert sorted(os.listdir(out)) == ["beam_embed.json", "encoder", "encoder_bf16", "encoder_fp16",
                                       "preprocessor"]
    assert main(["export-model", str(tmp_path / "nowhere"), out, "--overwrite"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.pipeline
def test_cli_export_model_replaces_an_export_only_with_overwrite(tiny_checkpoint, tmp_path,
                                                                 capsys):
    from beam_embed.pipeline.cli import main

    out = str(tmp_path / "cli_export")
    assert main(["export-model", tiny_checkpoint[0], out, "--name", "first"]) == 0
    capsys.readouterr()
    assert main(["export-model", tiny_checkpoint[0], out, "--name", "second"]) == 2
    err = capsys.readouterr().err
    assert err == (f"beam-embed export-model: OUT_DIR {out!r} holds an export already "
                   "(beam_embed.json, encoder, encoder_bf16, encoder_fp16, preprocessor); pass "
                   "--overwrite to replace it or choose another OUT_DIR\n")
    with open(os.path.join(out, "beam_embed.json")) as f:
        assert json.load(f)["name"] == "first"
    assert main(["export-model", tiny_checkpoint[0], out, "--name", "second",
                 "--overwrite"]) == 0
    with open(os.path.join(out, "beam_embed.json")) as f:
        assert json.load(f)["name"] == "second"
    # a folder holding other files only is no export: written without asking
    other = tmp_path / "notes"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert main(["export-model", tiny_checkpoint[0], str(other)]) == 0
    assert (other / "notes.txt").read_text() == "mine"
