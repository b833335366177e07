"""A local run's process tuning (beam_embed.process.local_runs) left undone where Beam changed:
the runner itself is tested with runner_for (tests/common/test_runners.py)."""

from __future__ import annotations

from apache_beam.runners.portability import local_job_service
from apache_beam.runners.worker import statesampler
from apache_beam.utils.counters import CounterFactory

from beam_embed.process.local_runs import (
    IGNORE_SIGINT,
    shorten_state_sampling,
    workers_leave_ctrl_c_to_the_launcher,
)


def test_a_sampler_whose_default_changed_is_left_as_beam_made_it(monkeypatch):
    monkeypatch.setattr(statesampler.StateSampler.__init__, "__defaults__", (150,))

    assert shorten_state_sampling() is False
    assert statesampler.StateSampler("s", CounterFactory()).sampling_period_ms == 150


def test_worker_command_lines_ignore_sigint_once_however_often_tuned(monkeypatch):
    worker = local_job_service.SubprocessSdkWorker
    monkeypatch.setattr(worker, "run", lambda self: self._worker_command_line)
    assert workers_leave_ctrl_c_to_the_launcher() and workers_leave_ctrl_c_to_the_launcher()
    fake = worker.__new__(worker)
    fake._worker_command_line = "python -m worker"
    assert worker.run(fake) == IGNORE_SIGINT + "python -m worker"
    assert worker.run(fake) == IGNORE_SIGINT + "python -m worker"  # a rerun adds nothing
