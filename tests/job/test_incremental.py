"""--dedupe and --reuse through `beam-embed run`, on the tiny random BERT export: what reaches the
encoder, every record's row, vectors against the numpy BERT and against the previous run's bits,
and the refusals (exit 2, one line naming why) before any data is read."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from beam_embed.models.embedder import Embedder
from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors
from beam_embed.pipeline.job.command import main
from tests.bert_reference import tiny_poolings
from tests.job_helpers import dead_letters, parquet_rows, run_job, tfrecord_rows, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs through the command

DISTINCT = ["the cat sat on the mat .", "a dog", "the river bank was big and small",
            "money is money , the bank is big !", "play"]
# 12 records, 5 distinct texts (one only after --clean's whitespace clean-up), one empty
CORPUS = [DISTINCT[0], DISTINCT[1], DISTINCT[0], "  a   dog ", DISTINCT[2], DISTINCT[3],
          DISTINCT[0], DISTINCT[4], DISTINCT[1], "", DISTINCT[2], DISTINCT[3]]
NEW = ["the small dog sat on a big mat ?", "x is x", DISTINCT[4]]
ARGS = ("--pooling", "mean,cls", "--batch_tokens", "64", "--format", "parquet,tfrecord")


@pytest.fixture
def encoded(monkeypatch):
    """Every text the encoder embeds in this process (the job runs in-process), in order."""
    seen, original = [], Embedder.embed

    def counted(self, texts):
        seen.extend(texts)
        return original(self, texts)

    monkeypatch.setattr(Embedder, "embed", counted)
    return seen


def _reference(weights, texts):
    ref, lengths = tiny_poolings(weights, texts)
    return {t: (ref["mean"][i], ref["cls"][i], lengths[i]) for i, t in enumerate(texts)}


def _check_vectors(rows, weights, texts):
    ref = _reference(weights, sorted(set(texts)))
    for row in rows.values():
        mean, cls, n = ref[row["text"]]
        np.testing.assert_allclose(row["mean"], mean, atol=1e-5)
        np.testing.assert_allclose(row["cls"], cls, atol=1e-5)
        assert row["num_tokens"] == n


def _stored(row) -> tuple:
    """What a copied row must repeat exactly: its vectors' float32 bytes, token count, flag."""
    return (np.float32(row["mean"]).tobytes(), np.float32(row["cls"]).tobytes(),
            row["num_tokens"], row["truncated"])


def _by_text(output) -> dict[str, set]:
    """text -> the stored values of its rows (a text's copies in one run, embedded in batches
    of other lengths, may differ in their last bits)."""
    out = {}
    for row in parquet_rows(output).values():
        out.setdefault(row["text"], set()).add(_stored(row))
    return out


@pytest.fixture(scope="module")
def first_run(tiny_export, tmp_path_factory):
    """A plain run on CORPUS: (corpus path, output folder, manifest)."""
    folder = tmp_path_factory.mktemp("first")
    corpus = write_lines(str(folder / "corpus.txt"), CORPUS)
    out = str(folder / "out")
    return corpus, out, run_job(out, "--input", corpus, "--model", tiny_export, *ARGS)


def test_dedupe_encodes_each_distinct_text_once(tiny_export, tiny_checkpoint, first_run,
                                                tmp_path, encoded, capsys):
    corpus, plain_out, plain = first_run
    out = str(tmp_path / "dedupe")
    capsys.readouterr()
    manifest = run_job(out, "--input", corpus, "--model", tiny_export, *ARGS, "--dedupe")
    assert "encoded 5 text(s) for 11 rows (5 distinct texts)\n" in capsys.readouterr().err
    from_corpus = [t for t in encoded if t in DISTINCT]
    assert sorted(from_corpus) == sorted(DISTINCT)  # each once, the cleaned copy included
    c = manifest["counts"]
    assert (c["distinct_texts"], c["encoded"], c["embedded"]) == (5, 5, 11)
    assert c["skipped_empty"] == 1 and c["read"] == plain["counts"]["read"] == 12
    assert "reused" not in c and "reused_from" not in manifest
    rows, base = parquet_rows(out), parquet_rows(plain_out)
    assert set(rows) == set(base) and len(rows) == 11  # every record its own row
    for rid, row in rows.items():
        assert row["text"] == base[rid]["text"]
        np.testing.assert_allclose(row["mean"], base[rid]["mean"], atol=1e-6)
    _check_vectors(rows, tiny_checkpoint[1], DISTINCT)
    assert set(tfrecord_rows(out)) == set(rows)
    assert [d["kind"] for d in dead_letters(out)] == ["empty"]


def test_reuse_copies_stored_rows_and_encodes_only_new_texts(tiny_export, tiny_checkpoint,
                                                             first_run, tmp_path, encoded,
                                                             capsys):
    _, previous, first = first_run
    corpus = write_lines(str(tmp_path / "grown.txt"), CORPUS + NEW)
    out = str(tmp_path / "reuse")
    capsys.readouterr()
    manifest = run_job(out, "--input", corpus, "--model", tiny_export, *ARGS,
                       "--reuse", previous + "/")
    assert (f"encoded 2 text(s) for 14 rows (7 distinct texts); copied 12 rows' vectors from "
            f"{previous}\n") in capsys.readouterr().err
    assert sorted(t for t in encoded if t in DISTINCT + NEW) == sorted(NEW[:2])
    c = manifest["counts"]
    assert (c["reused"], c["encoded"], c["embedded"], c["distinct_texts"]) == (12, 2, 14, 7)
    assert manifest["reused_from"] == {
        "output": previous, "started_at": first["started_at"],
        "finished_at": first["finished_at"], "fingerprint": first["model"]["fingerprint"],
        "manifest_sha256": manifest["reused_from"]["manifest_sha256"], "rows": 11}
    assert len(manifest["reused_from"]["manifest_sha256"]) == 16
    rows, old = parquet_rows(out), _by_text(previous)
    assert len(rows) == 14 and all(rid.startswith(corpus + ":") for rid in rows)
    for row in rows.values():
        if row["text"] in old:  # copied: one of the previous run's rows, bit for bit
            assert _stored(row) in old[row["text"]]
    _check_vectors(rows, tiny_checkpoint[1], DISTINCT + NEW)
    examples = tfrecord_rows(out)
    for rid, row in rows.items():
        np.testing.assert_array_equal(examples[rid]["mean"], np.float32(row["mean"]))


def test_reuse_of_the_folder_it_overwrites(tiny_export, first_run, tmp_path, encoded):
    corpus, previous, _ = first_run
    out = str(tmp_path / "same")
    shutil.copytree(previous, out)
    before = _by_text(out)
    grown = write_lines(str(tmp_path / "grown.txt"), CORPUS + NEW)
    manifest = run_job(out, "--input", grown, "--model", tiny_export, *ARGS, "--reuse", out,
                       "--overwrite")
    assert manifest["counts"]["reused"] == 12 and manifest["reused_from"]["output"] == out
    rows = parquet_rows(out)
    assert len(rows) == 14
    for row in rows.values():
        if row["text"] in before:
            assert _stored(row) in before[row["text"]]


def _refused(capsys, out, *args) -> str:
    capsys.readouterr()
    code = main(["--output", out, "--progress_every", "0", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_reuse_refuses_other_settings(tiny_export, text_in, first_run, tmp_path, capsys,
                                      encoded):
    corpus, previous, _ = first_run
    out = str(tmp_path / "out")
    line = _refused(capsys, out, "--input", corpus, "--encoder", text_in[0], "--reuse", previous)
    assert "other settings" in line and "model (fingerprint)" in line and "poolings" in line
    line = _refused(capsys, out, "--input", corpus, "--model", tiny_export, "--pooling", "mean",
                    "--reuse", previous)
    assert "poolings mean (8), cls (8), this run's mean (8)" in line
    assert "fingerprint" not in line
    line = _refused(capsys, out, "--input", corpus, "--model", tiny_export, *ARGS,
                    "--max_seq_length", "32", "--reuse", previous)
    assert "max length 64, this run's 32" in line
    line = _refused(capsys, out, "--input", corpus, "--model", tiny_export, *ARGS,
                    "--granularity", "token", "--reuse", previous)
    assert "--reuse applies to sentence vectors" in line
    assert not set(encoded) & set(CORPUS)  # refused before any record was read


def test_reuse_copies_only_float32_runs_into_any_vector_dtype(tiny_export, first_run, tmp_path,
                                                             capsys, encoded):
    corpus, previous, _ = first_run
    rounded = str(tmp_path / "rounded")
    run_job(rounded, "--input", corpus, "--model", tiny_export, *ARGS, "--vector_dtype", "float16")
    encoded.clear()
    line = _refused(capsys, str(tmp_path / "out"), "--input", corpus, "--model", tiny_export,
                    *ARGS, "--reuse", rounded)
    assert "stored its vectors as float16" in line and "reuse copies from a float32 run" in line
    assert not set(encoded) & set(CORPUS)  # refused before any record was read

    # A float32 run's rows into a float16 run: copied, then stored as any encoded row is
    grown = write_lines(str(tmp_path / "grown.txt"), CORPUS + NEW)
    out = str(tmp_path / "half")
    manifest = run_job(out, "--input", grown, "--model", tiny_export, *ARGS,
                       "--vector_dtype", "float16", "--reuse", previous)
    assert manifest["vector_dtype"] == "float16" and manifest["counts"]["reused"] == 12
    assert sorted(t for t in encoded if t in DISTINCT + NEW) == sorted(NEW[:2])
    def half(row) -> bytes:
        return b"".join(np.float32(row[c]).astype(np.float16).tobytes() for c in ("mean", "cls"))

    old = {}
    for row in parquet_rows(previous).values():
        old.setdefault(row["text"], set()).add(half(row))
    copied = [row for row in parquet_rows(out).values() if row["text"] in old]
    assert len(copied) == 12
    for row in copied:  # the previous run's float32 values, rounded as the writer rounds
        assert half(row) in old[row["text"]]


def test_reuse_into_int8_stores_copied_rows_with_the_runs_own_ranges(tiny_export, first_run,
                                                                      tmp_path):
    """A float32 run seeds an int8 run: its rows are copied, then stored with the new run's
    calibrated ranges exactly as the encoded rows are (the pooling entries differ only by those
    ranges, which are how this run stores vectors, not what the vectors are)."""
    _, previous, _ = first_run
    grown = write_lines(str(tmp_path / "grown.txt"), CORPUS + NEW)
    out = str(tmp_path / "int8")
    manifest = run_job(out, "--input", grown, "--model", tiny_export, *ARGS,
                       "--vector_dtype", "int8", "--reuse", previous)
    assert manifest["vector_dtype"] == "int8"
    assert (manifest["counts"]["reused"], manifest["counts"]["encoded"]) == (12, 2)
    stored = {p["column"]: StoredVectors("int8", p["width"], p["scale"], p["offset"])
              for p in manifest["poolings"]}
    old = {}
    for row in parquet_rows(previous).values():
        old.setdefault(row["text"], set()).add(tuple(
            stored[c].encode(np.float32([row[c]]))[0].tobytes() for c in ("mean", "cls")))
    copied = [row for row in parquet_rows(out).values() if row["text"] in old]
    assert len(copied) == 12
    for row in copied:  # the previous run's float32 values, coded with this run's ranges
        assert (row["mean"], row["cls"]) in old[row["text"]]  # int8 codes, as bytes


def test_reuse_refuses_incomplete_or_unmatchable_runs(tiny_export, first_run, tmp_path, capsys):
    corpus, previous, _ = first_run
    out = str(tmp_path / "out")
    line = _refused(capsys, out, "--input", corpus, "--model", tiny_export, *ARGS,
                    "--reuse", str(tmp_path))
    assert f"--reuse {str(tmp_path)!r}: no manifest.json" in line

    cut = str(tmp_path / "cut")
    shutil.copytree(previous, cut)
    shard = sorted(f for f in os.listdir(cut) if f.endswith(".parquet"))[0]
    with open(os.path.join(cut, shard), "r+b") as f:
        f.truncate(os.path.getsize(f.name) // 2)
    line = _refused(capsys, out, "--input", corpus, "--model", tiny_export, *ARGS, "--reuse", cut)
    assert "its shards are incomplete" in line and shard in line

    os.remove(os.path.join(cut, shard))
    line = _refused(capsys, out, "--input", corpus, "--model", tiny_export, *ARGS, "--reuse", cut)
    assert f"{shard} is missing" in line

    textless = str(tmp_path / "textless")
    run_job(textless, "--input", corpus, "--model", tiny_export, *ARGS, "--no-include_text")
    line = _refused(capsys, out, "--input", corpus, "--model", tiny_export, *ARGS,
                    "--reuse", textless)
    assert "--no-include_text" in line


def test_reuse_from_gs(tiny_export, first_run, gcs, tmp_path, encoded):
    corpus, previous, first = first_run
    remote = gcs.upload_tree(previous, "previous")  # a finished run, as a bucket holds it
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", tiny_export, *ARGS, "--reuse", remote)
    assert not set(encoded) & set(CORPUS)  # every text copied, none encoded
    c = manifest["counts"]
    assert (c["reused"], c["encoded"], c["embedded"]) == (11, 0, 11)
    assert manifest["reused_from"]["output"] == remote
    assert manifest["reused_from"]["finished_at"] == first["finished_at"]
    old = _by_text(previous)
    assert all(_stored(row) in old[row["text"]] for row in parquet_rows(out).values())


def test_reuse_of_a_tfrecord_only_run(tiny_export, tmp_path, capsys, encoded):
    corpus = write_lines(str(tmp_path / "corpus.txt"), CORPUS)
    previous = str(tmp_path / "previous")
    run_job(previous, "--input", corpus, "--model", tiny_export, *ARGS[:4], "--format",
            "tfrecord")
    stored = {}
    for row in tfrecord_rows(previous).values():
        stored.setdefault(row["text"], set()).add(row["mean"].tobytes())
    grown = write_lines(str(tmp_path / "grown.txt"), CORPUS + NEW)
    out = str(tmp_path / "out")
    encoded.clear()
    manifest = run_job(out, "--input", grown, "--model", tiny_export, *ARGS[:4], "--format",
                       "parquet", "--reuse", previous)
    assert sorted(t for t in encoded if t in DISTINCT + NEW) == sorted(NEW[:2])
    assert manifest["counts"]["reused"] == 12
    rows = parquet_rows(out)
    assert sum(np.float32(r["mean"]).tobytes() in stored.get(r["text"], ()) for r in
               rows.values()) == 12

    shard = os.path.join(previous, next(f for f in os.listdir(previous)
                                        if f.endswith(".tfrecord")))
    with open(shard, "r+b") as f:
        f.truncate(os.path.getsize(shard) - 3)
    line = _refused(capsys, str(tmp_path / "again"), "--input", grown, "--model", tiny_export,
                    *ARGS[:4], "--reuse", previous)
    assert "its shards are incomplete" in line and "cut short" in line


def test_dedupe_dead_letters_every_record_of_a_text_the_encoder_fails(tiny_export, first_run,
                                                                      tmp_path, monkeypatch):
    corpus, _, _ = first_run
    original = Embedder.embed

    def failing(self, texts):
        if "a dog" in texts:
            raise RuntimeError("no dogs")
        return original(self, texts)

    monkeypatch.setattr(Embedder, "embed", failing)
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", tiny_export, *ARGS, "--dedupe")
    failed = [d for d in dead_letters(out) if d["kind"] == "error"]
    assert sorted(d["id"] for d in failed) == [f"{corpus}:{i}" for i in (2, 4, 9)]
    assert all("no dogs" in d["reason"] and d["excerpt"] == "a dog" for d in failed)
    c = manifest["counts"]
    assert (c["embedded"], c["dead_lettered"], c["encoded"]) == (8, 3, 5)
    assert len(parquet_rows(out)) == 8




# A text's copies within one run, encoded in batches padded to other lengths, may differ in
# their last bits (MiniLM on 3,000 documents, AVX2: up to 1.6e-7); --reuse copies one of them
# to every row of that text. The bound docs/run.md states:
SHARED_TEXT_TOLERANCE = 1e-6


def _nudge_copies(monkeypatch) -> None:
    """Encodes a text's second and later copies one float32 step off: what another batch's
    padding length does on some CPUs (this one's kernels give the tiny model identical bits)."""
    seen, original = {}, Embedder.embed

    def rounded(self, texts):
        out = original(self, texts)
        for i, t in enumerate(texts):
            seen[t] = seen.get(t, 0) + 1
            if seen[t] > 1:
                for v in out.vectors.values():
                    v[i] = np.nextafter(v[i], np.float32(np.inf))
        return out

    monkeypatch.setattr(Embedder, "embed", rounded)


def test_reuse_is_bit_for_bit_per_row_unless_a_text_was_encoded_twice(tiny_export, tmp_path,
                                                                      monkeypatch):
    """What docs/run.md promises: each row's vector is its own earlier one bit for bit where the
    previous run encoded its text once; a text the previous run encoded for several documents
    gets one of their vectors, within SHARED_TEXT_TOLERANCE of the row's own; a previous run
    made with --dedupe encoded each text once, so every row is its own, bit for bit."""
    corpus = write_lines(str(tmp_path / "corpus.txt"), CORPUS)
    grown = write_lines(str(tmp_path / "grown.txt"), CORPUS + NEW)
    previous = {}
    for name, extra in (("plain", ()), ("deduped", ("--dedupe",))):
        with monkeypatch.context() as m:
            _nudge_copies(m)
            previous[name] = str(tmp_path / name)
            run_job(previous[name], "--input", corpus, "--model", tiny_export, *ARGS, *extra)
    for name in previous:
        out = str(tmp_path / f"reuse-{name}")
        run_job(out, "--input", grown, "--model", tiny_export, *ARGS, "--reuse", previous[name])
        before = parquet_rows(previous[name])
        after = {rid.replace(grown, corpus): row for rid, row in parquet_rows(out).items()}
        shared = {t for t, values in _by_text(previous[name]).items() if len(values) > 1}
        assert bool(shared) == (name == "plain")  # copies of a text stored differently
        differed = 0
        for rid, row in before.items():
            if row["text"] not in shared:
                assert _stored(after[rid]) == _stored(row), rid
                continue
            for c in ("mean", "cls"):
                np.testing.assert_allclose(after[rid][c], row[c], rtol=0,
                                           atol=SHARED_TEXT_TOLERANCE)
            differed += _stored(after[rid]) != _stored(row)
        assert (differed > 0) == (name == "plain")  # not bit for bit, within the tolerance
