"""An output format is one module and one registry entry: a toy format (JSON lines of vectors),
its writer and row counter defined and registered by this test alone, is accepted by --format, written beside Parquet, listed in the
manifest with each shard's rows, and checked like any other shard, with no other module
changed."""

from __future__ import annotations

import json
import re

import apache_beam as beam
import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.iobase import Write

from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set
from beam_embed.pipeline.common.finished_run.shards import check_shards
from beam_embed.pipeline.common.output_formats import OutputFormat
from beam_embed.pipeline.common.run_folder.manifest.folder import PREFIX, SHARD_TEMPLATE
from beam_embed.pipeline.common.settings.errors import IncompleteInput
from beam_embed.pipeline.job.sinks import JsonLinesSink
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline  # a whole job


class WriteJsonVectors(beam.PTransform):
    """One JSON object a line: the record's id and its vectors."""

    def __init__(self, output: str, schema, num_shards: int, in_bundles: bool = False):
        super().__init__()
        self._output, self._schema = output, schema

    def expand(self, batches):
        sink = JsonLinesSink(FileSystems.join(self._output, PREFIX), ".jsonl", SHARD_TEMPLATE)
        return (batches
                | "ToLines" >> beam.FlatMap(_lines, self._schema)
                | "WriteShards" >> Write(sink))


def _lines(batch, schema):
    for i, record in enumerate(batch.records):
        yield json.dumps({"id": record.id, **{column: batch.vectors[column][i].tolist()
                                              for column, _ in schema.widths}})


def json_lines(path: str) -> int:
    with FileSystems.open(path) as f:
        return sum(1 for line in f if line.strip())


JSONL = OutputFormat("jsonl", ".jsonl", "JSON lines", WriteJsonVectors, json_lines,
                     rows_up_front=True)


@pytest.fixture
def jsonl_format(monkeypatch):
    monkeypatch.setitem(output_formats.OUTPUT_FORMATS, "jsonl", JSONL)


def test_a_registered_format_is_written_listed_and_checked(jsonl_format, tiny_export, tmp_path):
    corpus = write_lines(str(tmp_path / "c.jsonl"), [
        *(json.dumps({"text": f"sentence number {i} of the toy corpus"}) for i in range(9)),
        "{not json"])
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", tiny_export,
                       "--format", "parquet,jsonl")
    assert manifest["formats"] == ["parquet", "jsonl"]
    assert list(manifest["files"]) == ["parquet", "jsonl"]
    shards = manifest["files"]["jsonl"]
    assert shards and all(re.fullmatch(r"embeddings-\d{5}-of-\d{5}\.jsonl", n) for n in shards)
    # the dead letters share the suffix but are not the format's shards
    assert manifest["errors_files"] == ["errors-00000-of-00001.jsonl"]
    assert manifest["counts"]["embedded"] == 9 and manifest["counts"]["dead_lettered"] == 1
    assert sum(manifest["rows"][n] for n in shards) == 9
    assert sum(manifest["rows"][n] for n in manifest["files"]["parquet"]) == 9

    es = load_embedding_set(out)
    assert check_shards(es, "jsonl").paths == es.files["jsonl"]
    assert es.shards(None)[0] == "parquet"  # readers still choose one they can read
    with pytest.raises(ValueError, match="cannot be read here"):
        es.shards("jsonl")

    fullest = max(es.files["jsonl"], key=json_lines)  # cut one record off: the check names it
    with open(fullest) as f:
        lines = f.readlines()
    with open(fullest, "w") as f:
        f.writelines(lines[:-1])
    with pytest.raises(IncompleteInput, match=f"{fullest} holds {len(lines) - 1} rows, but"):
        check_shards(load_embedding_set(out), "jsonl")
