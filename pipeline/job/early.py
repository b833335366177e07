"""The encoder's warm-up started before Beam is imported, for a run given the job's own flags.

A run's launcher imports TensorFlow (~2.1 s on 2 cores, measured) and Beam with pyarrow (~1.2 s),
both Python work that holds the GIL, and warms the encoder up (models/warm_up.py: its load, then
~0.9 s of graph optimization in C++ that leaves the GIL free). Beam's parser is needed to read
Beam's options, but the encoder's spec needs only the job's own flags: read here with a plain
parser, they start the warm-up right after TensorFlow's import, and Beam imports while the graph
is optimized. The full parse that follows builds the same spec and joins this warm-up.

Only the plain case starts early: every argument (and every --config key) one of the job's own
flags, none of Beam's (a runner, worker processes or experiments change the encoder's thread
pools, which TensorFlow fixes at its first op), the output fresh or --overwrite given. Anything
else returns without starting, and the full parse goes on as before. The same plain case is a
local run, whose process refuses the imports only other runners need (lean_process.py).
"""

from __future__ import annotations

import argparse
import os

from models.hub_loader import is_remote
from pipeline.job.flag_values import check_plain_flags, config_argv, spec_of
from pipeline.job.flags import add_job_flags


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # a value argparse refuses: the full parse says so
        raise ValueError(message)


def own_flags(argv: list[str]) -> argparse.Namespace | None:
    """The job's own flags (a --config file's keys first, the command line winning), or None
    when anything in argv or the file is not one of them."""
    parser = _Parser(add_help=False, allow_abbrev=False, exit_on_error=False)
    parser.add_argument("--config")
    add_job_flags(parser)
    known = {o for a in parser._actions for o in a.option_strings}
    try:
        pre, _ = parser.parse_known_args(argv)
        full = (config_argv(pre.config, known) if pre.config else []) + list(argv)
        flags, unknown = parser.parse_known_args(full)
    except (ValueError, argparse.ArgumentError):
        return None
    return None if unknown else flags


def job_process(argv: list[str]) -> None:
    """Set-up of a process that exists to run the job (`python -m pipeline.run`, `beam-embed
    run`), given the job's arguments: it refuses the imports a job never uses, those of other
    runners too when argv is a local run (pipeline.common.lean_process), and holds the garbage
    collector off until the run starts (pipeline.common.startup_gc)."""
    from pipeline.common import startup_gc
    from pipeline.common.lean_process import refuse_unused_imports

    refuse_unused_imports(local=own_flags(argv) is not None)
    startup_gc.pause()


def _fresh_output(flags: argparse.Namespace) -> bool:
    """The run will not be refused for a previous run in its output (checked again, fully, by
    the launcher)."""
    output = flags.output.rstrip("/")
    if flags.overwrite:
        return True
    if is_remote(output):
        return False
    return not os.path.isdir(output) or not os.listdir(output)


def start_warm_up(argv: list[str]) -> bool:
    """Starts the encoder's warm-up now when argv is the plain case; whether it did. A bad
    value or model raises the ValueError the full parse would raise for it (the checks before
    it in the full parse, Beam's parser and the output's, pass in the plain case)."""
    flags = own_flags(argv)
    if flags is None or not _fresh_output(flags):
        return False
    check_plain_flags(flags)
    from pipeline.common.quiet import import_tensorflow

    import_tensorflow()
    return spec_of(flags, (0, 0)).warm_up()  # (0, 0): worker_threads without Beam's flags
