"""The manifest's counts, files, rows and digests and the pca manifest are typed: manifests that
`beam-embed run` and `beam-embed pca` wrote before they were (tests/common/manifests/: a run with
--dedupe, --split sentences and repeated ids, and a pca of it, written by the code of the
previous step) read into typed fields and are written back byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from beam_embed.pipeline.common.run_folder.manifest.entries import Counts, Digest, ModelEntry
from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest
from beam_embed.pipeline.common.run_folder.manifest.pca import PcaManifest

STORED = Path(__file__).parent / "manifests"
PARQUET, TFRECORD = "embeddings-00000-of-00001.parquet", "embeddings-00000-of-00001.tfrecord"


def _folder_with(tmp_path, name: str) -> str:
    folder = tmp_path / name.split(".")[0]
    folder.mkdir()
    shutil.copy(STORED / name, folder / "manifest.json")
    return str(folder)


def test_a_runs_manifest_is_written_back_byte_for_byte(tmp_path):
    folder = _folder_with(tmp_path, "run.json")
    manifest = JobManifest.read(folder)
    manifest.write(str(tmp_path))
    assert (tmp_path / "manifest.json").read_bytes() == (STORED / "run.json").read_bytes()


def test_a_pca_manifest_is_written_back_byte_for_byte(tmp_path):
    manifest = PcaManifest.from_json(json.loads((STORED / "pca.json").read_text()))
    manifest.write(str(tmp_path))
    assert (tmp_path / "manifest.json").read_bytes() == (STORED / "pca.json").read_bytes()


def test_the_runs_counts_files_rows_and_digests_read_as_typed_fields(tmp_path):
    manifest = JobManifest.read(_folder_with(tmp_path, "run.json"))
    c = manifest.counts
    assert isinstance(c, Counts)
    assert (c.read, c.embedded, c.skipped_empty, c.dead_lettered, c.truncated, c.tokens) == \
        (12, 16, 2, 0, 0, 84)
    assert (c.files_incomplete, c.duplicate_ids, c.distinct_texts, c.encoded, c.split_records) \
        == (0, 3, 6, 6, 16)
    assert c.reused is None and "reused" not in c.to_json()  # a run without --reuse
    assert manifest.files.names("parquet") == (PARQUET,) and manifest.files.names("jsonl") == ()
    assert list(manifest.files) == ["parquet", "tfrecord"]
    assert manifest.rows[PARQUET] == manifest.rows[TFRECORD] == 16
    digest = manifest.digests.of_shard(PARQUET)
    assert isinstance(digest, Digest) and digest.bytes == 9463 and len(digest.sha256) == 64
    assert manifest.digests.of_shard("elsewhere.parquet") is None


def test_the_pca_manifests_entries_read_as_typed_fields():
    run = json.loads((STORED / "run.json").read_text())
    pca = PcaManifest.from_json(json.loads((STORED / "pca.json").read_text()))
    assert pca.input.folder.endswith("/run") and pca.input.format == "parquet"
    assert pca.input.model == pca.fit.model == ModelEntry.from_json(run["model"])
    assert (pca.fit.file, pca.fit.reused, pca.fit.components, pca.fit.count, pca.fit.width) == \
        ("pca.npz", False, 2, 16, 8)
    assert pca.fit.explained_variance_ratio == pytest.approx((0.915281, 0.068676))
    assert pca.projections.files == ("projections-00000-of-00001.parquet",)
    assert pca.projections.rows == pca.sample.size == pca.sample.of == 16
    assert pca.sample.note == "all 16 records" and pca.sample.seed == 0
    assert (pca.plot.method, pca.plot.dims, pca.plot.color_by) == ("pca", 2, "topic")
    assert pca.projector.tensors == "projector/tensors.tsv"


def test_counts_in_another_order_or_with_an_unknown_name_are_written_as_read():
    run = json.loads((STORED / "run.json").read_text())
    counts = dict(reversed(run["counts"].items())) | {"counted_later": 4}
    manifest = JobManifest.from_json({**run, "counts": counts})
    assert json.dumps(manifest.to_json()["counts"]) == json.dumps(counts)
    assert manifest.counts.embedded == 16 and manifest.counts.extra == {"counted_later": 4}


def test_a_pca_manifest_without_a_color_writes_it_as_null():
    pca = json.loads((STORED / "pca.json").read_text())
    pca["plot"]["color_by"] = None
    manifest = PcaManifest.from_json(pca)
    assert manifest.plot.color_by is None
    assert json.dumps(manifest.to_json()) == json.dumps(pca)
