"""`run --overwrite` into a gs:// folder (a Cloud Storage emulator): the new run is staged beside
the old one and swapped in at the end, replacing only the files the old manifest lists; a run
killed before its swap leaves the previous run as it was; the next --overwrite removes what it
left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.common.run_folder import staging
from beam_embed.pipeline.common.run_folder.claim_stores import CLAIM
from beam_embed.process import exits

pytestmark = pytest.mark.pipeline  # whole commands, end to end

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINE = {"notes.txt": b"my notes", "embeddings-final-v2.parquet": b"mine, not a run's"}


def _run(gcs, model: str, corpus: str, *extra: str) -> int:
    return cli(["run", "--input", gcs.path(corpus), "--model", model, "--output",
                gcs.path("out"), "--progress_every", "0", "--format", "parquet", *extra])


def _lines(n: int, tag: str) -> str:
    return "".join(f"{tag} the cat sat on the mat {i}\n" for i in range(n))


def _texts(snapshot: dict[str, bytes]) -> list[str]:
    """The texts of the Parquet shards the folder's manifest lists (not a glob: a user's file
    may look like one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = json.loads(snapshot["manifest.json"])["files"]["parquet"]
    return sorted(t for n in names
                  for t in pq.read_table(pa.BufferReader(snapshot[n])).column("text").to_pylist())


def _run_files(snapshot: dict[str, bytes]) -> set[str]:
    manifest = json.loads(snapshot["manifest.json"])
    return {"manifest.json", *manifest["errors_files"],
            *(n for names in manifest["files"].values() for n in names)}


def test_overwrite_is_staged_then_swapped_replacing_only_listed_files(gcs, tiny_export,
                                                                      monkeypatch):
    gcs.upload("a.txt", _lines(12, "old"))
    gcs.upload("b.txt", _lines(5, "new"))
    assert _run(gcs, tiny_export, "a.txt", "--num_shards", "3") == exits.OK  # Beam's write steps
    for name, data in MINE.items():
        gcs.upload(f"out/{name}", data)
    before = gcs.snapshot("out")
    assert len(json.loads(before["manifest.json"])["files"]["parquet"]) == 3

    seen = {}
    swap = staging._swap

    def watched(staged, folder, old, new):  # the folder as the swap finds it
        seen.update(folder=gcs.snapshot("out"), old=list(old), staged=staged)
        return swap(staged, folder, old, new)

    monkeypatch.setattr(staging, "_swap", watched)
    assert _run(gcs, tiny_export, "b.txt", "--overwrite") == exits.OK

    # until the swap, the old run is whole and untouched; the new one is in its staging folder
    at_swap = seen["folder"]
    assert {k: v for k, v in at_swap.items() if k in before} == before
    prefix = seen["staged"][len(gcs.path("out")) + 1:] + "/"
    assert prefix.startswith(staging.STAGING_PREFIX)
    staged = {k[len(prefix):] for k in at_swap if k.startswith(prefix)}
    assert staged >= {"manifest.json", "embeddings-00000-of-00001.parquet"}
    assert CLAIM in at_swap and set(seen["old"]) == _run_files(before)

    after = gcs.snapshot("out")
    assert set(after) == _run_files(after) | set(MINE)  # no staging folder, no claim left
    assert {k: after[k] for k in MINE} == MINE
    assert json.loads(after["manifest.json"])["counts"]["embedded"] == 5
    assert _texts(after) == sorted(f"new the cat sat on the mat {i}" for i in range(5))


# The job, stopped for good where it would swap its finished run in: a file says so, then it
# waits to be killed. Everything before is the job as it runs.
_STOPS_AT_THE_SWAP = """
import pathlib, sys, time
from beam_embed.pipeline.common.run_folder import staging

def stop(*args, **kwargs):
    pathlib.Path(sys.argv[1]).write_text("at the swap")
    time.sleep(600)

staging.publish = stop
from beam_embed.pipeline.cli import main
main(sys.argv[2:])
"""


def test_a_run_killed_before_its_swap_leaves_the_previous_run(gcs, gcs_emulator, tiny_export,
                                                             tmp_path):
    gcs.upload("a.txt", _lines(6, "old"))
    gcs.upload("b.txt", _lines(40, "new"))
    assert _run(gcs, tiny_export, "a.txt") == exits.OK
    before = gcs.snapshot("out")

    marker = tmp_path / "at-swap"
    env = {**os.environ, "PYTHONPATH": ROOT, "STORAGE_EMULATOR_HOST": gcs_emulator}
    argv = ["run", "--input", gcs.path("b.txt"), "--model", tiny_export, "--output",
            gcs.path("out"), "--progress_every", "0", "--format", "parquet", "--overwrite"]
    job = subprocess.Popen([sys.executable, "-c", _STOPS_AT_THE_SWAP, str(marker), *argv],
                           cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), job.stderr.read()[-3000:] if job.poll() is not None else "slow"
        leftover = {k for k in gcs.snapshot("out") if k.startswith(staging.STAGING_PREFIX)}
        assert any(k.endswith("/manifest.json") for k in leftover)  # it had written everything
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait()

    after = gcs.snapshot("out")
    assert {k: v for k, v in after.items() if k in before} == before  # the previous run, whole
    assert set(after) - set(before) == leftover | {CLAIM}  # the killed run's staging and claim
    assert _texts(after) == sorted(f"old the cat sat on the mat {i}" for i in range(6))

    # The emulator ignores if_generation_match, so here the claim is simply overwritten; how a
    # killed run's claim is refused and taken over is tested against a fake that honours it
    # (tests/common/test_gcs_claim.py).
    assert _run(gcs, tiny_export, "b.txt", "--overwrite") == exits.OK
    final = gcs.snapshot("out")
    assert set(final) == _run_files(final)  # leftovers removed, claim released
    assert json.loads(final["manifest.json"])["counts"]["embedded"] == 40


def _copy(gcs, source: str, *folders: str) -> None:
    for name, data in gcs.snapshot(source).items():
        for folder in folders:
            gcs.upload(f"{folder}/{name}", data)


def test_glob_characters_in_a_gcs_output_are_part_of_its_name(gcs, tiny_export):
    """`--output gs://.../exp[1]` beside `exp1` (a copy of the run): only `exp[1]` is replaced,
    another tool's `beam-temp-*` folder in it stays, and its TFRecord shards are counted
    through Beam's client (TensorFlow's would ask Google, whatever the emulator setting)."""
    gcs.upload("a.txt", _lines(6, "old"))
    gcs.upload("b.txt", _lines(5, "new"))
    args = ["run", "--model", tiny_export, "--progress_every", "0", "--input", gcs.path("b.txt"),
            "--output", gcs.path("exp[1]"), "--overwrite"]
    assert _run(gcs, tiny_export, "a.txt") == exits.OK
    _copy(gcs, "out", "exp[1]", "exp1")
    for folder in ("exp[1]", "exp1"):
        for name, data in MINE.items():
            gcs.upload(f"{folder}/{name}", data)
    gcs.upload("exp[1]/beam-temp-results/scores.csv", b"another tool's")
    before = gcs.snapshot("exp1")

    code = cli([*args, "--format", "parquet"])
    assert gcs.snapshot("exp1") == before
    assert code == exits.OK
    after = gcs.snapshot("exp[1]")
    assert set(after) == _run_files(after) | set(MINE) | {"beam-temp-results/scores.csv"}
    assert _texts(after) == sorted(f"new the cat sat on the mat {i}" for i in range(5))

    assert cli([*args, "--format", "parquet,tfrecord"]) == exits.OK  # not stuck
    assert gcs.snapshot("exp1") == before
    after = gcs.snapshot("exp[1]")
    assert set(after) == _run_files(after) | set(MINE) | {"beam-temp-results/scores.csv"}
    assert json.loads(after["manifest.json"])["rows"]["embeddings-00000-of-00001.tfrecord"] == 5


def test_glob_characters_in_a_gcs_viz_folder_are_part_of_its_name(gcs, tmp_path):
    from tests.pca.fixtures import clustered_matrix, records, write_embeddings

    x, _ = clustered_matrix(150)
    write_embeddings(str(tmp_path / "emb"), records({"mean": x}), shards=2)
    emb = gcs.upload_tree(str(tmp_path / "emb"), "emb[1]")
    pca = ["pca", "--input", emb, "--components", "3", "--sample", "100"]
    assert cli([*pca, "--output", gcs.path("first")]) == exits.OK
    _copy(gcs, "first", "viz[1]", "viz1")
    before = gcs.snapshot("viz1")

    code = cli([*pca, "--output", gcs.path("viz[1]"), "--overwrite", "--components", "2"])
    assert gcs.snapshot("viz1") == before
    assert code == exits.OK
    after = gcs.snapshot("viz[1]")
    manifest = json.loads(after["manifest.json"])
    assert manifest["fit"]["components"] == 2 and manifest["projections"]["rows"] == 150
    assert not [k for k in after if k.startswith(staging.STAGING_PREFIX)]


def test_a_leftover_cloud_storage_keeps_is_said_and_never_reported_removed(tiny_export,
                                                                          tmp_path, monkeypatch,
                                                                          capsys):
    """A killed run's staging folder holding an object that cannot be deleted (under a hold):
    Beam's recursive delete only logs that, and the run said `removed ..., left by a run that
    did not finish` with the object still there. Now only what is gone is reported removed; what
    stays is a warning naming it and the answer, and the run goes on."""
    from tests.gcs_emulator import GcsFolder, running_emulator, use_emulator

    with running_emulator(held="HELD") as url:
        use_emulator(monkeypatch, url, str(tmp_path / "cache"))
        gcs = GcsFolder.new(url, "held-leftover")
        gcs.upload("a.txt", _lines(4, "old"))
        assert _run(gcs, tiny_export, "a.txt") == exits.OK
        held_id, gone_id = "0123456789ab", "ba9876543210"
        for run_id, names in ((held_id, ["HELD-shard.parquet", "beam-temp-x/part"]),
                              (gone_id, ["beam-temp-y/part"])):
            left = f"out/{staging.STAGING_PREFIX}{run_id}"
            gcs.upload(f"{left}/{staging.STAGING_MARKER}", json.dumps({"run_id": run_id}))
            for name in names:
                gcs.upload(f"{left}/{name}", b"a killed run's")
        capsys.readouterr()

        assert _run(gcs, tiny_export, "a.txt", "--overwrite") == exits.OK
        err = capsys.readouterr().err
        after = gcs.snapshot("out")
    held, gone = (gcs.path(f"out/{staging.STAGING_PREFIX}{i}") for i in (held_id, gone_id))
    assert f"removed {gone}, left by a run that did not finish" in err
    assert f"removed {held}" not in err
    assert (f"warning: could not remove {held}: 1 object(s) could not be deleted, e.g. "
            f"{held}/HELD-shard.parquet (403 Forbidden); remove it by hand") in err
    assert [k for k in after if k.startswith(staging.STAGING_PREFIX)] == [
        f"{staging.STAGING_PREFIX}{held_id}/HELD-shard.parquet"]  # the one object kept
    assert _texts(after) == sorted(f"old the cat sat on the mat {i}" for i in range(4))
