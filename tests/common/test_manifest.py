"""manifest.json is written and read only through its typed classes: the JSON they write is the
one runs have always written (keys in the same order), and manifests of older runs still read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set
from beam_embed.pipeline.common.run_folder.manifest.entries import (
    ModelEntry,
    PoolingEntry,
    ReuseEntry,
)
from beam_embed.pipeline.common.run_folder.manifest.job import (
    JOB,
    JOB_MANIFEST_VERSION,
    JobManifest,
)
from beam_embed.pipeline.common.run_folder.manifest.pca import PCA_MANIFEST_VERSION, PcaManifest

# A run's manifest as `beam-embed run` wrote it before the classes (a real run, paths shortened).
JOB_JSON = {
    "granularity": "sentence", "format_version": 1,
    "model": {"name": "tiny-bert", "kind": "bert", "encoder": "m/encoder",
              "preprocessor": "m/preprocessor", "fingerprint": "bcc5d8c74e03d486",
              "max_seq_length": 64, "long_text": "truncate"},
    "poolings": [{"name": "cls", "column": "cls", "width": 8, "normalize": False}],
    "formats": ["parquet", "tfrecord"], "text_column": True, "metadata_columns": ["topic"],
    "inputs": {"patterns": ["c.jsonl"], "files": 1, "bytes": 607, "split": "none"},
    "versions": {"beam": "2.77.0", "tensorflow": "2.21.0", "tensorflow_text": "2.21.1",
                 "python": "3.11.7"},
    "started_at": "2026-12-03T08:45:09Z", "duplicate_id_example": "0",
    "counts": {"read": 13, "embedded": 12, "skipped_empty": 0, "dead_lettered": 1,
               "truncated": 0, "tokens": 60, "files_incomplete": 0, "duplicate_ids": 5},
    "files": {"parquet": ["embeddings-00000-of-00001.parquet"],
              "tfrecord": ["embeddings-00000-of-00001.tfrecord"]},
    "errors_files": ["errors-00000-of-00001.jsonl"],
    "rows": {"embeddings-00000-of-00001.parquet": 12, "embeddings-00000-of-00001.tfrecord": 12},
    "finished_at": "2026-12-03T08:45:10Z", "wall_time_s": 1.221}

PCA_JSON = {
    "format_version": 1, "kind": "pca",
    "input": {"folder": "a", "format": "tfrecord", "model": JOB_JSON["model"]},
    "fit": {"file": "pca.npz", "reused": False, "components": 2},
    "projections": {"files": ["projections-00000-of-00001.parquet"], "rows": 12,
                    "columns": ["id", "pc_1..pc_2", "text"]},
    "sample_file": "sample.parquet", "sample": {"size": 12, "of": 12},
    "projector": {"tensors": "projector/tensors.tsv"}, "html": "plot.html", "png": "plot.png",
    "plot": {"method": "pca", "dims": 2, "color_by": "topic"}}


def test_the_job_manifest_writes_what_it_reads_byte_for_byte(tmp_path):
    manifest = JobManifest.from_json(JOB_JSON)
    assert json.dumps(manifest.to_json()) == json.dumps(JOB_JSON)
    manifest.write(str(tmp_path))
    assert (tmp_path / "manifest.json").read_text() == json.dumps(JOB_JSON, indent=2)
    assert JobManifest.read(str(tmp_path)) == manifest


def test_token_runs_and_runs_without_repeated_ids_keep_their_keys():
    token = {"granularity": "token",
             "tokens": {"layer": "-1", "unit": "word", "dtype": "float32", "width": 8},
             **{k: v for k, v in JOB_JSON.items()
                if k not in ("granularity", "duplicate_id_example")}, "poolings": []}
    assert json.dumps(JobManifest.from_json(token).to_json()) == json.dumps(token)


def test_nested_entries_are_typed_and_write_back_what_they_read():
    manifest = JobManifest.from_json(JOB_JSON)
    assert manifest.model == ModelEntry(
        name="tiny-bert", kind="bert", encoder="m/encoder", preprocessor="m/preprocessor",
        fingerprint="bcc5d8c74e03d486", max_seq_length=64, long_text="truncate")
    assert manifest.model.precision is None  # an older run: written without the key again
    assert manifest.poolings == (PoolingEntry("cls", "cls", 8, False),)
    assert manifest.inputs.patterns == ("c.jsonl",) and manifest.inputs.split == "none"
    # a new run's keys, a null among them, in their order; a dry run's reuse names its folder
    model = ModelEntry("m", "text_in", "m/model", None, "f", None, "truncate", "fp32")
    assert json.dumps(model.to_json()) == json.dumps(
        {"name": "m", "kind": "text_in", "encoder": "m/model", "preprocessor": None,
         "fingerprint": "f", "max_seq_length": None, "long_text": "truncate",
         "precision": "fp32"})
    assert ReuseEntry(output="prev").to_json() == {"output": "prev"}
    # a key this code does not know is kept, after the known ones
    odd = {"name": "x", "handle": "/m", "fingerprint": "abc"}
    assert ModelEntry.from_json(odd).to_json() == {
        "name": "x", "kind": None, "encoder": None, "preprocessor": None, "fingerprint": "abc",
        "max_seq_length": None, "handle": "/m"}


def test_the_readers_embedding_set_is_a_view_of_the_manifest(tmp_path):
    JobManifest.from_json(JOB_JSON).write(str(tmp_path))
    es = load_embedding_set(str(tmp_path))
    assert es.manifest == JobManifest.read(str(tmp_path))
    assert es.model is es.manifest.model and es.counts is es.manifest.counts
    assert es.files == {fmt: (str(tmp_path / name),) for fmt, (name,) in JOB_JSON["files"].items()}
    assert es.columns == ("id", "text", "source", "topic", "num_tokens", "truncated")
    (cls,) = es.poolings
    assert (cls.name, cls.column, cls.width, cls.normalize, cls.dtype) == \
        ("cls", "cls", 8, False, "float32")


def test_an_older_manifest_reads_with_what_it_lacks_empty(tmp_path):
    old = {k: JOB_JSON[k] for k in ("format_version", "model", "poolings", "files", "counts")}
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    es = load_embedding_set(str(tmp_path))
    assert es.rows == {} and es.metadata_columns == () and not es.has_text


@pytest.mark.parametrize("version", [0, JOB_MANIFEST_VERSION + 1, None])
def test_another_version_is_refused(tmp_path, version):
    (tmp_path / "manifest.json").write_text(json.dumps({**JOB_JSON, "format_version": version}))
    with pytest.raises(ValueError, match=rf"format_version {version!r} is not supported; "
                                         rf"expected one of \[1, {JOB_MANIFEST_VERSION}\]"):
        JobManifest.read(str(tmp_path))


def test_compact_vectors_write_version_2_with_their_dtype_and_ranges(tmp_path):
    """Older readers, which know version 1 only, refuse a run whose vectors are not float32."""
    pooling = {**JOB_JSON["poolings"][0], "scale": [0.5] * 8, "offset": [-1.0] * 8}
    manifest = JobManifest.from_json({**JOB_JSON, "poolings": [pooling]})
    manifest = dataclasses.replace(manifest, vector_dtype="int8")
    written = manifest.to_json()
    assert written["format_version"] == 2 == JOB_MANIFEST_VERSION
    assert list(written)[list(written).index("poolings") + 1] == "vector_dtype"
    manifest.write(str(tmp_path))
    assert JobManifest.read(str(tmp_path)).vector_dtype == "int8"
    stored = load_embedding_set(str(tmp_path)).pooling("cls").stored()
    assert (stored.dtype, stored.scale, stored.offset) == ("int8", (0.5,) * 8, (-1.0,) * 8)


def test_the_pca_manifest_writes_its_keys_in_order_and_is_recognized():
    manifest = PcaManifest.from_json(PCA_JSON)
    assert json.dumps(manifest.to_json()) == json.dumps(PCA_JSON)
    assert manifest.format_version == PCA_MANIFEST_VERSION
    assert PcaManifest.recognizes(PCA_JSON) and not JOB.recognizes(PCA_JSON)
    assert JOB.recognizes(JOB_JSON) and not PcaManifest.recognizes(JOB_JSON)
    assert PcaManifest.listed_in(PCA_JSON) == [
        "pca.npz", "sample.parquet", "plot.html", "plot.png", "projector/tensors.tsv",
        "projections-00000-of-00001.parquet"]


def test_a_pca_folder_is_not_read_as_a_run(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps(PCA_JSON))
    with pytest.raises(ValueError, match="is the output of `beam-embed pca`"):
        JobManifest.read(str(tmp_path))
