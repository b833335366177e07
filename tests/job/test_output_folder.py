"""The output folder across runs: one run at a time, a replaced run kept until its successor is
complete, leftovers of killed runs removed, a full disk reported in one line. Real processes:
inputs that are FIFOs hold a run inside its pipeline for as long as the test needs."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set
from beam_embed.pipeline.common.finished_run.shards import check_shards
from beam_embed.pipeline.common.run_folder.claim import CLAIM, Holder
from beam_embed.pipeline.job.command import main
from beam_embed.process import exits
from tests.job_helpers import dead_letters, parquet_rows, run_job, write_lines
from tests.mounts import read_only, small_disk

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

ROOT = Path(__file__).resolve().parents[2]


def _start(output, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "beam_embed.pipeline.run", "--output", str(output), "--progress_every", "0",
         *args], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _held_run(tmp_path, output, *args) -> tuple[subprocess.Popen, Path]:
    """A run reading a FIFO: it stays inside its pipeline until the test feeds or kills it."""
    fifo = tmp_path / "slow.txt"
    os.mkfifo(fifo)
    return _start(output, "--input", str(fifo), *args), fifo


def _wait_for(condition, process: subprocess.Popen, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, f"run ended early: {process.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _feed(fifo: Path, lines: list[str], process: subprocess.Popen) -> None:
    """Writes `lines` into the FIFO once the run opens it for reading."""
    fd = None
    while fd is None:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:  # ENXIO: no reader yet
            assert e.errno == errno.ENXIO and process.poll() is None
            time.sleep(0.05)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")


def _holder(output: Path) -> Holder | None:
    try:
        return Holder.parse((output / CLAIM).read_bytes())
    except FileNotFoundError:
        return None


def _consistent(output: Path) -> dict:
    """The folder holds exactly the files its manifest lists, and they hold its counts."""
    manifest = json.loads((output / "manifest.json").read_text())
    listed = {n for names in manifest["files"].values() for n in names}
    listed |= set(manifest["errors_files"]) | {"manifest.json"}
    assert {p.name for p in output.iterdir()} == listed
    check_shards(load_embedding_set(str(output)), "parquet")
    assert len(parquet_rows(str(output))) == manifest["counts"]["embedded"]
    return manifest


def test_a_second_run_into_a_busy_folder_fails_at_once_naming_the_holder(tiny_export, tmp_path):
    out = tmp_path / "out"
    first, fifo = _held_run(tmp_path, out, "--model", tiny_export)
    try:
        _wait_for(lambda: _holder(out) is not None, first)
        holder = _holder(out)
        corpus = write_lines(str(tmp_path / "c.txt"), ["a second corpus"])
        began = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "beam_embed.pipeline.run", "--output", str(out), "--input", corpus,
             "--model", tiny_export, "--overwrite"], cwd=ROOT, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
        assert second.returncode == exits.OUTPUT_BUSY, second.stderr[-2000:]
        line = second.stderr.strip().splitlines()[-1]
        assert line.startswith(f"beam-embed run: --output {out} is in use by run "
                               f"{holder.run_id} (pid {first.pid} on {holder.host}")
        assert time.monotonic() - began < 60  # refused before loading any model
        _feed(fifo, ["the cat sat", "", "the dog ran"], first)
        assert first.wait(timeout=300) == exits.OK, first.stderr.read()[-2000:]
    finally:
        first.kill()
    manifest = _consistent(out)
    assert manifest["counts"]["embedded"] == 2 and len(dead_letters(str(out))) == 1
    assert {r["text"] for r in parquet_rows(str(out)).values()} == {"the cat sat", "the dog ran"}


def test_a_killed_replacement_leaves_the_old_run_and_overwrite_cleans_up(tiny_export, tmp_path,
                                                                         capsys):
    out = tmp_path / "out"
    old_corpus = write_lines(str(tmp_path / "old.txt"), ["the old cat", "the old dog"])
    run_job(str(out), "--input", old_corpus, "--model", tiny_export)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    doomed, _ = _held_run(tmp_path, out, "--model", tiny_export, "--overwrite")
    try:
        _wait_for(lambda: (h := _holder(out)) is not None and h.pid == doomed.pid, doomed)
        _wait_for(lambda: any(p.name.startswith(".beam-embed-staging-") for p in out.iterdir()),
                  doomed)  # its pipeline is writing: its shards' temp folder exists
        time.sleep(1)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
    killed = _holder(out)
    assert killed.pid == doomed.pid and killed.alive() is False
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != CLAIM}
    assert after == before  # the old run is whole, and readable
    check_shards(load_embedding_set(str(out)), "parquet")
    [left] = [p for p in out.iterdir() if p.name.startswith(".beam-embed-staging-")]
    assert left.name == f".beam-embed-staging-{killed.run_id}"

    new_corpus = write_lines(str(tmp_path / "new.txt"), ["a new cat", "a new dog", "a new bird"])
    args = ["--output", str(out), "--progress_every", "0", "--input", new_corpus, "--model",
            tiny_export]
    assert main(args) == exits.BAD_CONFIG  # the old run is there: replacing it needs the flag
    assert "holds a previous run" in capsys.readouterr().err

    assert main([*args, "--overwrite"]) == exits.OK
    err = capsys.readouterr().err
    assert f"took over the claim of run {killed.run_id} (pid {killed.pid} on" in err
    assert f"removed {left}, left by a run that did not finish" in err
    manifest = _consistent(out)  # the killed run's staging folder is gone, the claim too
    assert manifest["counts"]["embedded"] == 3
    assert {r["text"] for r in parquet_rows(str(out)).values()} == {
        "a new cat", "a new dog", "a new bird"}


def test_a_stopped_run_releases_its_claim(tiny_export, tmp_path):
    out = tmp_path / "out"
    stopped, _ = _held_run(tmp_path, out, "--model", tiny_export)
    try:
        _wait_for(lambda: any(p.name.startswith(".beam-embed-staging-") for p in out.iterdir())
                  if out.exists() else False, stopped)
        stopped.send_signal(signal.SIGTERM)  # what a scheduler or `timeout` sends
        assert stopped.wait(timeout=120) == 128 + signal.SIGTERM
    finally:
        stopped.kill()
    assert not (out / CLAIM).exists() and not (out / "manifest.json").exists()


def test_a_run_stopped_inside_a_beam_step_exits_as_stopped(tiny_export, tmp_path):
    """SIGTERM while the pipeline reads (Beam wraps what a step raises): still 128 + SIGTERM,
    not a failed run's exit code, and the claim is released."""
    out = tmp_path / "out"
    stopped, fifo = _held_run(tmp_path, out, "--model", tiny_export)
    fd = None
    try:
        while fd is None:  # opening the FIFO's write end succeeds once the read step has it open
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                assert e.errno == errno.ENXIO and stopped.poll() is None
                time.sleep(0.05)
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(timeout=120) == 128 + signal.SIGTERM, stopped.stderr.read()[-2000:]
    finally:
        stopped.kill()
        if fd is not None:
            os.close(fd)
    assert not (out / CLAIM).exists() and not (out / "manifest.json").exists()


def test_a_killed_first_run_leaves_a_claim_that_names_it(tiny_export, tmp_path, capsys):
    out = tmp_path / "out"
    killed, _ = _held_run(tmp_path, out, "--model", tiny_export)
    try:
        _wait_for(lambda: _holder(out) is not None, killed)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat"])
    args = ["--output", str(out), "--progress_every", "0", "--input", corpus, "--model",
            tiny_export]
    assert main(args) == exits.OUTPUT_BUSY
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"beam-embed run: --output {out} is claimed by run ")
    assert f"(pid {killed.pid} on " in line and "which is no longer running" in line
    assert main([*args, "--overwrite"]) == exits.OK


def _full_disk_fallback(monkeypatch) -> None:
    """Where no tmpfs can be mounted: every shard write fails with ENOSPC, no file named, the
    way a full disk fails it."""
    from beam_embed.pipeline.common.output_formats.sink import FormatSink

    def full(self, handle, table):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(FormatSink, "write_record", full)


def _one_error(err: str) -> str:
    errors = [x for x in err.splitlines() if x.startswith("beam-embed run:")]
    assert len(errors) == 1 and "Traceback" not in err, err[-3000:]
    return errors[0]


@pytest.mark.parametrize("name", ["out", "out\x1b]0;owned\x07\x1b[31m\u202e"])
def test_a_full_disk_is_one_line_and_publishes_nothing(tiny_export, tmp_path, capsys,
                                                       monkeypatch, name):
    """On a 256 KiB tmpfs where the machine allows mounting one; else every shard write fails
    with ENOSPC the way a full disk fails it. An output named with terminal escapes (a window
    title, a colour, a right-to-left override) is shown escaped, as every line shows it (the
    line printed it raw, twice)."""
    disk = tmp_path / "disk"
    with small_disk(disk, "256k") as mounted:
        if not mounted:
            _full_disk_fallback(monkeypatch)
        corpus = write_lines(str(tmp_path / "c.txt"),
                             [f"line {i} the cat sat on the mat again" for i in range(5000)])
        code = main(["--output", str(disk / name), "--progress_every", "0", "--input", corpus,
                     "--model", tiny_export])
        err = capsys.readouterr().err
        line = _one_error(err)
        assert code == exits.FAILED
        out = re.escape(str(disk) + "/" + name.encode("unicode_escape").decode())
        assert re.fullmatch(  # the file that could not be written, in the run's staging folder
            rf"beam-embed run: the run stopped, nothing was published to {out} \(its previous "
            rf"run, if any, is untouched\): {os.strerror(errno.ENOSPC)}: {out}/"
            rf"\.beam-embed-staging-[0-9a-f]+/(embeddings|errors)-unnumbered-[0-9a-f]+\.\w+ "
            rf"\(in step Write\w+/.*\)", line), line
        assert not re.search("[\x1b\x07\u202e]", err)  # nothing a terminal would obey
        assert os.listdir(disk / name) == []  # no manifest, no staging, no claim


def test_a_full_disk_leaves_the_previous_run_as_it_was(tiny_export, tmp_path, capsys,
                                                       monkeypatch):
    disk = tmp_path / "disk"
    with small_disk(disk, "512k") as mounted:
        out = disk / "out"
        old = write_lines(str(tmp_path / "old.txt"), ["the old cat", "the old dog"])
        run_job(str(out), "--input", old, "--model", tiny_export)
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        if not mounted:
            _full_disk_fallback(monkeypatch)
        corpus = write_lines(str(tmp_path / "c.txt"),
                             [f"line {i} the cat sat on the mat again" for i in range(8000)])
        code = main(["--output", str(out), "--progress_every", "0", "--input", corpus,
                     "--model", tiny_export, "--overwrite"])
        line = _one_error(capsys.readouterr().err)
        assert code == exits.FAILED
        assert re.search(rf"{os.strerror(errno.ENOSPC)}: {re.escape(str(out))}/"
                         rf"\.beam-embed-staging-[0-9a-f]+/\S+ \(in step ", line), line
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # whole; no staging
        check_shards(load_embedding_set(str(out)), "parquet")


def test_a_full_disk_under_two_worker_processes_is_one_line_and_keeps_the_previous_run(
        tiny_export, tmp_path, monkeypatch):
    """The shards are written in worker processes, which printed every failed bundle's
    traceback, and the launcher got the step's error as the text of a traceback (212 lines, 9
    tracebacks, a last line naming neither the file nor the disk). A patched error does not
    reach worker processes: this needs the real tmpfs (root, as CI has)."""
    disk = tmp_path / "disk"
    with small_disk(disk, "512k") as mounted:
        assert mounted, "no tmpfs could be mounted: a full disk under worker processes needs one"
        out = disk / "out"
        old = write_lines(str(tmp_path / "old.txt"), ["the old cat", "the old dog"])
        run_job(str(out), "--input", old, "--model", tiny_export)
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        corpus = write_lines(str(tmp_path / "c.txt"),
                             [f"line {i} the cat sat on the mat again" for i in range(8000)])
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)  # the tests': the run sets its own
        run = _start(out, "--input", corpus, "--model", tiny_export, "--overwrite",
                     "--direct_num_workers", "2", "--direct_running_mode", "multi_processing")
        try:
            _, err = run.communicate(timeout=600)
        finally:
            run.kill()
        assert run.returncode == exits.FAILED, err[-3000:]
        line = _one_error(err)
        assert re.fullmatch(
            rf"beam-embed run: the run stopped, nothing was published to {re.escape(str(out))} "
            rf"\(its previous run, if any, is untouched\): {os.strerror(errno.ENOSPC)}: "
            rf"{re.escape(str(out))}/\.beam-embed-staging-[0-9a-f]+/\S+ \(in step Write\w+/.*\)",
            line), line
        assert all(x.startswith("[beam-embed ") or x == line for x in err.splitlines()), err
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # whole; no staging
        check_shards(load_embedding_set(str(out)), "parquet")


def test_overwrite_never_deletes_look_alikes_that_no_manifest_lists(tiny_export, tmp_path,
                                                                    capsys):
    out = tmp_path / "out"
    out.mkdir()
    users = {"embeddings-final-v2.parquet": b"mine", "errors-2024.jsonl": b"mine",
             "notes.txt": b"mine"}
    for name, data in users.items():
        (out / name).write_bytes(data)
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat", "the dog ran"])
    args = ["--output", str(out), "--progress_every", "0", "--input", corpus, "--model",
            tiny_export]
    assert main([*args, "--overwrite"]) == exits.BAD_CONFIG
    line = _one_error(capsys.readouterr().err)
    assert line == (f"beam-embed run: --output {str(out)!r} holds files that look like "
                    "`beam-embed run` outputs but no manifest.json lists them "
                    "(embeddings-final-v2.parquet, errors-2024.jsonl); files no manifest lists "
                    "are never deleted: move them or choose another --output")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == users

    # beside a finished run, they stay: --overwrite replaces exactly what its manifest lists
    (out / "embeddings-final-v2.parquet").unlink()
    (out / "errors-2024.jsonl").unlink()
    run_job(str(out), *args[4:])
    for name, data in users.items():
        (out / name).write_bytes(data)
    assert main([*args, "--overwrite", "--num_shards", "2"]) == exits.OK
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {n for names in manifest["files"].values() for n in names}
    assert {p.name for p in out.iterdir()} == listed | {*manifest["errors_files"],
                                                        "manifest.json", *users}
    assert {n: (out / n).read_bytes() for n in users} == users
    check_shards(load_embedding_set(str(out)), "parquet")
    assert manifest["counts"]["embedded"] == 2 and len(manifest["files"]["parquet"]) == 2


def test_a_read_only_output_is_refused_in_one_line_naming_it(tiny_export, tmp_path, capsys,
                                                             monkeypatch):
    out = tmp_path / "out"
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat"])
    run_job(str(out), "--input", corpus, "--model", tiny_export)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    import beam_embed.pipeline.job.resolved

    def no_model(*args, **kwargs):
        raise AssertionError("the model was set up before the output was checked")

    monkeypatch.setattr(beam_embed.pipeline.job.resolved, "resolve", no_model)
    with read_only(out) as mounted:
        if not mounted:  # no mount(2) here: every create in the folder fails as it would
            def refuse(*args, **kwargs):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS))

            monkeypatch.setattr("tempfile.mkstemp", refuse)
        code = main(["--output", str(out), "--progress_every", "0", "--input", corpus,
                     "--model", tiny_export, "--overwrite"])
    line = _one_error(capsys.readouterr().err)
    assert code == exits.BAD_CONFIG
    assert line == f"beam-embed run: --output {str(out)!r} is not writable (Read-only file system)"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# SIGTERM lands as Beam starts a bundle: its state sampler's thread is running, but the sampler
# is not yet marked started, so Beam's cleanup never stops that (non-daemon) thread
_STOPPED_AS_A_BUNDLE_STARTS = """
import os, runpy, signal, sys, time
from apache_beam.runners.worker import statesampler

def start(self):
    statesampler.statesampler_impl.StateSampler.start(self)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler runs here, before `started` is set

statesampler.StateSampler.start = start
sys.argv = ["beam_embed.pipeline.run", *sys.argv[1:]]
runpy.run_module("beam_embed.pipeline.run", run_name="__main__")
"""


def test_a_run_stopped_as_a_bundle_starts_exits_without_waiting_on_beams_thread(tiny_export,
                                                                                 tmp_path):
    out = tmp_path / "out"
    corpus = write_lines(str(tmp_path / "in.txt"), ["the cat sat", "the dog ran"])
    stopped = subprocess.Popen(
        [sys.executable, "-c", _STOPPED_AS_A_BUNDLE_STARTS, "--output", str(out),
         "--progress_every", "0", "--input", corpus, "--model", tiny_export],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert stopped.wait(timeout=120) == 128 + signal.SIGTERM
    finally:
        stopped.kill()
    assert not (out / CLAIM).exists() and not (out / "manifest.json").exists()
