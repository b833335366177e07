"""Which Beam runner a local run gets."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

# Beam's state sampler times each step of a bundle from its own thread, which sleeps in steps
# that grow to 200 ms, and every bundle's end joins that thread: a local run's long bundle
# waited 0-200 ms for it with its work done (156 ms measured on a 2,000-sentence run). Beam
# has no option for the period; at 20 ms the wait is at most that, for a lock check 50 times a
# second on the sampler's thread.
SAMPLING_PERIOD_MS = 20


def shorten_state_sampling() -> bool:
    """Makes the state samplers this process's bundles create sample every SAMPLING_PERIOD_MS;
    False (nothing changed) when Beam's sampler no longer has the default this expects."""
    from apache_beam.runners.worker import statesampler

    init = statesampler.StateSampler.__init__
    if init.__defaults__ == (SAMPLING_PERIOD_MS,):
        return True
    if init.__defaults__ != (statesampler.DEFAULT_SAMPLING_PERIOD_MS,):
        return False
    init.__defaults__ = (SAMPLING_PERIOD_MS,)
    return True


def runner_for(options: PipelineOptions):
    """The runner --runner names; without one, Beam's in-process batch runner (FnApiRunner,
    which honours --direct_num_workers/--direct_running_mode). Plain DirectRunner in Beam 2.77
    first tries to download its Prism binary from GitHub, then falls back to the same runner:
    skipping that keeps offline runs quiet and local behaviour the same everywhere. Its bundles
    sample their state every SAMPLING_PERIOD_MS (in this process; worker processes keep Beam's
    period)."""
    if options.view_as(StandardOptions).runner:
        return None
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    shorten_state_sampling()
    return FnApiRunner()
