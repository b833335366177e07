"""WriteEmbeddings writes what `beam-embed run` writes for the same records (manifest, shards,
errors), so search, `run --reuse` and read_embeddings read it; the output folder is checked
before the pipeline runs, claimed while it is written and swapped in when complete; a failed
write leaves the previous run and lets an overwrite take its claim over."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
from apache_beam.testing import test_pipeline

from beam_embed import EmbedTexts, WriteEmbeddings, read_embeddings
from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.common.run_folder.claim_stores import CLAIM
from tests.api.helpers import (
    POOLINGS,
    RUN_FLAGS,
    SETTINGS,
    cosine,
    dead_letter_lines,
    elements,
    write_jsonl,
)
from tests.job_helpers import dead_letters, parquet_rows, run_job, tfrecord_rows

pytestmark = pytest.mark.pipeline  # whole pipelines

SAME = ("granularity", "model", "poolings", "formats", "text_column", "metadata_columns",
        "counts", "inputs")  # inputs: the API's has no files, as a run of none would


def _listed(out: str) -> list[str]:
    """The folder's files as its manifest lists them: nothing else is left there."""
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    return sorted(["manifest.json", *manifest["errors_files"],
                   *(n for names in manifest["files"].values() for n in names)])


def _write(tiny_export, out: str, items=None, **keywords) -> None:
    with test_pipeline.TestPipeline() as p:
        _ = (p | beam.Create(elements() if items is None else items)
             | EmbedTexts(model=tiny_export, pooling=POOLINGS, **SETTINGS)
             .with_exception_handling()
             | WriteEmbeddings(out, metadata_fields=["topic"], **keywords))


@pytest.fixture(scope="module")
def written(tiny_export, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("written") / "out")
    _write(tiny_export, out)
    return out


def test_the_run_is_written_as_the_command_writes_it(written, reference_run):
    run_out, run_manifest = reference_run
    with open(os.path.join(written, "manifest.json")) as f:
        manifest = json.load(f)
    for key in SAME:
        expected = run_manifest[key]
        if key == "inputs":
            expected = {**expected, "patterns": [], "files": 0, "bytes": 0}
        assert manifest[key] == expected, key
    assert sorted(os.listdir(written)) == _listed(written)  # no claim, no staging folder left
    assert len(manifest["files"]["parquet"]) == len(manifest["files"]["tfrecord"]) == 1
    expected_rows = parquet_rows(run_out)
    for rows in (parquet_rows(written), tfrecord_rows(written)):
        assert sorted(rows) == sorted(expected_rows)
        for rid, row in rows.items():
            want = expected_rows[rid]
            for column in ("text", "topic", "num_tokens", "truncated"):
                assert row[column] == want[column], (rid, column)
            assert row["source"] == ""  # an element has no file
            for column in POOLINGS:
                assert cosine(row[column], want[column]) >= 0.99999, (rid, column)
    assert dead_letter_lines(dead_letters(written)) == dead_letter_lines(dead_letters(run_out))


def test_search_reuse_and_read_embeddings_read_it(written, tiny_export, tmp_path, capsys):
    assert cli(["search", written, "the cat sat on the mat .", "-k", "1", "--json"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)[0]["hits"]
    assert hit["id"] == "r1" and hit["score"] == pytest.approx(1.0, abs=1e-5)
    corpus = write_jsonl(str(tmp_path / "corpus.jsonl"))
    again = run_job(str(tmp_path / "again"), "--input", corpus, "--model", tiny_export,
                    *RUN_FLAGS, "--reuse", written)
    assert again["counts"]["reused"] == again["counts"]["embedded"] == 4
    stored = read_embeddings(written, pooling="cls")
    rows = parquet_rows(written)
    assert sorted(stored.ids) == sorted(rows)
    for rid, vector in zip(stored.ids, stored.vectors):
        np.testing.assert_array_equal(vector, np.float32(rows[rid]["cls"]))


def test_an_existing_run_is_refused_before_the_pipeline_and_replaced_with_overwrite(
        written, tiny_export, tmp_path):
    with pytest.raises(ValueError, match=r"holds a previous run .*pass --overwrite"):
        WriteEmbeddings(written)
    out = str(tmp_path / "out")
    _write(tiny_export, out, format=["parquet"])
    _write(tiny_export, out, items=elements()[:2], format=["parquet"], overwrite=True)
    assert sorted(parquet_rows(out)) == ["r1", "r2"]
    assert sorted(os.listdir(out)) == _listed(out)


def test_a_failed_write_leaves_the_previous_run(tiny_export, tmp_path):
    out = str(tmp_path / "out")
    _write(tiny_export, out, format=["parquet"])
    with open(os.path.join(out, "manifest.json")) as f:
        before = f.read()
    # a plain text has no id, which every row needs: the write fails after its claim
    with pytest.raises(Exception, match=r"of 'a plain text' has none: give EmbedTexts"):
        _write(tiny_export, out, items=["a plain text"], format=["parquet"], overwrite=True)
    with open(os.path.join(out, "manifest.json")) as f:
        assert f.read() == before
    assert sorted(parquet_rows(out)) == ["r1", "r2", "r3", "r4"]
    _write(tiny_export, out, items=elements()[:1], format=["parquet"], overwrite=True)
    assert sorted(parquet_rows(out)) == ["r1"]
    assert sorted(os.listdir(out)) == _listed(out)


def test_the_claim_of_a_failed_write_is_named_and_taken_over_with_overwrite(tiny_export,
                                                                           tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(Exception, match=r"has none: give EmbedTexts"):
        _write(tiny_export, out, items=["a plain text"], format=["parquet"])
    assert os.path.exists(os.path.join(out, CLAIM))  # held, as a killed run's is
    with pytest.raises(Exception, match=r"claimed by an earlier WriteEmbeddings of this process "
                                        r"that did not finish.*overwrite=True"):
        _write(tiny_export, out, items=elements()[:1], format=["parquet"])
    _write(tiny_export, out, items=elements()[:1], format=["parquet"], overwrite=True)
    assert sorted(parquet_rows(out)) == ["r1"]
    assert sorted(os.listdir(out)) == _listed(out)


def test_int8_needs_texts_to_calibrate_on_and_reads_back_within_half_a_step(tiny_export,
                                                                            reference_run,
                                                                            tmp_path):
    with pytest.raises(ValueError, match=r"int8.*pass calibration_texts"):
        WriteEmbeddings(str(tmp_path / "none"), vector_dtype="int8")
    out = str(tmp_path / "int8")
    texts = [e["text"] for e in elements()[:4]]
    _write(tiny_export, out, vector_dtype="int8", calibration_texts=texts)
    stored = read_embeddings(out, pooling="mean")
    exact = parquet_rows(reference_run[0])
    step = np.float32(stored.manifest["poolings"][0]["scale"])
    for rid, vector in zip(stored.ids, stored.vectors):
        assert (np.abs(vector - np.float32(exact[rid]["mean"])) <= step / 2 + 1e-5).all()


def test_keywords_and_a_write_without_embed_texts(tiny_export, tmp_path):
    with pytest.raises(TypeError, match=r"'formst'; did you mean format\?"):
        WriteEmbeddings(str(tmp_path / "a"), formst=["parquet"])
    with pytest.raises(ValueError, match=r"unknown --format 'csv'"):
        WriteEmbeddings(str(tmp_path / "a"), format=["csv"])
    with pytest.warns(DeprecationWarning, match=r"WriteEmbeddings\(formats=...\) is now "
                                                r"WriteEmbeddings\(format=...\)"):
        earlier = WriteEmbeddings(str(tmp_path / "a"), formats=["parquet"])
    assert earlier.settings.format == ("parquet",)
    with pytest.raises(TypeError, match="both format= and its earlier name formats="):
        WriteEmbeddings(str(tmp_path / "a"), format="parquet", formats=["parquet"])
    with pytest.raises(ValueError, match="found no EmbedTexts upstream"):
        with test_pipeline.TestPipeline() as p:
            _ = p | beam.Create([1]) | WriteEmbeddings(str(tmp_path / "b"))


def _state(out: str) -> dict[str, bytes]:
    """Every file under `out`, by relative path: claims and staging folders included."""
    found = {}
    for root, _, files in os.walk(out):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, out)] = f.read()
    return found


@pytest.mark.parametrize("overwrite", [True, False])
def test_two_writers_of_one_folder_in_one_pipeline_are_refused_when_built(tiny_export, tmp_path,
                                                                          overwrite):
    out = str(tmp_path / "out")
    if overwrite:  # a previous run to keep; without overwrite, a folder with none is written
        _write(tiny_export, out, items=elements()[:2], formats=["parquet"])
    before = _state(out)
    with pytest.raises(ValueError, match=rf"^WriteEmbeddings 'Second' and 'First' both write "
                                         rf"into {out}/? in one pipeline; .*give each its own"):
        with test_pipeline.TestPipeline() as p:
            embedded = (p | beam.Create(elements())
                        | EmbedTexts(model=tiny_export, poolings=POOLINGS, **SETTINGS)
                        .with_exception_handling())
            _ = embedded | "First" >> WriteEmbeddings(out, overwrite=overwrite)
            _ = embedded | "Second" >> WriteEmbeddings(out + "/", overwrite=overwrite)
    assert _state(out) == before  # no claim, no staging folder: nothing ran


def test_a_live_claim_is_never_taken_over_and_a_dead_one_is_with_overwrite(tiny_export,
                                                                           tmp_path):
    out = str(tmp_path / "out")
    _write(tiny_export, out, items=elements()[:2], formats=["parquet"])
    code = ("import sys; from beam_embed.pipeline.common.run_folder.claim import claim_output; "
            f"c = claim_output({out!r}, False, ['another writer']); print(c.run_id, flush=True); "
            "sys.stdin.read()")  # holds the claim until its stdin closes
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": ":".join(sys.path)})
    try:
        run_id = holder.stdout.readline().strip()
        before = _state(out)
        with pytest.raises(Exception, match=rf"{out} is in use by run {run_id} \(pid "
                                            rf"{holder.pid} .*another writer\)"):
            _write(tiny_export, out, items=elements()[:1], formats=["parquet"], overwrite=True)
        assert _state(out) == before  # its claim as it was, no staging folder, the run kept
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    _write(tiny_export, out, items=elements()[:1], formats=["parquet"], overwrite=True)
    assert sorted(parquet_rows(out)) == ["r1"]
    assert sorted(os.listdir(out)) == _listed(out)


# ids that repeat, as given and as text (1 and "1"), one of them on a record dead-lettered as
# empty; metadata nested (a list, an object), plain and missing
DUPLICATES = [
    {"id": 1, "text": "the cat sat on the mat .", "topic": {"x": [1], "y": "é"}},
    {"id": "1", "text": "a dog ran !", "topic": ["a", 2]},
    {"id": "r2", "text": "the river bank", "topic": "geo"},
    {"id": "r2", "text": "money is big", "topic": None},
    {"id": "r3", "text": " \u3000 ", "topic": "blank"},
    {"id": "r3", "text": "the bank", "topic": 7},
    {"id": "r4", "text": "small river", "topic": True},
]


def test_duplicate_ids_and_nested_metadata_as_the_command_writes_them(tiny_export, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in DUPLICATES), encoding="utf-8")
    run_out = str(tmp_path / "run")
    command = run_job(run_out, "--input", str(corpus), "--model", tiny_export, *RUN_FLAGS,
                      "--format", "parquet")
    out = str(tmp_path / "api")
    _write(tiny_export, out, items=[dict(row) for row in DUPLICATES], formats=["parquet"])
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    assert manifest["counts"]["duplicate_ids"] == 3  # "1", "r2", "r3"
    assert manifest["duplicate_id_example"] == "1"
    assert manifest["counts"] == command["counts"]
    assert manifest["duplicate_id_example"] == command["duplicate_id_example"]

    def topics(folder, listed):
        return sorted((row["id"], row["text"], row["topic"]) for name in listed["files"]["parquet"]
                      for row in pq.read_table(os.path.join(folder, name),
                                               columns=["id", "text", "topic"]).to_pylist())

    written = topics(out, manifest)
    assert ("1", "the cat sat on the mat .", '{"x": [1], "y": "é"}') in written
    assert ("1", "a dog ran !", '["a", 2]') in written
    assert ("r2", "money is big", None) in written and ("r4", "small river", "True") in written
    assert written == topics(run_out, command)
