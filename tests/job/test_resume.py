"""A run killed outright (SIGKILL of its process group) part-way through, then continued with
--resume: it keeps the shard sets the killed run committed, embeds only the rest, and publishes
the run a clean run publishes (same ids once each, vectors equal, the same counts); shards stay
under --shard_mb. Without --resume the folder is refused (exit 5) naming both choices; a
changed setting or input is refused (exit 2) with the kept work untouched; --overwrite
discards it."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest

from beam_embed.pipeline.job.command import main
from beam_embed.process import exits
from tests.job_helpers import parquet_rows, run_job
from tests.resume_helpers import assert_same_rows, kill_after, local_commits, long_docs, manifest

pytestmark = pytest.mark.pipeline

DOCS = 1600
BOUND_MB = 1


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    """A 1 MB shard holds ~400 of them: the run commits four sets or so."""
    return long_docs(tmp_path_factory.mktemp("resume") / "docs.txt", DOCS, seed=7)


def args(corpus: str, model: str, *more: str) -> list[str]:
    return ["--input", corpus, "--model", model, "--shard_mb", str(BOUND_MB),
            "--max_seq_length", "16", "--max_batch_size", "64", "--progress_every", "0", *more]


@pytest.fixture(scope="module")
def clean(corpus, tiny_export, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("clean") / "out")
    run_job(out, *args(corpus, tiny_export)[:-2])
    return out


def staging_files(output: str) -> dict[str, bytes]:
    found = {}
    for path in glob.glob(os.path.join(output, ".beam-embed-staging-*", "**"), recursive=True):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                found[os.path.relpath(path, output)] = f.read()
    return found


def test_a_killed_run_resumes_into_the_clean_runs_output(corpus, tiny_export, clean, tmp_path,
                                                         capsys):
    out = str(tmp_path / "out")
    kill_after([*args(corpus, tiny_export), "--output", out], lambda: local_commits(out), 2)
    assert local_commits(out) < 6  # killed part-way, not at the end

    # without --resume: refused, naming both choices
    assert main([*args(corpus, tiny_export), "--output", out]) == exits.OUTPUT_BUSY
    said = capsys.readouterr().err
    assert "--resume" in said and "--overwrite" in said

    assert main([*args(corpus, tiny_export), "--output", out, "--resume"]) == exits.OK
    said = capsys.readouterr().err
    m = manifest(out)
    kept = m["resumed"]["records_kept"]
    assert m["resumed"]["attempts"] == 2 and 0 < kept < DOCS
    assert f"resuming: {kept:,} of {DOCS:,} records kept from the killed run" in said
    assert_same_rows(clean, out)
    bound = BOUND_MB << 20
    for name in m["rows"]:
        assert os.path.getsize(os.path.join(out, name)) <= bound
    assert sorted(os.listdir(out)) == sorted(["manifest.json", *m["rows"], *m["errors_files"]])
    assert len(m["files"]["parquet"]) >= 4  # shards rolled by size, not one per run


def test_a_run_killed_twice_resumes_and_counts_its_attempts(corpus, tiny_export, clean,
                                                           tmp_path):
    out = str(tmp_path / "out")
    run = [*args(corpus, tiny_export), "--output", out]
    kill_after(run, lambda: local_commits(out), 1)
    first = local_commits(out)
    kill_after([*run, "--resume"], lambda: local_commits(out), first + 2)  # killed again
    assert main([*run, "--resume"]) == exits.OK
    m = manifest(out)
    assert m["resumed"]["attempts"] == 3 and m["resumed"]["records_kept"] > 0
    assert_same_rows(clean, out)


def test_a_changed_setting_or_input_is_refused_and_overwrite_discards(corpus, tiny_export,
                                                                     clean, tmp_path, capsys):
    out = str(tmp_path / "out")
    mine = str(tmp_path / "docs.txt")
    with open(corpus) as f, open(mine, "w") as g:
        g.write(f.read())
    run = [*args(mine, tiny_export), "--output", out]
    kill_after(run, lambda: local_commits(out), 2)
    before = staging_files(out)
    capsys.readouterr()

    changed = [*args(mine, tiny_export, "--max_seq_length", "24"), "--output", out, "--resume"]
    assert main(changed) == exits.BAD_CONFIG
    assert "--max_seq_length 16, this run's 24" in capsys.readouterr().err
    with open(mine, "a") as g:
        g.write("one more document\n")
    assert main([*run, "--resume"]) == exits.BAD_CONFIG
    assert f"input {mine} changed" in capsys.readouterr().err
    assert staging_files(out) == before  # the kept work untouched

    assert main([*run, "--overwrite"]) == exits.OK  # discards the killed run's work
    m = manifest(out)
    assert "resumed" not in m and m["counts"]["read"] == DOCS + 1
    assert not glob.glob(os.path.join(out, ".beam-embed-*"))


def test_resume_with_nothing_killed_runs_afresh(corpus, tiny_export, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert main([*args(corpus, tiny_export), "--output", out, "--resume",
                 "--format", "parquet"]) == exits.OK
    assert "no killed run" in capsys.readouterr().err
    assert "resumed" not in manifest(out)


@pytest.mark.parametrize("more", [
    ("--direct_num_workers", "2", "--direct_running_mode", "multi_processing"),
    ("--vector_dtype", "int8", "--dedupe", "--format", "parquet"),
    ("--split", "sentences", "--vector_dtype", "float16", "--format", "parquet"),
    ("--vector_dtype", "binary", "--reuse", "PREVIOUS", "--format", "parquet"),
], ids=["multi_processing", "int8-dedupe", "sentences-float16", "binary-reuse"])
def test_resume_combines_with_runners_and_settings(corpus, tiny_export, tmp_path, more):
    clean_out, out = str(tmp_path / "clean"), str(tmp_path / "out")
    if "--reuse" in more:  # a previous float32 run of the first eighth, its texts copied
        first = str(tmp_path / "first.txt")
        with open(corpus) as f, open(first, "w") as g:
            g.writelines(f.readlines()[:DOCS // 8])
        previous = str(tmp_path / "previous")
        run_job(previous, *args(first, tiny_export))  # float32: reuse copies from one
        more = tuple(previous if m == "PREVIOUS" else m for m in more)
    run = [*args(corpus, tiny_export), *more]
    run_job(clean_out, *run)
    kill_after([*run, "--output", out], lambda: local_commits(out), 2)
    with open(glob.glob(os.path.join(out, ".beam-embed-staging-*", "resume.json"))[0]) as f:
        first = json.load(f)
    assert main([*run, "--output", out, "--resume"]) == exits.OK
    m = manifest(out)
    assert m["resumed"]["records_kept"] > 0
    if "int8" in more:  # kept and new rows on the first attempt's one scale
        assert [p["scale"] for p in m["poolings"]] == [s["scale"] for s in first["stored"]]
        assert [p["scale"] for p in m["poolings"]] == \
            [p["scale"] for p in manifest(clean_out)["poolings"]]
    coded = "int8" in more or "binary" in more
    assert_same_rows(clean_out, out, columns=() if coded else ("cls",))
    if coded:  # the stored codes: int8 within one step, binary's sign bits nearly all equal
        theirs, ours = parquet_rows(clean_out), parquet_rows(out)
        a = np.stack([np.frombuffer(bytes(theirs[i]["cls"]), np.int8) for i in sorted(theirs)])
        b = np.stack([np.frombuffer(bytes(ours[i]["cls"]), np.int8) for i in sorted(theirs)])
        if "binary" in more:
            assert np.mean(np.unpackbits(a.view(np.uint8)) == np.unpackbits(b.view(np.uint8))) \
                > 0.999
            # reused counts the last attempt's copies only (the kept sets may hold them all)
            assert m["reused_from"]["output"] == previous
        else:
            assert np.abs(a.astype(np.int32) - b).max() <= 1
