"""How a job's own process is tuned to start fast: the imports it refuses and its garbage
collector held off until the run starts. The process entries of the job (`python -m
beam_embed.pipeline.run`, `beam-embed run`) start it through beam_embed.process.enter, and the
run calls `resume_collector`; only there: a process that calls the job's `main` as a library
(tests, notebooks) is left as it was. (How TensorFlow itself is imported lean, without Keras, is
models/tf_import.py: the models load it that way in any process.)

What a job's own process never imports.

pandas (~0.2-0.5 s to import on 2 cores, measured) is imported twice over in a job's process
without ever being handed a value: by Beam, only to register converters between Beam schemas and
pandas DataFrames (`apache_beam/typehints/__init__.py` goes on without them when the import
fails), and by pyarrow, only to ask whether each array it converts is a pandas object (its
pandas shim takes a failed import as "no pandas"). The job's PCollections hold Records and numpy
batches, its sinks build Arrow arrays from numpy and lists. So the process entries of the job
(`python -m beam_embed.pipeline.run`, `beam-embed run`) refuse the import for the life of the process.
Only there: a process that calls the job's `main` as a library (tests, notebooks) may use pandas
with pyarrow afterwards, which the refusal would break.

A local run (the DirectRunner, in this process) also refuses the clients `import apache_beam`
loads for other runners and other IOs, each an import Beam makes optional (it goes on when the
import fails): Dataflow's API client (only the DataflowRunner reports job states with it),
BigQuery's and Pub/Sub's IOs. Together ~0.4 s of Beam's ~1.0 s import on 2 cores (measured).
Cloud Storage stays: a local run may read and write gs:// paths. (MongoDB's driver would save
~0.05 s more, but Beam logs a warning when it is missing.)

The garbage collector held off while a job's process starts.

Importing TensorFlow and Beam and loading the model create ~400,000 objects that live as long
as the process, and almost none is garbage. Python's collector still ran six full collections
over them before a 2,000-sentence run's first record (measured: 0.70 s on 2 cores, 111 objects
found in all). The job's process entries (`python -m beam_embed.pipeline.run`, `beam-embed run`) pause the
collector; the run resumes it as its pipeline starts, moving what start-up made into the
permanent generation (`gc.freeze`) so later collections skip it. Only there, as with the
refused imports: a process that calls the job's `main` as a library keeps its collector as it
was.
"""

from __future__ import annotations

import gc

from beam_embed.process.imports import refuse

NEVER_IMPORTED = ("pandas",)
NOT_IN_LOCAL_RUNS = ("google.cloud.dataflow", "apache_beam.io.gcp.bigquery")


def refuse_unused_imports(local: bool = False) -> None:
    """Refuses NEVER_IMPORTED from now on, and NOT_IN_LOCAL_RUNS when the job runs `local`ly;
    a module already imported stays."""
    refuse(NEVER_IMPORTED + (NOT_IN_LOCAL_RUNS if local else ()))


def pause_collector() -> None:
    """From a job process's entry: no collection until `resume_collector`."""
    gc.disable()


def resume_collector() -> None:
    """As the pipeline starts: start-up's objects frozen, the collector on again. Does nothing
    where the collector was not paused."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def start_job_process(local: bool) -> None:
    """A job process's tuning, from its entry: the imports it never makes refused (those of
    other runners too when it runs `local`ly), the collector paused."""
    refuse_unused_imports(local=local)
    pause_collector()
