"""A local run's process tuning (beam_embed.process.local_runs) left undone where Beam changed:
the runner itself is tested with runner_for (tests/common/test_runners.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from apache_beam.runners.portability import local_job_service
from apache_beam.runners.worker import statesampler
from apache_beam.utils.counters import CounterFactory

from beam_embed.process.local_runs import (
    IGNORE_SIGINT,
    QUIET_STDERR,
    set_worker_command_lines,
    shorten_state_sampling,
    worker_command_prefix,
)
from beam_embed.process.log import VERBOSE_ENV

ROOT = Path(__file__).resolve().parents[2]


def test_a_sampler_whose_default_changed_is_left_as_beam_made_it(monkeypatch):
    monkeypatch.setattr(statesampler.StateSampler.__init__, "__defaults__", (150,))

    assert shorten_state_sampling() is False
    assert statesampler.StateSampler("s", CounterFactory()).sampling_period_ms == 150


def test_worker_command_lines_are_prefixed_once_however_often_tuned(monkeypatch):
    monkeypatch.setenv(VERBOSE_ENV, "0")
    worker = local_job_service.SubprocessSdkWorker
    monkeypatch.setattr(worker, "run", lambda self: self._worker_command_line)
    assert set_worker_command_lines() and set_worker_command_lines()
    fake = worker.__new__(worker)
    fake._worker_command_line = "python -m worker"
    assert worker.run(fake) == IGNORE_SIGINT + QUIET_STDERR + "python -m worker"
    assert worker.run(fake) == IGNORE_SIGINT + QUIET_STDERR + "python -m worker"  # no more


def test_workers_keep_their_stderr_when_verbose_or_not_set_up(monkeypatch):
    monkeypatch.setenv(VERBOSE_ENV, "1")
    assert worker_command_prefix() == IGNORE_SIGINT
    monkeypatch.delenv(VERBOSE_ENV)  # a library caller that set nothing up
    assert worker_command_prefix() == IGNORE_SIGINT


def test_a_quiet_workers_stderr_is_dropped_and_its_own_lines_kept(monkeypatch):
    """Through `sh -c`, as Beam starts a worker: what the worker writes to stderr (a bundle's
    traceback) goes nowhere; the tool's own lines reach the launcher's stderr."""
    monkeypatch.setenv(VERBOSE_ENV, "0")
    worker = (f"{sys.executable} -c 'import sys; print(\"Traceback (noise)\", file=sys.stderr); "
              "from beam_embed.process.log import log; log(\"worker 1: 10 records embedded\")'")
    done = subprocess.run(["sh", "-c", worker_command_prefix() + worker], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0
    assert done.stderr.endswith("] worker 1: 10 records embedded\n"), done.stderr
    assert done.stderr.count("\n") == 1 and "noise" not in done.stderr
