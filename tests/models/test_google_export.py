"""export-model on google-research/bert checkpoints: the released layout and an Estimator
fine-tune's folder, against the float64 numpy BERT with Google's tanh GELU."""

from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

from beam_embed.models.export.convert import export_checkpoint
from tests.bert_reference import forward
from tests.models.google_reference import fine_tune_extras, google_variables, write_google_folder

IDS = np.array([[2, 7, 9, 10, 5, 11, 3, 0, 0], [2, 12, 13, 3, 14, 19, 3, 0, 0],
                [2, 8, 3, 0, 0, 0, 0, 0, 0]], np.int32)
MASK = (IDS != 0).astype(np.int32)
TYPES = np.array([[0] * 9, [0, 0, 0, 0, 1, 1, 1, 0, 0], [0] * 9], np.int32)
REAL = MASK.astype(bool)


def _outputs(export_dir, precision="fp32"):
    name = "encoder" if precision == "fp32" else f"encoder_{precision}"
    enc = tf.saved_model.load(os.path.join(export_dir, name))
    out = enc({"input_word_ids": IDS, "input_mask": MASK, "input_type_ids": TYPES})
    return [t.numpy() for t in out["encoder_outputs"]], out["pooled_output"].numpy()


def _min_cosine(a, b):
    return float(((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)).min())


def _assert_matches(export_dir, weights, hidden_act):
    layers, pooled = _outputs(export_dir)
    ref_layers, ref_pooled = forward(weights, IDS, MASK, TYPES, layers=2, heads=2,
                                     hidden_act=hidden_act)
    assert len(layers) == len(ref_layers) == 2
    for got, ref in zip(layers, ref_layers):
        assert _min_cosine(got[REAL], ref[REAL]) >= 0.99999
        np.testing.assert_allclose(got[REAL], ref[REAL], atol=1e-5, rtol=1e-5)
    assert _min_cosine(pooled, ref_pooled) >= 0.99999
    np.testing.assert_allclose(pooled, ref_pooled, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_released_checkpoint_matches_numpy_bert_with_tanh_gelu(tmp_path, monkeypatch, hidden_act):
    """bert_config.json's "gelu" is modeling.py's tanh approximation, so it exports as gelu_new."""
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # neither is needed to export
    monkeypatch.setitem(sys.modules, "torch", None)
    src = str(tmp_path / "uncased_L-2_H-8_A-2")
    weights = write_google_folder(src, hidden_act=hidden_act, seed=7)
    out = str(tmp_path / "export")
    meta = export_checkpoint(src, out)
    shutil.rmtree(src)  # the export is self-contained
    _assert_matches(out, weights, "gelu_new")
    erf, _ = forward(weights, IDS, MASK, TYPES, layers=2, heads=2, hidden_act="gelu")
    tanh, _ = _outputs(out)
    assert np.abs(tanh[-1][REAL] - erf[-1][REAL]).max() > 1e-4  # the reading of "gelu" matters
    assert (meta["layout"], meta["hidden_act"], meta["activation"]) == (
        "google-research/bert", hidden_act, "gelu_new")
    assert "tanh approximation" in meta["activation_note"]
    assert (meta["name"], meta["width"], meta["layers"], meta["max_seq_length"]) == (
        "uncased_L-2_H-8_A-2", 8, 2, 64)
    assert meta["pooling"] == "cls" and meta["normalize"] is False and meta["has_pooler"]
    assert meta["weights"] == os.path.join(os.path.abspath(src), "bert_model.ckpt")
    assert meta["unused_variables"] == [] and meta["tokenizer"] == "google-research/bert"
    fp32 = tanh[-1][REAL]
    for precision in ("bf16", "fp16"):
        low, _ = _outputs(out, precision)
        assert _min_cosine(low[-1][REAL], fp32) >= 0.999


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory):
    """What run_classifier.py leaves: two checkpoints, a `checkpoint` file naming the later one
    by the training machine's absolute path, and task-head / optimizer variables."""
    src = str(tmp_path_factory.mktemp("fine_tuned"))
    old = write_google_folder(src, seed=1, checkpoint="model.ckpt-5")
    extras = fine_tune_extras(google_variables(old, layers=2))
    new = write_google_folder(src, seed=2, checkpoint="model.ckpt-12", extra=extras)
    with open(os.path.join(src, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "/train/out/model.ckpt-12"\n'
                'all_model_checkpoint_paths: "/train/out/model.ckpt-5"\n'
                'all_model_checkpoint_paths: "/train/out/model.ckpt-12"\n')
    return src, old, new, sorted(extras)


def test_estimator_folder_exports_the_latest_and_lists_every_unused_variable(fine_tuned,
                                                                            tmp_path):
    src, _, new, extras = fine_tuned
    out = str(tmp_path / "export")
    meta = export_checkpoint(src, out)
    _assert_matches(out, new, "gelu_new")
    assert meta["weights"] == os.path.join(os.path.abspath(src), "model.ckpt-12")
    assert meta["weights_chosen_by"] == "the latest in the checkpoint file"
    assert meta["unused_variables"] == extras
    assert {"output_weights", "output_bias", "global_step",
            "bert/encoder/layer_1/output/dense/kernel/adam_m"} <= set(extras)
    with tf.io.gfile.GFile(os.path.join(out, "beam_embed.json")) as f:
        assert json.load(f)["unused_variables"] == extras


def test_cli_checkpoint_and_lower_case_flags(fine_tuned, tmp_path, capsys):
    from beam_embed.pipeline.cli import main

    src, old, _, _ = fine_tuned
    out = str(tmp_path / "cli_export")
    assert main(["export-model", src, out, "--checkpoint", "model.ckpt-5", "--no-lower-case",
                 "--name", "step5"]) == 0
    printed = capsys.readouterr().out
    assert "exported step5 (2 layers, width 8" in printed and "cased;" in printed
    _assert_matches(out, old, "gelu_new")
    with open(os.path.join(out, "beam_embed.json")) as f:
        meta = json.load(f)
    assert (meta["lower_case"], meta["strip_accents"], meta["lower_case_source"]) == (
        False, False, "--no-lower-case")
    assert meta["weights"].endswith("model.ckpt-5") and meta["weights_chosen_by"] == "--checkpoint"
    assert meta["unused_variables"] == []  # model.ckpt-5 holds the model alone


CASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "The", "the", "Café", "café", "Été",
               "cat", "sat", "on", "mat", "Bank", "river", ".", ",", "big", "small"]


@pytest.mark.pipeline
def test_google_checkpoint_through_export_model_and_the_job(tmp_path):
    """docs/models.md's two commands on a cased checkpoint with accented words: every pooling of
    every record equals the numpy BERT (tanh GELU) on the ids the vocabulary gives, and a text
    longer than the model's 64 positions is truncated and flagged."""
    from beam_embed.pipeline.cli import main
    from tests.bert_reference import poolings_of_ids
    from tests.job_helpers import parquet_rows, tfrecord_rows, write_lines

    src, out = str(tmp_path / "cased_L-2_H-8_A-2"), str(tmp_path / "export")
    weights = write_google_folder(src, vocab=CASED_VOCAB, hidden_act="gelu", seed=3)
    assert main(["export-model", src, out]) == 0
    with open(os.path.join(out, "beam_embed.json")) as f:
        assert json.load(f)["lower_case"] is False  # inferred from the vocabulary
    texts = ["The Café sat on the mat .", "Été , the river Bank", "café big small",
             " ".join(["The cat sat on the mat ."] * 12)]  # 84 words: past 64 positions
    corpus = write_lines(str(tmp_path / "corpus.txt"), texts)
    job = str(tmp_path / "job")
    assert main(["run", "--input", corpus, "--model", out, "--output", job,
                 "--pooling", "cls,pooled_output,mean,mean@-2", "--progress_every", "0"]) == 0
    index = {w: i for i, w in enumerate(CASED_VOCAB)}
    ref, lengths = poolings_of_ids(weights, [[index[w] for w in t.split()] for t in texts],
                                   max_len=64, hidden_act="gelu_new")
    rows, examples = parquet_rows(job), tfrecord_rows(job)
    columns = {"cls": "cls", "pooled_output": "pooled_output", "mean": "mean",
               "mean@-2": "mean_layer_m2"}
    for i, text in enumerate(texts):
        row = rows[f"{corpus}:{i + 1}"]
        assert row["truncated"] is (i == 3) and row["num_tokens"] == len(text.split()) + 2
        for spec, column in columns.items():
            got, want = np.asarray(row[column], np.float64), ref[spec][i]
            cosine = got @ want / np.linalg.norm(got) / np.linalg.norm(want)
            assert cosine >= 0.99999, (text, spec, cosine)
            np.testing.assert_array_equal(examples[f"{corpus}:{i + 1}"][column],
                                          np.float32(row[column]))
    assert lengths[3] == 64
