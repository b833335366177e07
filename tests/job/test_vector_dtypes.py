"""`--vector_dtype`: the job writes each dtype, and search, pca and eval read it back.

One float32 run is the reference: every other run's stored values are checked against numpy's
own quantisation of the float32 run's vectors (float16: a cast; int8: the manifest's ranges,
which must be the float32 vectors' per-dimension min and max; binary: sign bits), in Parquet
and TFRecord alike; the commands are checked against numpy on the values read back here.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from sklearn.decomposition import PCA

from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.job.command import main as run_main
from tests.evaluate.test_command import reference_vectors
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "bank", "river", "money", "is", "was",
         "big", "small", "run", "play"]
QUERIES = ["the cat sat on the mat", "money is big"]
DTYPES = ("float32", "float16", "int8", "binary")
COLUMNS = ("mean", "cls")


@pytest.fixture(scope="module")
def runs(tiny_export, tmp_path_factory) -> dict[str, str]:
    """The same 40 records embedded once per dtype, into Parquet (3 shards) and TFRecord."""
    folder = tmp_path_factory.mktemp("dtypes")
    rng = np.random.default_rng(5)
    corpus = write_lines(str(folder / "corpus.txt"),
                         [" ".join(rng.choice(WORDS, rng.integers(1, 9))) for _ in range(40)])
    out = {}
    for dtype in DTYPES:
        out[dtype] = str(folder / dtype)
        run_job(out[dtype], "--input", corpus, "--model", tiny_export, "--pooling", "mean,cls",
                "--no-normalize", "--num_shards", "3", "--vector_dtype", dtype)
    return out


def _manifest(folder: str) -> dict:
    with open(os.path.join(folder, "manifest.json")) as f:
        return json.load(f)


def _parquet(folder: str) -> dict[str, dict]:
    m = _manifest(folder)
    rows = {}
    for name in m["files"]["parquet"]:
        for row in pq.read_table(os.path.join(folder, name)).to_pylist():
            rows[row["id"]] = row
    return rows


def _tfrecord_bytes(folder: str, column: str) -> dict[str, bytes]:
    m = _manifest(folder)
    found = {}
    for name in m["files"]["tfrecord"]:
        for raw in tf.data.TFRecordDataset(os.path.join(folder, name)).as_numpy_iterator():
            f = tf.train.Example.FromString(raw).features.feature
            found[f["id"].bytes_list.value[0].decode()] = f[column].bytes_list.value[0]
    return found


def _entry(manifest: dict, column: str) -> dict:
    return next(p for p in manifest["poolings"] if p["column"] == column)


def _decoded(folder: str, column: str) -> tuple[list[str], np.ndarray]:
    """(ids, float vectors) read back from the Parquet shards by hand, in id order."""
    m = _manifest(folder)
    rows, p = _parquet(folder), _entry(m, column)
    ids = sorted(rows)
    values = [rows[i][column] for i in ids]
    dtype = m.get("vector_dtype", "float32")  # float32 runs write no key
    if dtype in ("float32", "float16"):
        return ids, np.array(values, np.float32)
    raw = np.frombuffer(b"".join(values), np.uint8).reshape(len(ids), -1)
    if dtype == "int8":
        return ids, raw.view(np.int8) * np.float32(p["scale"]) + np.float32(p["offset"])
    return ids, np.unpackbits(raw, axis=1)[:, :p["width"]] * 2.0 - 1


@pytest.mark.parametrize("column", COLUMNS)
def test_stored_values_are_numpys_quantisation_of_the_float32_run(runs, column):
    ids, exact = _decoded(runs["float32"], column)
    width = exact.shape[1]
    assert _manifest(runs["float32"])["format_version"] == 1  # float32: what older readers read
    for dtype in DTYPES[1:]:
        m = _manifest(runs[dtype])
        assert m["vector_dtype"] == dtype and m["format_version"] == 2
        rows, tfrecord = _parquet(runs[dtype]), _tfrecord_bytes(runs[dtype], column)
        stored = [rows[i][column] for i in ids]
        if dtype == "float16":
            np.testing.assert_allclose(np.array(stored, np.float32),
                                       exact.astype(np.float16).astype(np.float32),
                                       rtol=2e-3, atol=1e-6)  # a float32 ulp may round across
            raw = [np.array(s, "<f2").tobytes() for s in stored]
        elif dtype == "int8":
            p = _entry(m, column)  # the ranges: the float32 vectors' min and max (every row
            low, high = exact.min(0), exact.max(0)  # is in the calibration sample)
            np.testing.assert_allclose(p["scale"], (high - low) / 255, rtol=1e-5)
            np.testing.assert_allclose(p["offset"], low + 128 * (high - low) / 255, rtol=1e-5,
                                       atol=1e-6)
            codes = np.frombuffer(b"".join(stored), np.int8).reshape(len(ids), width)
            expected = np.clip(np.rint((exact - low) / ((high - low) / 255)) - 128, -128, 127)
            assert np.abs(codes - expected).max() <= 1  # 1: a float32 ulp across a half
            raw = stored
        else:
            raw = stored
            assert all(len(s) == -(-width // 8) for s in stored)
            signs = np.unpackbits(np.frombuffer(b"".join(stored), np.uint8).reshape(
                len(ids), -1), axis=1)[:, :width]
            clear = np.abs(exact) > 1e-6  # a sign flipped by float noise at zero is no error
            assert (signs.astype(bool) == (exact > 0))[clear].all()
        assert [tfrecord[i] for i in ids] == raw  # TFRecord holds the same bytes


def test_read_back_vectors_are_within_each_dtypes_tolerance(runs):
    from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set
    from beam_embed.pipeline.common.output_formats import output_format
    from beam_embed.pipeline.search.scan import vector_blocks

    ids, exact = _decoded(runs["float32"], "mean")
    order = np.argsort(ids)
    for dtype in DTYPES:
        es = load_embedding_set(runs[dtype])
        p = es.pooling("mean")
        rows = _parquet(runs[dtype])
        scan_ids = [i for name in es.files["parquet"]
                    for i in pq.read_table(name, columns=["id"]).column(0).to_pylist()]
        back = np.concatenate(list(vector_blocks(output_format("parquet"),
                                                 list(es.files["parquet"]), "mean", p.width, 7,
                                                 p.stored())))
        back = back[np.argsort(scan_ids)][np.argsort(order)]
        assert len(rows) == len(back)
        if dtype == "binary":
            assert set(np.unique(back)) <= {-1.0, 1.0}
            clear = np.abs(exact) > 1e-6
            assert (np.sign(exact) == back)[clear].all()
        else:
            tolerance = (np.max(p.scale) * 0.5 + 1e-5 if dtype == "int8" else
                         {"float32": 1e-6, "float16": 2e-3 * np.abs(exact).max()}[dtype])
            assert np.abs(back - exact).max() <= tolerance


@pytest.mark.parametrize("dtype", DTYPES)
def test_search_scores_every_dtype_as_numpy_does(runs, tiny_checkpoint, capsys, dtype):
    code = cli(["search", runs[dtype], *QUERIES, "-k", "6", "--pooling", "cls", "--json",
                "--block-rows", "9"])
    out = capsys.readouterr()
    assert code == 0, out.err
    ids, stored = _decoded(runs[dtype], "cls")
    stored = stored / np.linalg.norm(stored, axis=1, keepdims=True)
    queries = reference_vectors(tiny_checkpoint[1], QUERIES)["cls"]
    scores = stored @ (queries / np.linalg.norm(queries, axis=1, keepdims=True)).T
    for result, s in zip(json.loads(out.out), scores.T):
        by_id = dict(zip(ids, s))
        got = [h["score"] for h in result["hits"]]
        np.testing.assert_allclose(got, np.sort(s)[::-1][:6], atol=1e-5)  # ties in any order
        np.testing.assert_allclose(got, [by_id[h["id"]] for h in result["hits"]], atol=1e-5)


@pytest.mark.parametrize("dtype, fmt", [("int8", "tfrecord"), ("binary", "parquet")])
def test_pca_fits_the_vectors_read_back(runs, tmp_path, dtype, fmt):
    viz = tmp_path / "viz"
    assert cli(["pca", "--input", runs[dtype], "--output", str(viz), "--components", "3",
                "--format", fmt, "--pooling", "mean"]) == 0
    from beam_embed.pipeline.pca.fit import load_fit

    fit = load_fit(str(viz / "pca.npz"))
    _, vectors = _decoded(runs[dtype], "mean")
    reference = PCA(3, svd_solver="full").fit(vectors.astype(np.float64))
    np.testing.assert_allclose(fit.mean, vectors.mean(0), atol=1e-5)
    np.testing.assert_allclose(fit.explained_variance, reference.explained_variance_,
                               rtol=1e-4, atol=1e-7)


def test_eval_scores_each_dtype_as_numpy_quantises(tiny_export, tiny_checkpoint, tmp_path,
                                                   capsys):
    from scipy import stats

    from tests.evaluate.test_command import PAIRS

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{a}\t{b}\n" for s, a, b in PAIRS))
    code = cli(["eval", "--pairs", str(pairs), "--model", tiny_export, "--pooling", "mean",
                "--vector-dtype", ",".join(DTYPES), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    rows = {r["vector_dtype"]: r for r in json.loads(out.out)}
    texts = [a for _, a, _ in PAIRS] + [b for _, _, b in PAIRS]
    v = reference_vectors(tiny_checkpoint[1], texts)["mean"].astype(np.float32)
    low, high = v.min(0), v.max(0)
    step = (high - low) / 255
    quantised = {"float32": v, "float16": v.astype(np.float16).astype(np.float32),
                 "int8": (np.clip(np.rint((v - low) / step) - 128, -128, 127) + 128) * step + low,
                 "binary": np.where(v > 0, 1.0, -1.0)}
    n = len(PAIRS)
    for dtype, q in quantised.items():
        a, b = q[:n], q[n:]
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        expected = stats.spearmanr(cos, [s for s, _, _ in PAIRS]).statistic
        assert rows[dtype]["spearman"] == pytest.approx(expected, abs=1e-6), dtype


@pytest.mark.parametrize("argv, named", [
    (["--vector_dtype", "int4"], "unknown --vector_dtype 'int4'; expected one of "
                                 "['float32', 'float16', 'int8', 'binary']"),
    (["--vector-dtype", "int8", "--granularity", "token"], "token vectors take --token_dtype")])
def test_bad_vector_dtype_fails_before_any_data_is_read(tmp_path, capsys, argv, named):
    out = tmp_path / "out"
    assert run_main(["--input", str(tmp_path / "missing.txt"), "--output", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1 and not out.exists()


def test_eval_refuses_an_unknown_dtype(capsys):
    assert cli(["eval", "--vector-dtype", "float8"]) == 2
    assert "unknown --vector-dtype 'float8'; expected one of" in capsys.readouterr().err
