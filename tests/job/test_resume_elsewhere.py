"""--resume where the work is not in one local process: a Dask run whose launcher is killed
outright, and a run into gs:// (the emulator) killed outright, each continued by a run with
--resume that publishes what a clean local run publishes."""

from __future__ import annotations

import json

import pytest

from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.job.command import main
from beam_embed.process import exits
from tests.job_helpers import run_job
from tests.resume_helpers import assert_same_rows, kill_after, local_commits, long_docs

pytestmark = pytest.mark.pipeline

DOCS = 1200


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    return long_docs(tmp_path_factory.mktemp("resume_elsewhere") / "docs.jsonl", DOCS, seed=11,
                     jsonl=True)


def args(model: str, *more: str) -> list[str]:
    return ["--model", model, "--shard_mb", "1", "--max_seq_length", "16",
            "--max_batch_size", "64", "--format", "parquet", "--progress_every", "0", *more]


@pytest.fixture(scope="module")
def clean(corpus, tiny_export, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("clean") / "out")
    run_job(out, "--input", corpus, *args(tiny_export)[:-2])
    return out


def test_a_dask_run_whose_launcher_is_killed_resumes(dask_cluster, corpus, tiny_export, clean,
                                                     tmp_path):
    out = str(tmp_path / "out")
    run = ["--input", corpus, *args(tiny_export), "--output", out, "--runner", "DaskRunner",
           "--dask_client_address", dask_cluster.address]
    kill_after(run, lambda: local_commits(out), 1)
    assert main([*run, "--resume"]) == exits.OK
    with open(f"{out}/manifest.json") as f:
        assert json.load(f)["resumed"]["records_kept"] > 0
    assert_same_rows(clean, out)


def test_a_run_into_gcs_killed_outright_resumes(gcs, corpus, tiny_export, clean, tmp_path):
    with open(corpus, "rb") as f:
        source = gcs.upload("docs.jsonl", f.read())
    out = gcs.path("out")

    def commits() -> int:
        return sum(1 for b in gcs.bucket.list_blobs(prefix=f"{gcs.prefix}/out/")
                   if "/commits/" in b.name and b.name.endswith(".json"))

    run = ["--input", source, *args(tiny_export), "--output", out]
    kill_after(run, commits, 2)
    assert cli(["run", *run]) == exits.OUTPUT_BUSY  # the killed run's claim: --resume or not
    assert cli(["run", *run, "--resume"]) == exits.OK
    local = str(tmp_path / "resumed")
    gcs.download("out", local)
    with open(f"{local}/manifest.json") as f:
        assert json.load(f)["resumed"]["records_kept"] > 0
    assert_same_rows(clean, local)
