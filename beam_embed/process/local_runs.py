"""A local Beam run's process tuned: its bundles' state sampled more often, and the worker
processes it starts leaving Ctrl-C to it and printing only the tool's own lines. `tune_local_run` is called where a local run gets its
runner (beam_embed.pipeline.common.runners.choice.runner_for), in whichever process that is."""

from __future__ import annotations

from beam_embed.process.log import LOG_FD_ENV, WORKER_LOG_FD, quiet_asked
from beam_embed.process.private_apis.beam import (
    prefix_worker_command_lines,
    set_state_sampling_period,
)

# Beam's state sampler times each step of a bundle from its own thread, which sleeps in steps
# that grow to 200 ms, and every bundle's end joins that thread: a local run's long bundle
# waited 0-200 ms for it with its work done (156 ms measured on a 2,000-sentence run). Beam
# has no option for the period; at 20 ms the wait is at most that, for a lock check 50 times a
# second on the sampler's thread.
SAMPLING_PERIOD_MS = 20


def shorten_state_sampling() -> bool:
    """Makes the state samplers this process's bundles create sample every SAMPLING_PERIOD_MS;
    False (nothing changed) when Beam's sampler no longer has the default this expects."""
    return set_state_sampling_period(SAMPLING_PERIOD_MS)


IGNORE_SIGINT = "trap '' INT; "  # sh: SIGINT ignored, and an ignored signal stays so in exec
# sh: the worker's stderr to /dev/null, and a copy of it as the fd log.py writes the tool's own
# lines to (a worker's progress lines)
QUIET_STDERR = f"export {LOG_FD_ENV}={WORKER_LOG_FD}; exec {WORKER_LOG_FD}>&2 2>/dev/null; "


def worker_command_prefix() -> str:
    """What each worker process of a multi-process local run runs before its command line:

    - SIGINT ignored. Ctrl-C at a terminal signals the whole process group: each worker died of
      its KeyboardInterrupt and printed its traceback, while the launcher stops the run anyway
      (closing a worker's control stream ends it). Beam starts each worker through `sh -c`
      (SubprocessSdkWorker.run), so the shell sets SIGINT ignored before the worker's Python
      starts, and Python keeps a signal it finds ignored.
    - When the command runs quiet (no -v): the worker's stderr sent away, the tool's own lines
      kept. A worker prints the traceback of every bundle that fails (Beam's SdkHarness, on top
      of logging it to the launcher, which reports the error in one line), and Python prints
      what fails in a finalizer (a Parquet writer closing on a full disk) there too: on a full
      disk two workers printed 200 lines and 9 tracebacks."""
    return IGNORE_SIGINT + (QUIET_STDERR if quiet_asked() else "")


def set_worker_command_lines() -> bool:
    """The worker processes of multi-process local runs start with worker_command_prefix();
    False (nothing changed) when Beam no longer starts them the way this expects."""
    return prefix_worker_command_lines(worker_command_prefix)


def tune_local_run() -> None:
    """Before a local run (Beam's in-process runner) starts: its bundles sample their state
    every SAMPLING_PERIOD_MS (in this process; worker processes keep Beam's period), and its
    worker processes, when it starts some, leave Ctrl-C to this one and print only the tool's
    own lines unless -v."""
    shorten_state_sampling()
    set_worker_command_lines()
