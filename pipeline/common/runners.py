"""Which Beam runner a local run gets."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beam_embed.pipeline.common.private_apis import (
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


def runner_for(options: PipelineOptions):
    """The runner --runner names; without one, Beam's in-process batch runner (FnApiRunner,
    which honours --direct_num_workers/--direct_running_mode). Plain DirectRunner in Beam 2.77
    first tries to download its Prism binary from GitHub, then falls back to the same runner:
    skipping that keeps offline runs quiet and local behaviour the same everywhere. Its bundles
    sample their state every SAMPLING_PERIOD_MS (in this process; worker processes keep Beam's
    period). Its worker processes, when it starts some, leave Ctrl-C to this one
    (workers_leave_ctrl_c_to_the_launcher)."""
    if options.view_as(StandardOptions).runner:
        return None
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    shorten_state_sampling()
    workers_leave_ctrl_c_to_the_launcher()
    return FnApiRunner()
