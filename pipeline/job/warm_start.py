"""The encoder's warm-up started before Beam is imported, for a run given the job's own flags.

A run's launcher imports TensorFlow (~2.1 s on 2 cores, measured) and Beam with pyarrow (~1.2 s),
both Python work that holds the GIL, and warms the encoder up (models/warm_up.py: its load, then
~0.9 s of graph optimization in C++ that leaves the GIL free). Beam's parser is needed to read
Beam's options, but the encoder's spec needs only the job's own settings: read with a plain
parser, they start the warm-up right after TensorFlow's import, and Beam imports while the graph
is optimized. The full parse that follows builds the same spec and joins this warm-up.

Only the plain case starts early: every argument (and every --config key) one of the job's own
flags, none of Beam's (a runner, worker processes or experiments change the encoder's thread
pools, which TensorFlow fixes at its first op), the output fresh or --overwrite given. Anything
else returns without starting, and the full parse builds the spec. The same plain case is a
local run, whose process refuses the imports only other runners need
(beam_embed.process.job_process).
"""

from __future__ import annotations

import os

from beam_embed.models.hub_loader import is_remote
from beam_embed.models.spec import EncoderSpec
from beam_embed.pipeline.job.argv import JobArgv, read_job_argv
from beam_embed.pipeline.job.settings import RunSettings
from beam_embed.pipeline.job.threads import worker_threads


def read_at_entry(argv: list[str]) -> JobArgv | None:
    """The job's arguments read once, by the entry of a process that exists to run the job
    (`python -m beam_embed.pipeline.run`, `beam-embed run`), for `main`: None when a --config
    cannot be read (`main` reads it again and says why). Its `plain` says whether the entry
    tunes the process for a local run (beam_embed.process.enter)."""
    try:
        return read_job_argv(argv, tentative=True)
    except ValueError:
        return None


def _fresh_output(run: RunSettings) -> bool:
    """The run will not be refused for a previous run in its output (checked again, fully, by
    the launcher)."""
    if run.overwrite:
        return True
    if is_remote(run.output):
        return False
    return not os.path.isdir(run.output) or not os.listdir(run.output)


def start_warm_up(job: JobArgv) -> EncoderSpec | None:
    """In the plain case, the encoder's spec, whose warm-up starts now; None otherwise (the
    full parse builds the spec). A bad model raises the ValueError the full parse would raise
    for it (the checks before it in the full parse, Beam's and the output's, pass in the plain
    case)."""
    if not job.plain or not _fresh_output(job.settings):
        return None
    from beam_embed.models.tf_import import import_tensorflow

    import_tensorflow()
    spec = job.settings.encoder_spec(worker_threads())  # a plain run: no Beam options
    spec.warm_up()
    return spec
