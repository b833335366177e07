"""The tool's own lines on stderr, time-stamped, flushed at once (workers print progress too)."""

from __future__ import annotations

import os
import sys
import time

VERBOSE_ENV = "BEAM_EMBED_VERBOSE"


def log(message: str) -> None:
    print(f"[beam-embed {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def set_verbose(on: bool = True) -> None:
    """`-v`/`--verbose`: library log lines and full tracebacks are shown (also when the
    BEAM_EMBED_VERBOSE environment variable is set to 1)."""
    os.environ[VERBOSE_ENV] = "1" if on else "0"


def is_verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "0") not in ("", "0", "false", "no")
