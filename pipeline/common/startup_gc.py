"""The garbage collector held off while a job's process starts.

Importing TensorFlow and Beam and loading the model create ~400,000 objects that live as long
as the process, and almost none is garbage. Python's collector still ran six full collections
over them before a 2,000-sentence run's first record (measured: 0.70 s on 2 cores, 111 objects
found in all). The job's process entries (`python -m pipeline.run`, `beam-embed run`) pause the
collector; the run resumes it as its pipeline starts, moving what start-up made into the
permanent generation (`gc.freeze`) so later collections skip it. Only there, as with the
refused imports (lean_process.py): a process that calls the job's `main` as a library keeps its
collector as it was.
"""

from __future__ import annotations

import gc


def pause() -> None:
    """From a job process's entry: no collection until `resume`."""
    gc.disable()


def resume() -> None:
    """As the pipeline starts: start-up's objects frozen, the collector on again. Does nothing
    where the collector was not paused."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
