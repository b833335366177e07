"""`run`, `pca` and `search` on gs:// (a Cloud Storage emulator), against the same commands on
local files: inputs (a plain file, gzipped parts found by a glob), every output (Parquet,
TFRecord, errors, manifest), a model export read from gs://, pca writing to gs://."""

from __future__ import annotations

import gzip
import json
import os
import re
from types import SimpleNamespace

import numpy as np
import pyarrow.parquet as pq
import pytest

from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.common.run_folder.manifest.pca import PcaManifest
from tests.evaluate.test_command import reference_vectors
from tests.gcs_emulator import GcsFolder, use_emulator
from tests.job_helpers import dead_letters, parquet_rows, tfrecord_rows

pytestmark = pytest.mark.pipeline  # whole commands, end to end

# words of the tiny model's vocabulary (tests/bert_reference.py), which numpy's BERT tokenizes too
TEXTS = ["the cat sat on the mat", "a dog run on the river", "money is big",
         "the river bank was small", "a big cat", "play the dog", "the bank is big",
         "small dog play", "the mat is big", "a bank on the river"]
POOLINGS = "mean,cls"


def _jsonl(rows: list[tuple[str, str]]) -> bytes:
    return "".join(json.dumps({"id": i, "body": t}) + "\n" for i, t in rows).encode()


def _corpus() -> dict[str, bytes]:
    """A plain JSON-lines file and two gzipped parts, one line of them not JSON."""
    rows = [(f"r{i}", t) for i, t in enumerate(TEXTS)]
    bad = b'{"id": "broken", "body": \n'
    return {"in/a.jsonl": _jsonl(rows[:4]),
            "in/part-0.jsonl.gz": gzip.compress(_jsonl(rows[4:7]) + bad),
            "in/part-1.jsonl.gz": gzip.compress(_jsonl(rows[7:]))}


def _run_args(inputs: str, model: str, output: str) -> list[str]:
    return ["run", "--input", f"{inputs}/a.jsonl", "--input", f"{inputs}/part-*.jsonl.gz",
            "--text_field", "body", "--id_field", "id", "--model", model, "--pooling", POOLINGS,
            "--format", "parquet,tfrecord", "--output", output, "--progress_every", "0"]


@pytest.fixture(scope="module")
def runs(gcs_emulator, tiny_export, tmp_path_factory):
    """The same corpus embedded twice: from and to local files with the local export, and
    from and to gs:// with the export uploaded there; then pca on each."""
    folder = tmp_path_factory.mktemp("gcs_commands")
    with pytest.MonkeyPatch.context() as patch:
        use_emulator(patch, gcs_emulator, str(folder / "cache"))
        gcs = GcsFolder.new(gcs_emulator, "commands")
        for name, data in _corpus().items():
            gcs.upload(name, data)
            os.makedirs(folder / os.path.dirname(name), exist_ok=True)
            (folder / name).write_bytes(data)
        model = gcs.upload_tree(tiny_export, "model")  # what `export-model` wrote
        local = str(folder / "local")
        assert cli(_run_args(str(folder / "in"), tiny_export, local)) == 0
        assert cli(_run_args(gcs.path("in"), model, gcs.path("out"))) == 0
        assert cli(["pca", "--input", local, "--output", str(folder / "viz"),
                    "--components", "3"]) == 0
        assert cli(["pca", "--input", gcs.path("out"), "--output", gcs.path("viz"),
                    "--components", "3"]) == 0
        yield SimpleNamespace(gcs=gcs, local=local, folder=folder, patch=patch,
                              out=gcs.download("out", str(folder / "from_gs")),
                              viz=gcs.download("viz", str(folder / "viz_from_gs")))


def _manifest(folder: str) -> dict:
    with open(os.path.join(folder, "manifest.json")) as f:
        return json.load(f)


def test_vectors_read_back_from_gs_equal_the_local_run_and_numpy(runs, tiny_checkpoint):
    local, remote = parquet_rows(runs.local), parquet_rows(runs.out)
    assert sorted(remote) == sorted(local) == sorted(f"r{i}" for i in range(len(TEXTS)))
    expected = reference_vectors(tiny_checkpoint[1], TEXTS)
    for i, text in enumerate(TEXTS):
        row = remote[f"r{i}"]
        assert row["text"] == text
        part = "a.jsonl" if i < 4 else f"part-{0 if i < 7 else 1}.jsonl.gz"
        assert row["source"] == runs.gcs.path(f"in/{part}")
        for pooling in POOLINGS.split(","):
            got = np.asarray(row[pooling], np.float64)
            np.testing.assert_allclose(got, local[f"r{i}"][pooling], atol=1e-6)
            want = expected[pooling][i]  # by hand, in numpy: direction (normalization aside)
            cosine = got @ want / (np.linalg.norm(got) * np.linalg.norm(want))
            assert cosine > 0.99999, (pooling, text, cosine)


def test_tfrecord_shards_on_gs_hold_the_parquet_rows(runs):
    parquet, tfrecord = parquet_rows(runs.out), tfrecord_rows(runs.out)
    assert sorted(tfrecord) == sorted(parquet)
    for key, row in tfrecord.items():
        assert row["text"] == parquet[key]["text"]
        np.testing.assert_allclose(row["cls"], parquet[key]["cls"], atol=0)


def test_errors_and_manifest_on_gs_match_the_local_run(runs):
    local, remote = _manifest(runs.local), _manifest(runs.out)
    assert remote["counts"] == local["counts"]
    assert remote["counts"]["dead_lettered"] == 1
    assert remote["counts"]["read"] == len(TEXTS) + 1
    assert remote["model"]["encoder"] == runs.gcs.path("model/encoder")  # its gs:// name
    # the folder holds the files the manifest lists, and nothing else (no claim, no staging)
    listed = {*remote["files"]["parquet"], *remote["files"]["tfrecord"],
              *remote["errors_files"], "manifest.json"}
    assert set(runs.gcs.snapshot("out")) == listed
    [error] = dead_letters(runs.out)
    [same] = dead_letters(runs.local)
    assert error["source"] == runs.gcs.path("in/part-0.jsonl.gz")
    assert (error["kind"], error["reason"], error["excerpt"]) == (
        same["kind"], same["reason"], same["excerpt"])


def _projections(folder: str) -> dict[str, np.ndarray]:
    """id -> its coordinates (pc_1, pc_2, ...), from the shards the manifest lists."""
    rows = {}
    for name in _manifest(folder)["projections"]["files"]:
        table = pq.read_table(os.path.join(folder, name))
        pcs = sorted((c for c in table.column_names if re.fullmatch(r"pc_\d+", c)),
                     key=lambda c: int(c[3:]))
        for row in table.to_pylist():
            rows[row["id"]] = np.array([row[c] for c in pcs])
    return rows


def test_pca_reads_gs_and_writes_its_folder_to_gs(runs):
    manifest = _manifest(runs.viz)
    assert set(runs.gcs.snapshot("viz")) == {"manifest.json", *PcaManifest.listed_in(manifest)}
    here, there = np.load(runs.folder / "viz" / "pca.npz"), np.load(f"{runs.viz}/pca.npz")
    # numpy's own PCA of the vectors read back from gs:// (the manifest's first pooling)
    column = _manifest(runs.out)["poolings"][0]["column"]
    vectors = np.array([r[column] for r in parquet_rows(runs.out).values()], np.float64)
    singular = np.linalg.svd(vectors - vectors.mean(0), compute_uv=False)[:3]
    np.testing.assert_allclose(there["explained_variance"], singular ** 2 / (len(vectors) - 1),
                               rtol=1e-4)
    np.testing.assert_allclose(there["explained_variance"], here["explained_variance"],
                               rtol=1e-5)
    signs = np.sign(np.sum(there["components"] * here["components"], axis=1))  # per component
    np.testing.assert_allclose(there["components"], here["components"] * signs[:, None],
                               atol=1e-5)
    local, remote = _projections(str(runs.folder / "viz")), _projections(runs.viz)
    assert sorted(remote) == sorted(local) and len(remote) == len(TEXTS)
    for key, coords in remote.items():
        np.testing.assert_allclose(coords, local[key] * signs, atol=1e-5)


HIT = re.compile(r"\s+\d+\. (-?[\d.]+)\s+(\S+)\s+(.*)")


def _hits(capsys, output: str) -> list[tuple[float, str, str]]:
    assert cli(["search", output, "the cat on the mat", "-k", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    return [(float(m[1]), m[2], m[3]) for m in map(HIT.fullmatch, lines) if m]


def test_search_reads_gs_outputs_and_finds_what_it_finds_locally(runs, capsys):
    remote, local = _hits(capsys, runs.gcs.path("out")), _hits(capsys, runs.local)
    assert len(remote) == 4
    assert [(i, t) for _, i, t in remote] == [(i, t) for _, i, t in local]
    np.testing.assert_allclose([s for s, _, _ in remote], [s for s, _, _ in local], atol=1e-4)
