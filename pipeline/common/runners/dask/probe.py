"""Before a Dask run claims its output: every worker sees the output folder and the model at the
paths the launcher ships, and finds there the model the launcher fingerprinted.

The workers read the model and write the shards themselves, in their own working folders and
file systems: a local --output or model on the launcher's disk only, or another copy (version) of
the model at the same path on a worker's machine, failed deep inside the run (shards stranded on
workers, "src and dst files do not exist") or, worse, published the other model's vectors under
the launcher's fingerprint. The launcher writes a probe file into the output folder and asks each
worker (distributed's `Client.run`, outside the task graph) whether it sees it and the model's
files, and for the model's fingerprint as it computes it. Workers that join later check the
fingerprint when they load the model (beam_embed.pipeline.job.embed). Imports dask and Beam
inside functions only.
"""

from __future__ import annotations

import os
import sys
import uuid

PROBE = ".beam-embed-worker-probe-"
SHARED = ("give paths every worker sees at the same place: gs://, or a shared file system "
          "mounted at the same path")


def _local(path: str | None) -> bool:
    from apache_beam.io.filesystems import FileSystems

    return bool(path) and not FileSystems.get_scheme(path)


def look(probe: str, kind: str, encoder: str, preprocessor: str | None) -> tuple[str, str]:
    """On a worker: (what it does not see, "" when it sees everything; the model's
    fingerprint as it computes it there, "" when it does not see the model)."""
    from apache_beam.io.filesystems import FileSystems

    from beam_embed.models.spec import fingerprint

    if not FileSystems.exists(probe):
        return f"the output folder {os.path.dirname(probe)}", ""
    for path in (encoder, preprocessor):
        if _local(path) and not os.path.exists(path):
            return f"the model at {path}", ""
    return "", fingerprint(kind, encoder, preprocessor)


def check_workers(client, output: str, spec, expected: str) -> None:
    """ValueError naming the first worker that does not see the output folder or the model, or
    that finds another model there (both fingerprints named)."""
    from apache_beam.io.filesystems import FileSystems

    probe = FileSystems.join(output, f"{PROBE}{uuid.uuid4().hex[:12]}")
    FileSystems.create(probe).close()
    try:
        answers = client.run(look, probe, spec.kind, spec.encoder, spec.preprocessor)
    finally:
        FileSystems.delete([probe])
    for worker, (unseen, found) in sorted(answers.items()):
        if unseen:
            raise ValueError(f"the Dask worker {worker} does not see {unseen}: {SHARED}")
        if found != expected:
            raise ValueError(f"the Dask worker {worker} finds another model at {spec.encoder}: "
                             f"fingerprint {found}, the launcher's {expected}; give every "
                             "worker the same model files")


class ModelMismatch(RuntimeError):
    """A worker loaded a model other than the one the run fingerprinted."""


def _on_a_dask_worker() -> bool:
    distributed = sys.modules.get("distributed")  # a Dask worker has imported it
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except ValueError:  # not in a worker's task
        return False
    return True


def check_loaded(spec, expected: str | None) -> None:
    """Where the model loads on a Dask worker (one that joined after the probe, or whose
    files changed since): its fingerprint is the run's, else ModelMismatch naming both. Other
    runners' workers read the launcher's files, or gs:// (fingerprinted by name)."""
    if not expected or not _on_a_dask_worker():
        return
    from beam_embed.models.spec import fingerprint

    found = fingerprint(spec.kind, spec.encoder, spec.preprocessor)
    if found != expected:
        raise ModelMismatch(f"a worker found another model at {spec.encoder}: fingerprint "
                            f"{found}, the run's {expected}; give every worker the same model "
                            "files")
