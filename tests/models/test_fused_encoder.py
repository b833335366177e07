"""The export's fused encoder functions (`fp32`, `bf16`) against the independent numpy BERT
(tests/bert_reference.py) for each activation, and `--precision fp32` running the fused fp32
function of an export-model encoder (the contract's own call for other encoders)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from beam_embed.models.encoders.bert import load_pair, precision_handle, select_precision
from beam_embed.models.export.convert import export_checkpoint
from tests.bert_reference import forward, write_checkpoint

IDS = np.array([[2, 7, 9, 10, 5, 11, 3, 0, 0], [2, 12, 13, 3, 14, 19, 3, 0, 0],
                [2, 8, 3, 0, 0, 0, 0, 0, 0]], np.int32)
MASK = (IDS != 0).astype(np.int32)
TYPES = np.array([[0] * 9, [0, 0, 0, 0, 1, 1, 1, 0, 0], [0] * 9], np.int32)
INPUTS = {"input_word_ids": IDS, "input_mask": MASK, "input_type_ids": TYPES}
REAL = MASK.astype(bool)


@pytest.fixture(scope="module", params=["gelu", "gelu_new", "relu"])
def export(request, tmp_path_factory):
    """(activation, checkpoint weights, loaded encoder, export folder) of a tiny random 2-layer
    BERT."""
    act = request.param
    src = str(tmp_path_factory.mktemp(f"ckpt_{act}"))
    weights = write_checkpoint(src, hidden_act=act, seed=11)
    out = str(tmp_path_factory.mktemp(f"export_{act}"))
    export_checkpoint(src, out)
    return act, weights, tf.saved_model.load(os.path.join(out, "encoder")), out


def _cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def test_fused_fp32_matches_numpy_bert(export):
    act, weights, enc, _ = export
    out = enc.fp32(INPUTS)
    layers, pooled = forward(weights, IDS, MASK, TYPES, layers=2, heads=2, hidden_act=act)
    for i, ref in enumerate(layers):  # every layer, every real token
        got = out["encoder_outputs"][i].numpy()
        assert got.dtype == np.float32 and got.shape == ref.shape
        np.testing.assert_allclose(got[REAL], ref[REAL], atol=1e-5, rtol=1e-5, err_msg=f"layer {i}")
    np.testing.assert_array_equal(out["sequence_output"].numpy(),
                                  out["encoder_outputs"][-1].numpy())
    np.testing.assert_allclose(out["pooled_output"].numpy(), pooled, atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(out["default"].numpy(), out["pooled_output"].numpy())


def test_fused_fp32_equals_the_contract_call(export):
    """Every output of every position, padding included, within float32 rounding."""
    _, _, enc, _ = export
    fused, call = enc.fp32(INPUTS), enc(INPUTS)
    for i, (a, b) in enumerate(zip(fused["encoder_outputs"], call["encoder_outputs"])):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, err_msg=f"layer {i}")
    np.testing.assert_allclose(fused["pooled_output"].numpy(), call["pooled_output"].numpy(),
                               atol=1e-5)


def test_fused_bf16_matches_numpy_bert(export):
    act, weights, _, folder = export
    low = tf.saved_model.load(os.path.join(folder, "encoder_bf16"))
    out = low(INPUTS)
    layers, pooled = forward(weights, IDS, MASK, TYPES, layers=2, heads=2, hidden_act=act)
    for i, ref in enumerate(layers):
        got = out["encoder_outputs"][i].numpy()
        assert _cosine(got[REAL], ref[REAL]).min() >= 0.999, f"layer {i}"
        np.testing.assert_allclose(got[REAL], ref[REAL], atol=0.1)
    assert _cosine(out["pooled_output"].numpy(), pooled).min() >= 0.999


def test_fp32_precision_runs_the_fused_function(export, tmp_path):
    """export-model encoders: the fused fp32 function; encoders without it (TF-Hub's own): the
    contract's call, which is still exact."""
    _, _, enc, _ = export
    fn = select_precision(enc, "export", "fp32")
    assert fn is enc.fp32
    np.testing.assert_allclose(fn(INPUTS)["sequence_output"].numpy(),
                               enc(INPUTS)["sequence_output"].numpy(), atol=1e-5)

    class CallOnly(tf.Module):
        @tf.function(input_signature=[{k: tf.TensorSpec([None, None], tf.int32, name=k)
                                       for k in INPUTS}])
        def __call__(self, inputs):
            return {"sequence_output": tf.cast(inputs["input_word_ids"], tf.float32)}

    path = str(tmp_path / "call_only")
    tf.saved_model.save(CallOnly(), path)
    call_only = tf.saved_model.load(path)
    assert select_precision(call_only, path, "fp32") is call_only
    with pytest.raises(ValueError, match="precision 'bf16' needs an encoder exported by"):
        select_precision(call_only, path, "bf16")


@pytest.mark.parametrize("flags, warned", [({"avx2", "fma"}, True),
                                           ({"avx512f", "avx512_bf16"}, False),
                                           ({"amx_tile", "amx_bf16"}, False)])
def test_bf16_without_bf16_hardware_warns(export, monkeypatch, caplog, flags, warned):
    """Where the CPU has neither AMX nor AVX-512 BF16, bf16 is emulated: the user is told fp32 is
    the fast precision there (and bf16 still runs)."""
    from beam_embed.models import cpu
    from beam_embed.models.encoders import bert

    _, _, _, folder = export
    monkeypatch.setattr(cpu, "cpu_flags", lambda: frozenset(flags))
    bert._warn_once.cache_clear()  # a fresh process
    handle = precision_handle(os.path.join(folder, "encoder"), "bf16")
    low = tf.saved_model.load(handle)
    with caplog.at_level("WARNING"):
        fn = select_precision(low, handle, "bf16", own=True)
        select_precision(low, handle, "bf16", own=True)  # the worker's load, after the launcher's
    message = "bf16 is emulated here, no faster than fp32 and less exact"
    assert caplog.text.count(message) == int(warned)  # once a process
    assert fn is low


def test_each_low_precision_is_its_own_saved_model(export):
    """`encoder/` holds only float32 graphs (loading it parses no bf16/fp16 weights);
    `encoder_bf16/` and `encoder_fp16/` are the same contract, each loaded alone for its
    precision, and give the same outputs as the fused graph traced in memory."""
    _, _, enc, folder = export
    encoder = os.path.join(folder, "encoder")
    assert not hasattr(enc, "bf16") and not hasattr(enc, "fp16")
    for precision, atol in (("bf16", 0.1), ("fp16", 0.01)):
        handle = precision_handle(encoder, precision)
        assert handle == os.path.join(folder, f"encoder_{precision}")
        _, low = load_pair(encoder, os.path.join(folder, "preprocessor"), precision)
        assert not hasattr(low, "fp32")
        assert select_precision(low, handle, precision, own=True) is low
        got, ref = low(INPUTS), enc.fp32(INPUTS)
        np.testing.assert_allclose(got["sequence_output"].numpy()[REAL],
                                   ref["sequence_output"].numpy()[REAL], atol=atol)
        served = low.signatures["serving_default"](**{k: tf.constant(v) for k, v in INPUTS.items()})
        np.testing.assert_array_equal(served["sequence_output"].numpy(),
                                      got["sequence_output"].numpy())
    assert precision_handle(encoder, "fp32") == encoder


def test_an_encoder_holding_every_precision_still_runs(tmp_path):
    """Exports of formats 3-4 kept `bf16`/`fp16` functions on `encoder/` itself (no sibling
    folder): that function is the one selected."""
    spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in INPUTS}

    class AllInOne(tf.Module):
        @tf.function(input_signature=[spec])
        def __call__(self, inputs):
            return {"sequence_output": tf.cast(inputs["input_word_ids"], tf.float32)}

        @tf.function(input_signature=[spec])
        def bf16(self, inputs):
            return {"sequence_output": tf.cast(inputs["input_word_ids"], tf.float32) + 1.0}

    path = str(tmp_path / "encoder")
    tf.saved_model.save(AllInOne(), path)
    assert precision_handle(path, "bf16") == path
    loaded = tf.saved_model.load(path)
    fn = select_precision(loaded, path, "bf16")
    np.testing.assert_array_equal(fn(INPUTS)["sequence_output"].numpy(), IDS + 1.0)


def test_a_folder_named_like_a_precision_is_not_taken_for_one(tmp_path):
    """Only the folder precision_handle found beside the encoder counts as a precision's own
    SavedModel: a float32-only encoder a user keeps at `.../my_bf16` is still refused for bf16."""
    spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in INPUTS}

    class CallOnly(tf.Module):
        @tf.function(input_signature=[spec])
        def __call__(self, inputs):
            return {"sequence_output": tf.cast(inputs["input_word_ids"], tf.float32)}

    path = str(tmp_path / "my_bf16")
    tf.saved_model.save(CallOnly(), path)
    handle = precision_handle(path, "bf16")
    assert handle == path
    with pytest.raises(ValueError, match="precision 'bf16' needs an encoder exported by"):
        select_precision(tf.saved_model.load(path), handle, "bf16", own=handle != path)
