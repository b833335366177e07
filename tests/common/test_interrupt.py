"""Ctrl-C ends every command with exit code 130 and one line, wherever it lands: before the
pipeline, inside a Beam step (which Beam re-raises as its own error), or while a worker process
has the step; nothing is published and the output folder's claim is released."""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from beam_embed.pipeline.common.run_folder.claim import CLAIM
from beam_embed.pipeline.common.settings.errors import one_line_errors
from beam_embed.process import exits
from tests.job_helpers import run_job, write_lines

ROOT = Path(__file__).resolve().parents[2]
PROG = "beam-embed test"


@pytest.fixture
def ctrl_c_raises(monkeypatch):
    """SIGINT handled as Python's own handler does: a test runner started in the background
    inherits it ignored, and the commands leave an ignored SIGINT ignored."""
    monkeypatch.setenv("BEAM_EMBED_VERBOSE", "0")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _ctrl_c(x):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)  # the main thread's handler raises while this step is running
    return x


@one_line_errors(PROG)
def _pipeline_main(argv):
    with beam.Pipeline(runner=FnApiRunner()) as p:
        _ = p | beam.Create([1]) | "Interrupted" >> beam.Map(_ctrl_c)
    return exits.OK


def test_ctrl_c_inside_a_beam_step_is_interrupted_not_failed(ctrl_c_raises, capsys):
    """The step runs on the main thread, so Beam wraps the KeyboardInterrupt into its own
    error naming the step (which was exit 1 and 'KeyboardInterrupt (in step Interrupted)')."""
    hook = threading.excepthook
    assert _pipeline_main([]) == exits.INTERRUPTED == 130
    assert capsys.readouterr().err == f"{PROG}: interrupted\n"
    # the command's own handler and quiet are gone once it returns
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert threading.excepthook is hook and logging.root.manager.disable == logging.NOTSET


def _interrupted_then_noisy(argv):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt as e:  # swallowed, as a library may
        dying = threading.Thread(target=lambda: 1 / 0)  # a pipeline's thread dying with it
        dying.start()
        dying.join()
        logging.getLogger("apache_beam.runners").error("Error closing worker_handler")
        raise RuntimeError("Worker subprocess exited with return code -2") from e
    return exits.OK


def test_after_ctrl_c_library_noise_is_dropped_unless_verbose(ctrl_c_raises, capsys, caplog,
                                                               monkeypatch):
    died = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_type))
    main = one_line_errors(PROG)(_interrupted_then_noisy)
    assert main([]) == exits.INTERRUPTED
    assert capsys.readouterr().err == f"{PROG}: interrupted\n"
    assert not caplog.records and died == []

    assert main(["--verbose"]) == exits.INTERRUPTED  # -v: every line, and the traceback
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: Worker subprocess exited" in err
    assert err.endswith(f"{PROG}: interrupted\n")
    assert [r.getMessage() for r in caplog.records] == ["Error closing worker_handler"]
    assert died == [ZeroDivisionError]


def test_a_sigint_the_parent_ignores_stays_ignored(capsys):
    """A command started in the background with SIGINT ignored (nohup, `cmd &` in a script)
    is not stopped by one."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert _pipeline_main([]) == exits.OK
    finally:
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err == ""


@one_line_errors(PROG)
def _failing_main(argv):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_ctrl_c_is_its_own_commands_only(ctrl_c_raises, capsys):
    """A Ctrl-C recorded by one command does not make the next one's failure 'interrupted',
    also when the next runs with SIGINT ignored (a background job installs no handler)."""
    assert _pipeline_main([]) == exits.INTERRUPTED
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert _failing_main([]) == exits.FAILED
    finally:
        signal.signal(signal.SIGINT, previous)
    assert _failing_main([]) == exits.FAILED  # and with the handler installed
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{PROG}: interrupted" and len(err) == 3
    assert all("No space left on device" in line for line in err[1:])


# -- whole commands in their own process (`beam-embed ...`), Ctrl-C sent to it ----------------

# a `beam-embed` process whose step named by HELD_AT (module:function) writes HELD_MARKER and
# waits there: the test interrupts it at that point
_HELD = """
import importlib, os, sys, time
module, name = os.environ["HELD_AT"].split(":")
module = importlib.import_module(module)
real = getattr(module, name)

def held(*args, **kwargs):
    open(os.environ["HELD_MARKER"], "w").close()
    time.sleep(300)
    return real(*args, **kwargs)

setattr(module, name, held)
from beam_embed.pipeline.cli import entry
sys.argv = ["beam-embed", *sys.argv[1:]]
entry()
"""


def _start(args: list[str], held_at: str | None = None, marker: Path | None = None,
           group: bool = False) -> subprocess.Popen:
    """`beam-embed ARGS`, SIGINT handled as at a terminal (the test runner may have it ignored);
    `group`: in a process group of its own, which a terminal's Ctrl-C signals as a whole."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BEAM_EMBED_VERBOSE": "0"}
    command = [sys.executable, "-m", "beam_embed.pipeline.cli", *args]
    if held_at:
        env.update(HELD_AT=held_at, HELD_MARKER=str(marker))
        command = [sys.executable, "-c", _HELD, *args]

    def as_at_a_terminal():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if group:
            os.setpgrp()

    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=as_at_a_terminal)


def _wait_for(condition, process: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, f"ended early: {process.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _reading(fifo: Path, process: subprocess.Popen) -> int:
    """The write end of `fifo`, once the run's read step has opened it (then it waits inside
    the pipeline for lines that never come)."""
    fd = None

    def opened() -> bool:
        nonlocal fd
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:  # ENXIO: no reader yet
            assert e.errno == errno.ENXIO
        return fd is not None

    _wait_for(opened, process)
    return fd


def _interrupted(process: subprocess.Popen, group: bool = False) -> str:
    """Sends Ctrl-C; asserts the exit code and the one line; returns stderr."""
    (os.killpg if group else os.kill)(process.pid, signal.SIGINT)
    try:
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == exits.INTERRUPTED, err[-3000:]
    assert err.strip().splitlines()[-1].endswith(": interrupted"), err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    return err


def _previous_run(tiny_export, tmp_path) -> tuple[Path, dict[str, bytes]]:
    out = tmp_path / "out"
    run_job(str(out), "--input", write_lines(str(tmp_path / "old.txt"), ["an old cat"]),
            "--model", tiny_export)
    return out, {p.name: p.read_bytes() for p in out.iterdir()}


def _untouched(out: Path, before: dict[str, bytes]) -> None:
    """The previous run as it was: no staging folder, no claim, the same files."""
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.pipeline
def test_ctrl_c_while_the_run_reads_exits_130_and_keeps_the_previous_run(tiny_export,
                                                                         tmp_path):
    """The read step has the main thread: Beam wraps the KeyboardInterrupt (exit 1 before)."""
    out, before = _previous_run(tiny_export, tmp_path)
    fifo = tmp_path / "slow.txt"
    os.mkfifo(fifo)
    run = _start(["run", "--input", str(fifo), "--model", tiny_export, "--output", str(out),
                  "--overwrite", "--progress_every", "0"])
    fd = _reading(fifo, run)
    try:
        assert any(p.name.startswith(".beam-embed-staging-") for p in out.iterdir())
        assert (out / CLAIM).exists()
        err = _interrupted(run)
    finally:
        os.close(fd)
    assert err.strip().splitlines()[-1] == "beam-embed run: interrupted"
    _untouched(out, before)


@pytest.mark.pipeline
def test_ctrl_c_at_a_terminal_during_a_multi_process_run(tiny_export, tmp_path):
    """The whole process group gets it, the workers reading the input included: one line,
    no worker's traceback, no staging folder left, no worker left running."""
    out, before = _previous_run(tiny_export, tmp_path)
    fifo = tmp_path / "slow.txt"
    os.mkfifo(fifo)
    run = _start(["run", "--input", str(fifo), "--model", tiny_export, "--output", str(out),
                  "--overwrite", "--progress_every", "0", "--direct_num_workers", "2",
                  "--direct_running_mode", "multi_processing"], group=True)
    fd = _reading(fifo, run)
    try:
        _interrupted(run, group=True)
    finally:
        os.close(fd)
    _untouched(out, before)
    time.sleep(1)
    with pytest.raises(ProcessLookupError):  # nothing is left in the run's process group
        os.killpg(run.pid, 0)


@pytest.mark.pipeline
def test_ctrl_c_before_the_pipeline_exits_130_and_releases_the_claim(tiny_export, tmp_path):
    out, before = _previous_run(tiny_export, tmp_path)
    marker = tmp_path / "held"
    corpus = write_lines(str(tmp_path / "new.txt"), ["a new cat"])
    run = _start(["run", "--input", corpus, "--model", tiny_export, "--output", str(out),
                  "--overwrite", "--progress_every", "0"],
                 held_at="beam_embed.pipeline.job.build:probe_widths", marker=marker)
    _wait_for(marker.exists, run)  # under the claim, probing the model's widths
    assert (out / CLAIM).exists()
    _interrupted(run)
    _untouched(out, before)


@pytest.mark.pipeline
def test_ctrl_c_inside_the_pca_pipeline_exits_130(tiny_export, tmp_path):
    """The fit's step has the main thread: Beam wraps the KeyboardInterrupt (exit 1 before)."""
    embeddings = tmp_path / "emb"
    run_job(str(embeddings), "--input", write_lines(
        str(tmp_path / "c.txt"), [f"line {i} the cat sat" for i in range(50)]),
        "--model", tiny_export)
    viz, marker = tmp_path / "viz", tmp_path / "held"
    pca = _start(["pca", "--input", str(embeddings), "--output", str(viz), "--components", "2"],
                 held_at="beam_embed.pipeline.pca.fit:fit_pca", marker=marker)
    _wait_for(marker.exists, pca)
    assert (viz / CLAIM).exists()
    err = _interrupted(pca)
    assert err.strip().splitlines()[-1] == "beam-embed pca: interrupted"
    assert not (viz / CLAIM).exists() and not (viz / "manifest.json").exists()


def _stopped(process: subprocess.Popen) -> str:
    """Sends SIGTERM (a scheduler, `timeout`); asserts the exit code 128 + SIGTERM and no
    traceback; returns stderr."""
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    return err


@pytest.mark.pipeline
@pytest.mark.parametrize("held_at", ["beam_embed.pipeline.pca.fit:fit_pca",  # a Beam step
                                     "beam_embed.pipeline.pca.plots:write_png"])  # after Beam
def test_a_sigterm_stopped_pca_releases_its_claim_and_the_next_pca_runs(tiny_export, tmp_path,
                                                                         held_at):
    """Stopped by SIGTERM inside the pipeline or after it: exit 143, the claim released, the
    staging folder removed, the previous viz untouched; the next plain pca into the folder runs
    (it was refused with exit 5, the claim left behind)."""
    from beam_embed.pipeline.pca.command import main as pca

    embeddings = tmp_path / "emb"
    run_job(str(embeddings), "--input", write_lines(
        str(tmp_path / "c.txt"), [f"line {i} the cat sat" for i in range(50)]),
        "--model", tiny_export)
    viz, marker = tmp_path / "viz", tmp_path / "held"
    stopped = _start(["pca", "--input", str(embeddings), "--output", str(viz), "--components",
                      "2"], held_at=held_at, marker=marker)
    _wait_for(marker.exists, stopped)
    assert (viz / CLAIM).exists()
    assert any(p.name.startswith(".beam-embed-staging-") for p in viz.iterdir())
    _stopped(stopped)
    assert os.listdir(viz) == []  # no claim, no staging folder, nothing published
    assert pca(["--input", str(embeddings), "--output", str(viz), "--components", "2"]) == \
        exits.OK
    assert (viz / "manifest.json").exists() and not (viz / CLAIM).exists()
