"""Low-precision encoders (bf16/fp16), per-batch grouping, packing and thread settings.

The exported encoder's `bf16`/`fp16` functions are checked against the independent numpy BERT
(tests/bert_reference.py) and against the fp32 path; MiniLM's low-precision sentence vectors
against its fp32 vectors and sentence-transformers' published vector.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from beam_embed.models.embedder import Embedder
from beam_embed.models.encoders.bert import GROUP_ROWS, HubBertEncoder
from beam_embed.models.export.bert_encoder import BertEncoder, BertLayerWeights, BertWeights
from beam_embed.models.pooling import parse_poolings
from beam_embed.pipeline.job.command import main
from tests.bert_reference import TINY_VOCAB, forward
from tests.job_helpers import parquet_rows, run_job, write_lines

IDS = np.array([[2, 7, 9, 10, 5, 11, 3, 0, 0], [2, 12, 13, 3, 14, 19, 3, 0, 0],
                [2, 8, 3, 0, 0, 0, 0, 0, 0]], np.int32)
MASK = (IDS != 0).astype(np.int32)
TYPES = np.array([[0] * 9, [0, 0, 0, 0, 1, 1, 1, 0, 0], [0] * 9], np.int32)
SENTENCES = [
    "A man is playing a guitar.", "Stocks fell sharply on Monday after the quarterly report.",
    "Proteins fold into three-dimensional structures within milliseconds.", "Hi",
    "The quick brown fox jumps over the lazy dog, again and again and again.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Is it going to rain tomorrow in Reykjavik?", "Café au lait, s'il vous plaît!",
    " ".join(["The committee discussed the budget, the schedule and the staffing plan."] * 6),
]


def _cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def _encoder(export_dir, precision="fp32"):
    """The export's encoder for `precision` (float32: `encoder/`; else `encoder_<precision>/`)."""
    name = "encoder" if precision == "fp32" else f"encoder_{precision}"
    return tf.saved_model.load(os.path.join(export_dir, name))


def _inputs():
    return {"input_word_ids": IDS, "input_mask": MASK, "input_type_ids": TYPES}


@pytest.mark.parametrize("precision, min_cos", [("bf16", 0.999), ("fp16", 0.9999)])
def test_tiny_low_precision_matches_numpy_bert(tiny_export, tiny_checkpoint, precision, min_cos):
    enc = _encoder(tiny_export, precision)
    out = enc(_inputs())
    layers, pooled = forward(tiny_checkpoint[1], IDS, MASK, TYPES, layers=2, heads=2)
    real = MASK.astype(bool)
    assert out["sequence_output"].dtype == tf.float32
    for i, ref in enumerate(layers):  # every layer, every real token
        got = out["encoder_outputs"][i].numpy()
        assert got.shape == ref.shape
        assert _cosine(got[real], ref[real]).min() >= min_cos, f"layer {i}"
        np.testing.assert_allclose(got[real], ref[real], atol=0.1)
    np.testing.assert_array_equal(out["sequence_output"].numpy(), out["encoder_outputs"][-1].numpy())
    assert _cosine(out["pooled_output"].numpy(), pooled).min() >= min_cos
    np.testing.assert_array_equal(out["default"].numpy(), out["pooled_output"].numpy())


def test_tiny_fp32_call_is_unchanged(tiny_export, tiny_checkpoint):
    """The contract's own call stays exact float32 (the low-precision functions are extra)."""
    out = _encoder(tiny_export)(_inputs())
    layers, _ = forward(tiny_checkpoint[1], IDS, MASK, TYPES, layers=2, heads=2)
    real = MASK.astype(bool)
    np.testing.assert_allclose(out["sequence_output"].numpy()[real], layers[-1][real], atol=1e-5)


def test_export_metadata_lists_precisions(tiny_export):
    with open(os.path.join(tiny_export, "beam_embed.json")) as f:
        meta = json.load(f)
    assert meta["precisions"] == ["fp32", "bf16", "fp16"] and meta["format_version"] >= 3


@pytest.fixture(scope="module")
def minilm_vectors(minilm_export):
    """Mean-pooled, normalized sentence vectors of SENTENCES per precision."""
    pre = tf.saved_model.load(os.path.join(minilm_export, "preprocessor"))
    enc = _encoder(minilm_export)
    packed = pre.bert_pack_inputs([pre.tokenize(tf.constant(SENTENCES))], seq_length=96)
    mask = packed["input_mask"].numpy()[..., None].astype(np.float64)
    vectors = {}
    for precision in ("fp32", "bf16", "fp16"):
        fn = enc if precision == "fp32" else _encoder(minilm_export, precision)
        seq = fn(packed)["sequence_output"].numpy()
        v = (seq * mask).sum(1) / mask.sum(1)
        vectors[precision] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return vectors


@pytest.mark.parametrize("precision, mean_cos, min_cos", [("bf16", 0.9999, 0.9995),
                                                          ("fp16", 0.99999, 0.9999)])
def test_minilm_low_precision_sentence_vectors(minilm_vectors, precision, mean_cos, min_cos):
    cos = _cosine(minilm_vectors[precision], minilm_vectors["fp32"])
    assert cos.mean() >= mean_cos and cos.min() >= min_cos, cos


def test_minilm_bf16_reference_vector(minilm_export):
    """sentence-transformers' published all-MiniLM-L6-v2 vector, through the bf16 path."""
    pre = tf.saved_model.load(os.path.join(minilm_export, "preprocessor"))
    packed = pre(tf.constant(["This is an example sentence"]))
    seq = _encoder(minilm_export, "bf16")(packed)["sequence_output"].numpy()
    mask = packed["input_mask"].numpy()[..., None]
    v = (seq * mask).sum(1) / mask.sum(1)
    v = v / np.linalg.norm(v)
    np.testing.assert_allclose(v[0, :5], [0.0677, 0.0634, 0.0488, 0.0793, 0.0374], atol=3e-3)


def _random_weights(width=8, layers=1, heads=2, intermediate=16, eps=1e-12, seed=0):
    rng = np.random.default_rng(seed)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32) * 0.5

    layer = BertLayerWeights(
        qkv_kernel=r(width, 3 * width), qkv_bias=r(3 * width), attn_out_kernel=r(width, width),
        attn_out_bias=r(width), attn_norm_gamma=1 + r(width), attn_norm_beta=r(width),
        ffn_in_kernel=r(width, intermediate), ffn_in_bias=r(intermediate),
        ffn_out_kernel=r(intermediate, width), ffn_out_bias=r(width),
        ffn_norm_gamma=1 + r(width), ffn_norm_beta=r(width))
    return BertWeights(word_embeddings=r(len(TINY_VOCAB), width),
                       position_embeddings=r(16, width), type_embeddings=r(2, width),
                       embed_norm_gamma=1 + r(width), embed_norm_beta=r(width),
                       layers=(layer,) * layers, pooler_kernel=r(width, width),
                       pooler_bias=r(width), num_heads=heads, activation="gelu",
                       layer_norm_eps=eps)


@pytest.mark.parametrize("eps", [1e-12, 1e-5])
def test_fused_layer_norm_honours_the_model_epsilon(eps):
    """The low-precision graph's LayerNorm is written for oneDNN's fused kernel, which ignores
    the graph's epsilon (it uses 1e-3): on inputs of tiny variance the result must still be
    LayerNorm with the model's own epsilon (numpy, float64)."""
    enc = BertEncoder(_random_weights(width=64, eps=eps))
    norm = tf.function(lambda x: enc._fused_norm(x, enc.embed_norm_gamma, enc.embed_norm_beta))
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((512, 64)) * 0.01 + 3.0).astype(np.float32)  # variance 1e-4
    xd = x.astype(np.float64)
    g, b = enc.embed_norm_gamma.numpy(), enc.embed_norm_beta.numpy()
    want = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + eps) * g + b
    np.testing.assert_allclose(norm(tf.constant(x)).numpy(), want, atol=2e-3, rtol=1e-3)


@pytest.fixture(scope="module")
def fp32_only_encoder(tmp_path_factory):
    """An encoder saved without a low-precision folder beside it, like TF-Hub's own BERT
    SavedModels (float32 graphs only)."""
    out = str(tmp_path_factory.mktemp("fp32_only") / "encoder")
    module = BertEncoder(_random_weights())
    tf.saved_model.save(module, out, signatures={"serving_default": module.serving})
    assert not hasattr(tf.saved_model.load(out), "bf16")
    return out


@pytest.mark.pipeline
def test_bf16_on_an_fp32_only_encoder_fails_before_data(fp32_only_encoder, tiny_export,
                                                       tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat"])
    out = tmp_path / "out"
    code = main(["--input", corpus, "--encoder", fp32_only_encoder, "--preprocessor",
                 os.path.join(tiny_export, "preprocessor"), "--precision", "bf16",
                 "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "precision 'bf16' needs an encoder exported by `beam-embed export-model`" in err
    assert repr(fp32_only_encoder) in err and "--precision fp32" in err
    # the same encoder in fp32 works
    run_job(str(tmp_path / "ok"), "--input", corpus, "--encoder", fp32_only_encoder,
            "--preprocessor", os.path.join(tiny_export, "preprocessor"))


@pytest.mark.parametrize("args, message", [
    (["--precision", "fp64"], "unknown --precision 'fp64'; expected one of ['fp32', 'bf16', 'fp16']"),
    (["--precision", "BF16"], "unknown --precision 'BF16'; expected one of ['fp32', 'bf16', 'fp16']"),
])
@pytest.mark.pipeline
def test_bad_precision_fails_before_reading(tiny_export, tmp_path, capsys, args, message):
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat"])
    out = tmp_path / "out"
    assert main(["--input", corpus, "--model", tiny_export, "--output", str(out), *args]) == 2
    assert message in capsys.readouterr().err and not out.exists()


@pytest.mark.pipeline
def test_elmo_has_no_low_precision(elmo_handle, tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat"])
    code = main(["--input", corpus, "--encoder", elmo_handle, "--precision", "bf16",
                 "--output", str(tmp_path / "o")])
    assert code == 2
    assert "--precision bf16 is not available for elmo encoders; expected one of ['fp32']" in \
        capsys.readouterr().err


@pytest.fixture(scope="module")
def elmo_handle(tmp_path_factory):
    from tests.elmo_fixture import build_tiny_elmo

    path = str(tmp_path_factory.mktemp("elmo") / "module")
    build_tiny_elmo(path)
    return path


@pytest.mark.pipeline
def test_job_bf16_vectors_match_numpy(tiny_export, tiny_checkpoint, tmp_path):
    texts = ["the cat sat on the mat .", "a dog", "the river bank was big and small",
             "money is money , the bank is big !"]
    corpus = write_lines(str(tmp_path / "c.txt"), texts)
    manifest = run_job(str(tmp_path / "out"), "--input", corpus, "--model", tiny_export,
                       "--pooling", "mean,cls", "--precision", "bf16")
    assert manifest["counts"]["embedded"] == len(texts)
    index = {w: i for i, w in enumerate(TINY_VOCAB)}
    rows = parquet_rows(str(tmp_path / "out"))
    for i, text in enumerate(texts):
        ids = np.array([[2] + [index.get(w, 1) for w in text.split()] + [3]], np.int32)
        layers, _ = forward(tiny_checkpoint[1], ids, np.ones_like(ids), np.zeros_like(ids),
                            layers=2, heads=2)
        row = rows[f"{corpus}:{i + 1}"]
        assert _cosine(row["mean"], layers[-1][0].mean(0)) >= 0.999
        assert _cosine(row["cls"], layers[-1][0, 0]) >= 0.999


def _texts(short, long):
    words = [w for w in TINY_VOCAB if w.isalpha() and not w.startswith("[")]
    rng = np.random.default_rng(4)
    sizes = [*rng.integers(1, 4, short), *rng.integers(40, 60, long)]
    return [" ".join(rng.choice(words, size=int(k))) for k in rng.permutation(sizes)]


def test_grouped_batches_give_each_texts_own_vectors(tiny_export):
    """A batch is encoded in groups of similar length, each packed to its own length: every
    text still gets exactly the vector it gets alone (fp32)."""
    handles = (os.path.join(tiny_export, "encoder"), os.path.join(tiny_export, "preprocessor"))
    encoder = HubBertEncoder(*handles, max_seq_length=64)
    embedder = Embedder(encoder, parse_poolings("mean,cls,max@0"))
    texts = _texts(12 * GROUP_ROWS, GROUP_ROWS + 3)
    lengths = encoder.tokenize(texts).lengths
    groups = encoder.plan(lengths)
    assert len(groups) > 1
    assert sorted(np.concatenate([g for g, _ in groups]).tolist()) == list(range(len(texts)))
    together = embedder.embed(texts).vectors
    for i, text in enumerate(texts):
        alone = embedder.embed([text]).vectors
        for column in together:
            np.testing.assert_allclose(together[column][i], alone[column][0], atol=1e-5,
                                       err_msg=f"{column} of text {i}")


def test_plan_groups_are_sorted_by_length_and_cut_on_row_multiples(tiny_export):
    handles = (os.path.join(tiny_export, "encoder"), os.path.join(tiny_export, "preprocessor"))
    encoder = HubBertEncoder(*handles, max_seq_length=64)
    lengths = np.array([3] * 96 + [40] * 24)[np.random.default_rng(0).permutation(120)]
    groups = encoder.plan(lengths)
    assert [sorted(set(lengths[g].tolist())) for g, _ in groups] == [[3], [40]]
    assert all(len(g) % GROUP_ROWS == 0 for g, _ in groups[:-1])
    assert [shape for _, shape in groups] == [(96, 6), (24, 44)]  # [CLS] 3 [SEP] -> 6; 42 -> 44


def test_past_the_shape_budget_groups_reuse_shapes(tiny_export, monkeypatch):
    """Each new (rows, length) shape keeps oneDNN kernels alive: past MAX_SHAPES a group runs
    in an existing shape that holds it, padded with empty texts, and its vectors are unchanged."""
    import beam_embed.models.encoders.bert as bert

    monkeypatch.setattr(bert, "MAX_SHAPES", 2)
    handles = (os.path.join(tiny_export, "encoder"), os.path.join(tiny_export, "preprocessor"))
    encoder = HubBertEncoder(*handles, max_seq_length=64)
    embedder = Embedder(encoder, parse_poolings("mean,cls"))
    texts = _texts(12 * GROUP_ROWS, GROUP_ROWS + 3)
    together = [embedder.embed(texts[i:i + 40]).vectors for i in range(0, len(texts), 40)]
    assert len(encoder._shapes) <= 3  # the budget, plus one when nothing made yet could hold
    for k, i in enumerate(range(0, len(texts), 40)):
        for j, text in enumerate(texts[i:i + 40]):
            alone = embedder.embed([text]).vectors
            for column in alone:
                np.testing.assert_allclose(together[k][column][j], alone[column][0], atol=1e-5)


def test_numpy_packing_equals_the_contract_packer(tiny_export):
    handles = (os.path.join(tiny_export, "encoder"), os.path.join(tiny_export, "preprocessor"))
    encoder = HubBertEncoder(*handles, max_seq_length=64)
    pieces = encoder.tokenize(["the cats sat .", "", "a dog", "the big river bank was small"])
    ragged = tf.RaggedTensor.from_row_lengths(pieces.values, pieces.lengths)
    words = tf.RaggedTensor.from_row_splits(ragged, tf.range(ragged.nrows(out_type=tf.int64) + 1))
    for seq_length in (3, 5, 12):
        want = encoder._preprocessor.bert_pack_inputs([words], seq_length=tf.constant(seq_length))
        got = encoder.pack(pieces, seq_length)
        for key in ("input_word_ids", "input_mask", "input_type_ids"):
            np.testing.assert_array_equal(got[key], want[key].numpy(), err_msg=key)


def test_thread_settings_apply_before_tensorflow_starts():
    script = textwrap.dedent("""
        import json, tensorflow as tf
        from beam_embed.models.embedder import configure_threads
        first = configure_threads(1, 1)
        tf.constant(1.0) + 1.0  # the runtime starts: its pools are fixed now
        later = configure_threads(2, 2)
        t = tf.config.threading
        print(json.dumps([first, later, t.get_intra_op_parallelism_threads(),
                          t.get_inter_op_parallelism_threads()]))
    """)
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, False, 1, 1]


def test_worker_threads_split_the_cores_between_direct_runner_processes():
    from beam_embed.pipeline.job.beam_options import parse
    from beam_embed.pipeline.job.resolved import worker_threads

    cores = os.cpu_count() or 1
    multi = parse(["--direct_num_workers=2", "--direct_running_mode=multi_processing"])
    assert worker_threads(multi) == (max(cores // 2, 1), 1)
    assert worker_threads(parse(["--direct_num_workers=2"])) == (0, 0)  # threads share one TF
    assert worker_threads(parse([])) == (0, 0)
    # Dataflow: one SDK process per vCPU, one thread each; one process per VM: all cores
    assert worker_threads(parse(["--runner=DataflowRunner"])) == (1, 1)
    assert worker_threads(parse(["--runner=DataflowRunner",
                                 "--experiments=no_use_multiple_sdk_containers"])) == (0, 0)
