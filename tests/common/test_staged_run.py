"""The one claim -> stage -> publish span every writer of a run's folder uses: a block that
ends normally publishes; one that fails or is stopped leaves the folder as it was, with no
claim and no staging folder; a swap cut short keeps its journal for the next run."""

from __future__ import annotations

import json
import os
import pickle
import signal

import pytest
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.claim import CLAIM, claim_output
from beam_embed.pipeline.common.run_folder.manifest.job import JOB
from beam_embed.pipeline.common.run_folder.staged_run import OutputRefused, StagedRun, staged_run
from beam_embed.pipeline.common.run_folder.staging import JOURNAL, STAGING_PREFIX, make_staging
from beam_embed.pipeline.common.settings.errors import CommandError, IncompleteInput
from beam_embed.process import exits


def _run(folder, shards: int, tag: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"embeddings-{i:05d}-of-{shards:05d}.parquet" for i in range(shards)]
    for name in names:
        (folder / name).write_text(tag)
    (folder / "errors-00000-of-00001.jsonl").write_text(tag)
    (folder / "manifest.json").write_text(json.dumps({
        "tag": tag, "files": {"parquet": names},
        "errors_files": ["errors-00000-of-00001.jsonl"]}))


def _listing(folder) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


def _old(tmp_path):
    out = tmp_path / "out"
    _run(out, 2, "old")
    return out, _listing(out)


def test_a_block_that_ends_publishes_and_releases(tmp_path):
    out, _ = _old(tmp_path)
    with staged_run(str(out), JOB, True, ["test"]) as run:
        assert (out / CLAIM).exists()
        staging = run.stage()
        assert staging == str(out / f"{STAGING_PREFIX}{run.holder.run_id}")
        _run(tmp_path / staging, 1, "new")
    listing = _listing(out)
    assert json.loads(listing.pop("manifest.json"))["tag"] == "new"
    assert listing == {"embeddings-00000-of-00001.parquet": "new",
                       "errors-00000-of-00001.jsonl": "new"}  # no claim, no staging folder
    assert sorted(os.path.basename(p) for p in run.replaced) == [
        "embeddings-00000-of-00002.parquet", "embeddings-00001-of-00002.parquet",
        "errors-00000-of-00001.jsonl", "manifest.json"]


def test_a_failure_after_staging_removes_it_releases_the_claim_and_keeps_the_old_run(tmp_path):
    out, before = _old(tmp_path)
    with pytest.raises(CommandError, match=rf"^the run stopped, nothing was published to "
                                           rf"{out} .*untouched\): a shard is short$") as info:
        with staged_run(str(out), JOB, True, ["test"]) as run:
            _run(tmp_path / run.stage(), 1, "new")
            raise IncompleteInput("a shard is short")
    assert info.value.code == exits.INCOMPLETE_INPUT  # the cause's exit code
    assert _listing(out) == before  # no claim, no staging folder, the old run as it was


def test_an_error_before_staging_passes_as_it_is_and_releases_the_claim(tmp_path):
    out, before = _old(tmp_path)
    with pytest.raises(ValueError, match="^--pooling 'x' is unknown$"):
        with staged_run(str(out), JOB, True, ["test"]):
            raise ValueError("--pooling 'x' is unknown")
    with staged_run(str(out), JOB, True, ["test"]) as run:
        pass  # nothing staged: nothing published
    assert run.replaced is None and _listing(out) == before


def test_the_folder_is_checked_again_under_the_claim(tmp_path):
    out, before = _old(tmp_path)
    with pytest.raises(OutputRefused, match=r"holds a previous run .*pass --overwrite") as info:
        with staged_run(str(out), JOB, False, ["test"]):
            pytest.fail("the block runs only on a folder it may write")
    assert info.value.code == exits.BAD_CONFIG
    assert _listing(out) == before


def test_sigterm_inside_the_block_stops_the_run_and_leaves_nothing(tmp_path):
    out, before = _old(tmp_path)
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as info:
        with staged_run(str(out), JOB, True, ["test"]) as run:
            _run(tmp_path / run.stage(), 1, "new")
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises here, on the main thread
            pytest.fail("SIGTERM unwinds the block")
    assert info.value.code == exits.STOPPED == 128 + signal.SIGTERM
    assert _listing(out) == before
    assert signal.getsignal(signal.SIGTERM) is handler  # the block's handler is its own


def test_sigterm_that_a_beam_step_wrapped_is_still_a_stop(tmp_path):
    out, before = _old(tmp_path)
    with pytest.raises(SystemExit) as info:
        with staged_run(str(out), JOB, True, ["test"]) as run:
            run.stage()
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except SystemExit as e:  # as Beam re-raises what a step raised
                raise RuntimeError("SystemExit: 143 [while running 'Embed']") from e
    assert info.value.code == exits.STOPPED
    assert _listing(out) == before


def test_a_swap_cut_short_keeps_its_journal_and_releases_the_claim(tmp_path, monkeypatch):
    out, _ = _old(tmp_path)

    def rename_fails(sources, destinations):
        raise OSError("disk gone")

    with pytest.raises(CommandError, match="was cut short .*disk gone"):
        with staged_run(str(out), JOB, True, ["test"]) as run:
            _run(tmp_path / run.stage(), 1, "new")
            monkeypatch.setattr(FileSystems, "rename", rename_fails)
    assert not (out / CLAIM).exists()
    assert (out / f"{STAGING_PREFIX}{run.holder.run_id}" / JOURNAL).exists()


def test_a_run_handed_to_another_process_releases_its_claim_by_its_holder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    run = StagedRun.open(str(out), JOB, False, ["claim step"], run_id="given0000001")
    assert run.holder.run_id == "given0000001"  # the claim names the staging folder's run
    assert run.staging == str(out / f"{STAGING_PREFIX}given0000001")
    make_staging(str(out), "given0000001")
    (out / f"{STAGING_PREFIX}given0000001" / "a.txt").write_text("x")
    handed = pickle.loads(pickle.dumps(run))  # what a Beam side input carries
    handed.release()
    assert not (out / CLAIM).exists()
    handed.abandon()
    assert sorted(os.listdir(out)) == []
    # released by its holder only: a claim another run took since is left alone
    other = claim_output(str(out), False, ["other"])
    handed.release()
    assert json.loads((out / CLAIM).read_text())["run_id"] == other.run_id
    other.release()
