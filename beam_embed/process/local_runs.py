"""A local Beam run's process tuned: its bundles' state sampled more often, and the worker
processes it starts leaving Ctrl-C to it. `tune_local_run` is called where a local run gets its
runner (beam_embed.pipeline.common.runners.runner_for), in whichever process that is."""

from __future__ import annotations

from beam_embed.process.private_apis import (
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


def workers_leave_ctrl_c_to_the_launcher() -> bool:
    """The worker processes of a multi-process local run ignore SIGINT; False (nothing changed)
    when Beam no longer starts them the way this expects. Ctrl-C at a terminal signals the whole
    process group: each worker died of its KeyboardInterrupt and printed its traceback, while
    the launcher stops the run anyway (closing a worker's control stream ends it). Beam starts
    each worker through `sh -c` (SubprocessSdkWorker.run), so the shell sets SIGINT ignored
    before the worker's Python starts, and Python keeps a signal it finds ignored."""
    return prefix_worker_command_lines(IGNORE_SIGINT)


def tune_local_run() -> None:
    """Before a local run (Beam's in-process runner) starts: its bundles sample their state
    every SAMPLING_PERIOD_MS (in this process; worker processes keep Beam's period), and its
    worker processes, when it starts some, leave Ctrl-C to this one."""
    shorten_state_sampling()
    workers_leave_ctrl_c_to_the_launcher()
