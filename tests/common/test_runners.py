"""A local run's runner: Beam's in-process runner, its bundles' state sampled more often
(beam_embed.process.local_runs)."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.worker import statesampler
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.utils.counters import CounterFactory

from beam_embed.pipeline.common.runners.choice import runner_for
from beam_embed.process.local_runs import SAMPLING_PERIOD_MS


def test_a_local_run_gets_the_in_process_runner_and_the_shorter_sampling_period(monkeypatch):
    monkeypatch.setattr(statesampler.StateSampler.__init__, "__defaults__",
                        (statesampler.DEFAULT_SAMPLING_PERIOD_MS,))
    assert statesampler.StateSampler("s", CounterFactory()).sampling_period_ms == 200

    runner = runner_for(PipelineOptions([]))

    assert isinstance(runner, FnApiRunner)
    sampler = statesampler.StateSampler("s", CounterFactory())
    assert sampler.sampling_period_ms == SAMPLING_PERIOD_MS < 200
    with beam.Pipeline(runner=runner) as p:
        squares = p | beam.Create(range(100)) | beam.Map(lambda x: x * x)
        assert_that(squares, equal_to([x * x for x in range(100)]))


def test_another_runner_is_left_to_beam_and_the_sampler_untouched(monkeypatch):
    monkeypatch.setattr(statesampler.StateSampler.__init__, "__defaults__",
                        (statesampler.DEFAULT_SAMPLING_PERIOD_MS,))

    assert runner_for(PipelineOptions(["--runner", "DataflowRunner"])) is None
    assert statesampler.StateSampler("s", CounterFactory()).sampling_period_ms == 200
