"""The one call at a process's entry, before anything imports TensorFlow."""

from __future__ import annotations

from collections.abc import Sequence

from beam_embed.process import gcs_auth
from beam_embed.process.job_process import start_job_process
from beam_embed.process.library_noise import quiet_libraries, verbose_requested


def set_up(argv: Sequence[str]) -> None:
    """What a command needs before anything imports TensorFlow, in any process: libraries
    quiet unless `argv` (the command's arguments) or BEAM_EMBED_VERBOSE asks -v, and Beam's
    gs:// credentials look replaced by one that does not retry for ~25 s (gcs_auth.py), verbose
    or not. The CLI's `main` calls it for library callers too; idempotent."""
    gcs_auth.install()
    quiet_libraries(verbose_requested(argv))


def enter(command: str, argv: Sequence[str], local: bool = False) -> None:
    """The set-up of a process started to run `command` with `argv` (the command's own
    arguments), from the process's entry only (`beam-embed`, `python -m beam_embed`,
    `python -m beam_embed.pipeline.run`, `python -m beam_embed.pipeline.pca`): set_up(argv),
    and for `run` the process tuned as the job's own (job_process.py): the imports a job never
    makes refused, those only other runners need too when the run is `local` (only the job's own
    flags), and the garbage collector paused until the run starts. A library caller of a
    command's `main` (tests, notebooks) goes through none of this: its process stays as it
    was."""
    set_up(argv)
    if command == "run":
        start_job_process(local)
