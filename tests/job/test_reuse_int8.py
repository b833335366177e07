"""--reuse of an int8 run into an int8 run: the new run keeps the previous run's ranges (saying
so, calibrating nothing), its copied rows are the previous run's int8 codes byte for byte, its new
rows are coded on the same ranges (checked against a float32 run quantised here by hand); an
int8 run into any other dtype is refused before any work (exit 2, one line naming the choices)."""

from __future__ import annotations

import glob
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from beam_embed.models.embedder import Embedder
from beam_embed.pipeline.common.output_formats import parquet, tfrecord
from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors, int8_ranges
from beam_embed.pipeline.job.command import main
from tests.job_helpers import parquet_rows, run_job, write_lines

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "bank", "river", "money", "is", "was",
         "big", "small", "run", "play"]
COLUMNS = ("mean", "cls")
ARGS = ("--pooling", "mean,cls", "--batch_tokens", "64")


def _distinct(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    texts = {" ".join(rng.choice(WORDS, rng.integers(2, 12))) for _ in range(4 * n)}
    return sorted(texts)[:n]


TEXTS = _distinct(150, seed=5)
NEW = [t for t in _distinct(60, seed=11) if t not in TEXTS][:8]


@pytest.fixture
def encoded(monkeypatch):
    """Every text the encoder embeds in this process (calibration included), in order."""
    seen, original = [], Embedder.embed

    def counted(self, texts):
        seen.extend(texts)
        return original(self, texts)

    monkeypatch.setattr(Embedder, "embed", counted)
    return seen


def _manifest(out: str) -> dict:
    with open(os.path.join(out, "manifest.json")) as f:
        return json.load(f)


def _storage(out: str) -> dict[str, StoredVectors]:
    return {p["column"]: StoredVectors("int8", p["width"], tuple(p["scale"]), tuple(p["offset"]))
            for p in _manifest(out)["poolings"]}


def _codes(out: str) -> dict[str, tuple[bytes, ...]]:
    """text -> its row's int8 codes per column, as the Parquet shards hold them (one row a
    text: the corpora's texts are distinct)."""
    rows = parquet_rows(out)
    assert len({r["text"] for r in rows.values()}) == len(rows)
    return {r["text"]: tuple(r[c] for c in COLUMNS) for r in rows.values()}


def _tfrecord_codes(out: str) -> dict[str, tuple[bytes, ...]]:
    found = {}
    for path in sorted(glob.glob(os.path.join(out, "embeddings-*.tfrecord"))):
        for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
            f = tf.train.Example.FromString(raw).features.feature
            found[f["text"].bytes_list.value[0].decode()] = tuple(
                f[c].bytes_list.value[0] for c in COLUMNS)
    return found


@pytest.fixture(scope="module")
def int8_run(tiny_export, tmp_path_factory):
    """An int8 run of TEXTS in Parquet and TFRecord: (folder, what it logged)."""
    folder = tmp_path_factory.mktemp("int8")
    out = str(folder / "out")
    corpus = write_lines(str(folder / "corpus.txt"), TEXTS)
    return out, run_job(out, "--input", corpus, "--model", tiny_export, *ARGS,
                        "--format", "parquet,tfrecord", "--vector_dtype", "int8")


@pytest.mark.pipeline
@pytest.mark.parametrize("fmt", ["parquet", "tfrecord"])
def test_reuse_of_an_int8_run_keeps_its_codes_and_codes_new_texts_on_its_ranges(
        tiny_export, int8_run, tmp_path, capsys, encoded, fmt):
    """The previous run read from its Parquet shards or, TFRecord alone, from those."""
    previous, first = int8_run
    old = _codes(previous)
    if fmt == "tfrecord":  # a run that wrote TFRecord alone: read from those shards
        previous = str(tmp_path / "tf-only")
        first = run_job(previous, "--input", write_lines(str(tmp_path / "c.txt"), TEXTS),
                        "--model", tiny_export, *ARGS, "--format", "tfrecord",
                        "--vector_dtype", "int8")
        old = _tfrecord_codes(previous)
    grown = write_lines(str(tmp_path / "grown.txt"), TEXTS + NEW)
    out = str(tmp_path / "reuse")
    encoded.clear()
    capsys.readouterr()
    manifest = run_job(out, "--input", grown, "--model", tiny_export, *ARGS,
                       "--format", "parquet,tfrecord", "--vector_dtype", "int8",
                       "--reuse", previous)
    err = capsys.readouterr().err
    assert f"--vector_dtype int8: keeping the calibration of {previous} (same model" in err
    assert "calibrating" not in err
    # no calibration sample: the new texts alone (and the launcher's probe of the widths)
    assert sorted(t for t in encoded if t != "probe") == sorted(NEW)
    assert (manifest["counts"]["reused"], manifest["counts"]["encoded"]) == (len(TEXTS), len(NEW))
    assert [(p["scale"], p["offset"]) for p in manifest["poolings"]] == \
        [(p["scale"], p["offset"]) for p in first["poolings"]]

    codes = _codes(out)
    assert len(codes) == len(TEXTS) + len(NEW)
    assert {t: codes[t] for t in TEXTS} == old  # copied rows: the stored codes, byte for byte
    assert _tfrecord_codes(out) == codes  # and the TFRecord shards hold the same


@pytest.mark.pipeline
def test_reuse_of_the_int8_run_it_overwrites(tiny_export, int8_run, tmp_path, capsys):
    """`--reuse out --output out --overwrite`: the ranges kept are the reused run's, said once,
    and its rows keep their codes."""
    out = str(tmp_path / "same")
    shutil.copytree(int8_run[0], out)
    old = _codes(out)
    capsys.readouterr()
    manifest = run_job(out, "--input", write_lines(str(tmp_path / "g.txt"), TEXTS + NEW),
                       "--model", tiny_export, *ARGS, "--vector_dtype", "int8", "--reuse", out,
                       "--overwrite")
    err = capsys.readouterr().err
    assert err.count("--vector_dtype int8: keeping the calibration of") == 1
    assert "kept the ranges" not in err and "calibrating" not in err
    assert manifest["counts"]["reused"] == len(TEXTS)
    codes = _codes(out)
    assert {t: codes[t] for t in TEXTS} == old and len(codes) == len(TEXTS) + len(NEW)


@pytest.mark.pipeline
def test_new_rows_are_a_float32_runs_vectors_quantised_on_the_kept_ranges(
        tiny_export, int8_run, tmp_path):
    """New texts' rows against a float32 run of the same texts, quantised here in numpy with
    the previous run's ranges: the same codes but for a rare rounding tie, and each decoded
    value within half a step of the float32 value (clipped to the ranges)."""
    previous, _ = int8_run
    grown = write_lines(str(tmp_path / "grown.txt"), TEXTS + NEW)
    out = str(tmp_path / "reuse")
    run_job(out, "--input", grown, "--model", tiny_export, *ARGS, "--format", "parquet",
            "--vector_dtype", "int8", "--reuse", previous)
    exact = str(tmp_path / "f32")
    run_job(exact, "--input", write_lines(str(tmp_path / "new.txt"), NEW), "--model",
            tiny_export, *ARGS, "--format", "parquet")
    floats = {r["text"]: r for r in parquet_rows(exact).values()}
    codes, manifest = _codes(out), _manifest(previous)
    for i, column in enumerate(COLUMNS):
        entry = next(p for p in manifest["poolings"] if p["column"] == column)
        scale, offset = np.float32(entry["scale"]), np.float32(entry["offset"])
        low, high = offset - 128 * scale, offset + 127 * scale
        vectors = np.array([floats[t][column] for t in NEW], np.float32)
        stored = np.array([np.frombuffer(codes[t][i], np.int8) for t in NEW])
        by_hand = np.clip(np.round((vectors - offset) / scale), -128, 127)
        assert np.abs(stored - by_hand).max() <= 1 and np.mean(stored == by_hand) > 0.99
        decoded = stored * scale + offset
        error = np.abs(decoded - np.clip(vectors, low, high))
        assert (error <= scale / 2 * 1.001 + 1e-6).all(), (error / scale).max()


def _refused(capsys, out: str, *args: str) -> str:
    capsys.readouterr()
    code = main(["--output", out, "--progress_every", "0", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not os.path.exists(out)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.pipeline
def test_an_int8_run_into_another_dtype_or_setting_is_refused_before_any_work(
        tiny_export, int8_run, tmp_path, capsys, encoded):
    previous, _ = int8_run
    corpus = write_lines(str(tmp_path / "c.txt"), TEXTS + NEW)
    base = ("--input", corpus, "--model", tiny_export, "--reuse", previous)
    encoded.clear()
    line = _refused(capsys, str(tmp_path / "a"), *base, *ARGS)  # float32, the default
    assert f"--reuse {previous!r}: it stored its vectors as int8 codes" in line
    assert "--vector_dtype float32 run" in line
    assert "expected --vector_dtype int8" in line and "or drop --reuse" in line
    for dtype in ("float16", "binary"):
        line = _refused(capsys, str(tmp_path / dtype), *base, *ARGS, "--vector_dtype", dtype)
        assert f"--vector_dtype {dtype} run" in line and "expected --vector_dtype int8" in line
    assert encoded == []  # refused from the manifest alone: before the model loads
    line = _refused(capsys, str(tmp_path / "b"), *base, "--pooling", "mean",
                    "--vector_dtype", "int8")
    assert "other settings" in line and "poolings mean (8), cls (8), this run's mean (8)" in line
    assert "calibrat" not in line
    assert encoded == ["probe"]  # the model's widths probed; no record, no calibration sample


@pytest.mark.pipeline
def test_an_int8_run_without_ranges_or_a_float16_run_is_refused(tiny_export, int8_run,
                                                                 tmp_path, capsys, encoded):
    previous, _ = int8_run
    corpus = write_lines(str(tmp_path / "c.txt"), TEXTS)
    unranged = str(tmp_path / "unranged")
    shutil.copytree(previous, unranged)
    manifest = _manifest(unranged)
    del manifest["poolings"][1]["scale"]
    with open(os.path.join(unranged, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    encoded.clear()
    line = _refused(capsys, str(tmp_path / "a"), "--input", corpus, "--model", tiny_export,
                    *ARGS, "--vector_dtype", "int8", "--reuse", unranged)
    assert "gives no int8 ranges" in line and "for cls" in line

    half = str(tmp_path / "half")
    run_job(half, "--input", corpus, "--model", tiny_export, *ARGS, "--vector_dtype", "float16")
    encoded.clear()
    line = _refused(capsys, str(tmp_path / "b"), "--input", corpus, "--model", tiny_export,
                    *ARGS, "--vector_dtype", "int8", "--reuse", half)
    assert "stored its vectors as float16" in line and "from an int8 run into an int8 run" in line
    assert set(encoded) <= {"probe"}


def test_int8_codes_read_back_as_values_that_encode_to_the_same_codes():
    """Ranges narrow against their offset (a range of 1e-4 around 10): plain decoding moves
    some codes to a neighbour when encoded again; `recodable` values never do, for every code
    `encode` writes (values inside the range and beyond it, clipped)."""
    rng = np.random.default_rng(1)
    center = rng.normal(size=32).astype(np.float32) * 10
    spread = np.float32(1e-5) * (1 + np.abs(rng.normal(size=32)).astype(np.float32))
    sample = center + spread * rng.normal(size=(200, 32)).astype(np.float32)
    stored = StoredVectors("int8", 32, *int8_ranges(sample))
    later = center + 2 * spread * rng.normal(size=(5000, 32)).astype(np.float32)
    codes = stored.encode(np.concatenate([sample, later]))
    assert (codes == 127).any() and (codes == -128).any()  # some clipped
    assert (stored.encode(stored.decode(codes)) != codes).any()  # what plain decoding loses
    values = stored.recodable(codes)
    np.testing.assert_array_equal(stored.encode(values), codes)
    np.testing.assert_allclose(values, stored.decode(codes), rtol=1e-6)  # a few ulps apart
    plain = StoredVectors("float32", 32)
    np.testing.assert_array_equal(plain.recodable(sample), sample)


@pytest.mark.pipeline
def test_the_formats_read_an_int8_run_back_as_its_codes(int8_run):
    """Each format's read_previous, given the run's storage, yields values its ranges encode
    to the codes in the shards."""
    previous, manifest = int8_run
    stored = _storage(previous)
    columns = tuple((c, stored[c].width) for c in COLUMNS)
    storage = tuple(stored[c] for c in COLUMNS)
    old = _codes(previous)
    for fmt in (parquet, tfrecord):
        rows = 0
        for name in manifest["files"][fmt.SUFFIX[1:]]:
            for text, vectors, _, _ in fmt.read_previous(os.path.join(previous, name), columns,
                                                         storage):
                rows += 1
                assert tuple(s.encode(v[None])[0].tobytes()
                             for s, v in zip(storage, vectors)) == old[text]
        assert rows == len(TEXTS)
