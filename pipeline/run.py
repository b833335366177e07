"""`python -m pipeline.run`: the embedding job (`beam-embed run`), kept as a thin entry point."""

import sys

from pipeline.common.quiet import configure, verbose_requested

if __name__ == "__main__":
    configure(verbose_requested(sys.argv[1:]))  # before anything imports TensorFlow
    from pipeline.common.exits import exit_after
    from pipeline.common.lean_process import refuse_unused_imports
    from pipeline.job.early import own_flags

    # this process is the job's own; only the job's flags: a local run
    refuse_unused_imports(local=own_flags(sys.argv[1:]) is not None)
    from pipeline.common import startup_gc

    startup_gc.pause()  # the run resumes it (startup_gc.py)
    from pipeline.job.command import main

    exit_after(main)
