"""int8's ranges calibrated on a sample that represents the input: its distinct texts, spread over
it, not its first records; a warning when the sample may not fit the rest."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os

import numpy as np
import pytest

from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors, int8_ranges
from beam_embed.pipeline.job import calibration
from beam_embed.pipeline.job.calibration import held_out_fidelity, sample_texts
from beam_embed.pipeline.job.formats import Fields
from tests.job_helpers import parquet_rows, run_job, write_lines

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "bank", "river", "money", "is", "was",
         "big", "small", "run", "play"]
REPEATED = "the cat sat on the mat"


def _distinct(n: int, seed: int = 3) -> list[str]:
    rng = np.random.default_rng(seed)
    texts = {" ".join(rng.choice(WORDS, rng.integers(2, 12))) for _ in range(4 * n)}
    return sorted(texts - {REPEATED})[:n]


@dataclasses.dataclass
class _Run:
    """What sample_texts reads of a ResolvedRun."""

    files: tuple
    settings: object

    def fields(self):
        return Fields("text", None, (), 1 << 20)


def _run(paths) -> _Run:
    settings = dataclasses.make_dataclass("S", [("split", str, "none"), ("clean", bool, True),
                                                ("input_format", object, None)])()
    return _Run(tuple((p, os.path.getsize(p)) for p in paths), settings)


def _decoded(out: str, column: str = "mean") -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(id -> the int8 run's vector decoded by hand, each dimension's scale)."""
    with open(os.path.join(out, "manifest.json")) as f:
        entry = next(p for p in json.load(f)["poolings"] if p["column"] == column)
    stored = StoredVectors("int8", entry["width"], tuple(entry["scale"]), tuple(entry["offset"]))
    return {rid: stored.decode(np.frombuffer(row[column], np.int8)[None])[0]
            for rid, row in parquet_rows(out).items()}, np.array(entry["scale"], np.float32)


@pytest.mark.pipeline
@pytest.mark.parametrize("ahead", [REPEATED, ""], ids=["one-sentence", "empty"])
def test_texts_after_a_thousand_alike_lines_decode_within_half_a_step(tiny_export, tmp_path,
                                                                      ahead, capsys):
    """1,000 copies of one sentence (or 1,000 empty lines) ahead of 600 others: the ranges
    cover every text, so every row decodes within half a step of its float32 vector."""
    texts = _distinct(600)
    corpus = write_lines(str(tmp_path / "c.txt"), [ahead] * 1000 + texts)
    args = ("--input", corpus, "--model", tiny_export, "--pooling", "mean", "--format",
            "parquet")
    run_job(str(tmp_path / "f32"), *args)
    exact = parquet_rows(str(tmp_path / "f32"))
    run_job(str(tmp_path / "int8"), *args, "--vector_dtype", "int8")
    decoded, scale = _decoded(str(tmp_path / "int8"))
    assert len(decoded) == len(exact) == 600 + (1000 if ahead else 0)
    error = np.array([np.abs(decoded[rid] - np.float32(exact[rid]["mean"])) for rid in exact])
    assert (error <= scale / 2 * 1.001 + 1e-6).all(), error.max(0) / scale
    vectors = np.array([exact[rid]["mean"] for rid in exact], np.float32)
    low, high = vectors.min(0), vectors.max(0)  # the whole input was the sample
    np.testing.assert_allclose(scale, (high - low) / 255, rtol=1e-4)
    assert "warning: --vector_dtype int8" not in capsys.readouterr().err


def test_a_large_input_is_sampled_at_places_spread_over_its_bytes(tmp_path, monkeypatch):
    """Over WHOLE_BYTES: windows spread over the files, a plain file entered mid-way; the
    distinct texts of every part of the input are in the sample."""
    parts = [_distinct(300, seed) for seed in (1, 2)]
    a = write_lines(str(tmp_path / "a.txt"), [REPEATED] * 3000 + parts[0])
    b = write_lines(str(tmp_path / "b.jsonl"), [json.dumps({"text": REPEATED})] * 3000
                    + [json.dumps({"text": t}) for t in parts[1]])
    monkeypatch.setattr(calibration, "WHOLE_BYTES", 1000)
    sample = sample_texts(_run([a, b]))
    assert not sample.whole
    for part in parts:  # the windows that fall in each file's second part read its texts
        assert len(set(part) & set(sample.texts)) >= 100
    assert sample.texts.count(REPEATED) == 1  # distinct texts


def test_a_compressed_file_is_sampled_from_its_start_as_far_as_its_windows_reach(
        tmp_path, monkeypatch):
    texts = _distinct(300)
    path = str(tmp_path / "c.txt.gz")
    with gzip.open(path, "wt") as f:
        f.write("\n".join([REPEATED] * 2000 + texts) + "\n")
    monkeypatch.setattr(calibration, "WHOLE_BYTES", 100)
    sample = sample_texts(_run([path]))  # 32 windows of 8,192 records reach past the copies
    assert not sample.whole and set(texts) <= set(sample.texts)
    monkeypatch.setattr(calibration, "WINDOW_RECORDS", 50)  # 1,600 records: copies only
    assert sample_texts(_run([path])).texts == [REPEATED]


def test_a_small_input_is_read_whole_and_its_distinct_texts_are_the_sample(tmp_path):
    texts = _distinct(40)
    path = write_lines(str(tmp_path / "c.txt"), ["", REPEATED] * 500 + texts + ["   "])
    sample = sample_texts(_run([path]))
    assert sample.whole and sample.texts == [REPEATED, *texts]


def test_more_distinct_texts_than_the_sample_holds_are_spread_evenly(tmp_path):
    texts = [f"text number {i}" for i in range(5000)]
    path = write_lines(str(tmp_path / "c.txt"), texts)
    sample = sample_texts(_run([path]), limit=1000)
    assert not sample.whole and len(sample.texts) == 1000
    numbers = [int(t.rsplit(" ", 1)[1]) for t in sample.texts]
    assert numbers[0] == 0 and numbers[-1] == 4999 and max(np.diff(numbers)) <= 6


def test_held_out_fidelity_measures_how_unseen_vectors_decode():
    rng = np.random.default_rng(0)
    alike = rng.normal(size=(500, 32)).astype(np.float32)
    cosine, outside = held_out_fidelity(alike)
    assert cosine > 0.999 and outside < 0.02
    # the others (not every 5th) hardly vary beyond their first 4 dimensions, as texts alike:
    # the held-out rows vary where the ranges do not reach
    skewed = alike.copy()
    others = np.ones(len(skewed), bool)
    others[4::5] = False
    skewed[np.ix_(others, np.arange(4, 32))] *= 1e-3
    cosine, outside = held_out_fidelity(skewed)
    held = skewed[4::5]
    rest = np.delete(skewed, np.s_[4::5], axis=0)
    stored = StoredVectors("int8", 32, *int8_ranges(rest))
    decoded = stored.decode(stored.encode(held))
    expected = np.median(np.sum(held * decoded, 1) / (np.linalg.norm(held, axis=1)
                                                      * np.linalg.norm(decoded, axis=1)))
    assert cosine == pytest.approx(expected, abs=1e-5) and cosine < 0.5
    assert outside == pytest.approx(np.mean((held < rest.min(0)) | (held > rest.max(0))),
                                    abs=0.01)


@pytest.mark.pipeline
def test_a_sample_of_repeats_alone_is_warned_about(tiny_export, tmp_path, monkeypatch, capsys):
    """A compressed input whose windows reach only a run of one sentence: the run still
    finishes, and says its ranges come from too few texts."""
    path = str(tmp_path / "c.txt.gz")
    with gzip.open(path, "wt") as f:
        f.write("\n".join([REPEATED] * 2000 + _distinct(50)) + "\n")
    monkeypatch.setattr(calibration, "WHOLE_BYTES", 100)
    monkeypatch.setattr(calibration, "WINDOW_RECORDS", 50)
    manifest = run_job(str(tmp_path / "out"), "--input", path, "--model", tiny_export,
                       "--pooling", "mean", "--vector_dtype", "int8")
    assert manifest["counts"]["embedded"] == 2050
    assert ("warning: --vector_dtype int8: the 'mean' ranges come from 1 distinct texts, too few "
            "to check them against the rest of the input") in capsys.readouterr().err


@pytest.fixture
def embedded(monkeypatch):
    """Every text the encoder embeds in this process (calibration included), in order."""
    from beam_embed.models.embedder import Embedder

    seen, original = [], Embedder.embed

    def counted(self, texts):
        seen.extend(texts)
        return original(self, texts)

    monkeypatch.setattr(Embedder, "embed", counted)
    return seen


def _ranges(out: str) -> dict:
    with open(os.path.join(out, "manifest.json")) as f:
        return {p["column"]: (p["scale"], p["offset"]) for p in json.load(f)["poolings"]}


@pytest.mark.pipeline
def test_an_int8_rerun_keeps_the_ranges_of_the_run_it_replaces(tiny_export, tmp_path, capsys,
                                                               embedded):
    """A re-run into the same folder (+20 documents) keeps the int8 ranges of the run it
    replaces, saying so, and embeds no calibration sample; other poolings calibrate afresh,
    and a calibration says so while it runs."""
    texts = _distinct(220)
    out = str(tmp_path / "out")
    args = ("--model", tiny_export, "--format", "parquet", "--vector_dtype", "int8")
    run_job(out, "--input", write_lines(str(tmp_path / "a.txt"), texts[:200]), *args,
            "--pooling", "mean")
    err = capsys.readouterr().err
    assert "--vector_dtype int8: calibrating each dimension's range on a sample" in err
    assert "--vector_dtype int8: calibrated on 200 distinct texts in " in err
    first = _ranges(out)
    grown = write_lines(str(tmp_path / "b.txt"), texts)
    embedded.clear()
    run_job(out, "--input", grown, *args, "--pooling", "mean", "--overwrite")
    err = capsys.readouterr().err
    assert f"--vector_dtype int8: kept the ranges of the run this one replaces in {out}" in err
    assert "calibrating" not in err
    assert sorted(t for t in embedded if t in texts) == sorted(texts)  # the rows' alone
    assert _ranges(out) == first
    decoded, scale = _decoded(out)
    assert len(decoded) == 220
    embedded.clear()
    run_job(out, "--input", grown, *args, "--pooling", "mean,cls", "--overwrite")
    err = capsys.readouterr().err
    assert "calibrating each dimension's range" in err and "kept the ranges" not in err
    assert sum(t in texts for t in embedded) == 2 * 220  # the sample (every text), the rows
    assert _ranges(out)["mean"] != first["mean"]  # 220 texts' ranges, not 200's


@pytest.mark.pipeline
def test_reuse_from_an_int8_run_into_float16_is_refused_before_any_work(tiny_export, tmp_path,
                                                                        capsys, embedded):
    """An int8 run is copied into int8 runs only (tests/job/test_reuse_int8.py); into another
    dtype it is refused from its manifest, before the model loads or anything calibrates."""
    from beam_embed.pipeline.job.command import main

    corpus = write_lines(str(tmp_path / "c.txt"), _distinct(50))
    previous = str(tmp_path / "prev")
    run_job(previous, "--input", corpus, "--model", tiny_export, "--vector_dtype", "int8")
    embedded.clear()
    capsys.readouterr()
    code = main(["--input", corpus, "--model", tiny_export, "--vector_dtype", "float16",
                 "--reuse", previous, "--output", str(tmp_path / "new")])
    err = capsys.readouterr().err
    assert code == 2 and embedded == []  # no calibration sample, no record, no model
    assert f"--reuse {previous!r}: it stored its vectors as int8 codes" in err
    assert "expected --vector_dtype int8" in err
    assert "calibrating" not in err and len(err.strip().splitlines()) == 1
    assert not os.path.exists(tmp_path / "new")
