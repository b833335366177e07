"""The tool's own lines on stderr, time-stamped, flushed at once (workers print progress too),
and whether the user asked for the libraries' lines as well (-v, BEAM_EMBED_VERBOSE)."""

from __future__ import annotations

import logging
import os
import sys
import time

from beam_embed.process.terminal import printable

VERBOSE_ENV = "BEAM_EMBED_VERBOSE"
# Set in a local run's worker processes whose stderr is sent away (local_runs.py): the file
# descriptor of their launcher's stderr, where the tool's own lines still go.
LOG_FD_ENV, WORKER_LOG_FD = "BEAM_EMBED_LOG_FD", 3
_streams: dict[int, object] = {}


def _stream():
    """Where the tool's lines go: stderr, or the descriptor LOG_FD_ENV names."""
    fd = os.environ.get(LOG_FD_ENV, "")
    if not fd.isdigit():
        return sys.stderr
    if int(fd) not in _streams:
        try:
            _streams[int(fd)] = open(int(fd), "w", closefd=False)  # noqa: SIM115 - the process's
        except OSError:  # not open in this process: stderr it is
            _streams[int(fd)] = sys.stderr
    return _streams[int(fd)]


def log(message: str) -> None:
    # Messages quote file names, ids and exception text from the input: shown, never obeyed by
    # the terminal (each line kept a line).
    safe = "\n".join(map(printable, message.split("\n")))
    print(f"[beam-embed {time.strftime('%H:%M:%S')}] {safe}", file=_stream(), flush=True)


def set_verbose(on: bool = True) -> None:
    """`-v`/`--verbose`: library log lines and full tracebacks are shown (also when the
    BEAM_EMBED_VERBOSE environment variable is set to 1)."""
    os.environ[VERBOSE_ENV] = "1" if on else "0"


def is_verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "0") not in ("", "0", "false", "no")


def quiet_asked() -> bool:
    """A command's set-up ran without -v, in this process or in the one that started it (local
    worker processes inherit the environment); False where none ran (a library caller that set
    nothing up, a Dataflow worker)."""
    return os.environ.get(VERBOSE_ENV) == "0"


def library_quiet_wanted() -> bool:
    """What a library caller (the Python API, in a host process nothing of ours set up) asked
    for: quiet TensorFlow unless BEAM_EMBED_VERBOSE=1, or TensorFlow's own
    TF_CPP_MIN_LOG_LEVEL set to 0 or 1 (2 or 3 ask for quiet too)."""
    if quiet_asked():
        return True
    return not is_verbose() and \
        os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() not in ("0", "1")


class _ToolLines(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        log(record.getMessage())


def show_as_own(name: str) -> None:
    """The INFO lines of logger `name` shown as the tool's own: how the models layer, which
    imports nothing of the commands', tells the user what it is doing (a model's one-time
    export)."""
    logger = logging.getLogger(name)
    if not any(isinstance(h, _ToolLines) for h in logger.handlers):
        logger.addHandler(_ToolLines())
    logger.setLevel(logging.INFO)
    logger.propagate = False
