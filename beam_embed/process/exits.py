"""The exit codes every command returns (docs/run.md has them as a table).

Scripts and schedulers branch on these, so each means one thing across commands: a run that
finished with records missing, or with nothing embedded, never exits 0.
"""

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import NoReturn

from beam_embed.process.log import is_verbose

OK = 0  # finished; every record accounted for
FAILED = 1  # stopped by an error (disk full, an unreadable output, ...): one line names it
BAD_CONFIG = 2  # a flag, config key, model or limit is wrong: refused before any data is read
INCOMPLETE_INPUT = 3  # an input file ends early or is corrupt (run: finished, the rest of that
#                      file is a dead letter; pca/search: a shard is missing, damaged or not the
#                      file its manifest lists; any reader: a run replaced while it was read)
NOTHING_EMBEDDED = 4  # run: finished, but no record was embedded (all empty or dead-lettered)
OUTPUT_BUSY = 5  # run: another run holds the output folder (or a killed one left its claim)
INTERRUPTED = 128 + signal.SIGINT  # Ctrl-C: 130, what a shell reports for a process it stopped
STOPPED = 128 + signal.SIGTERM  # SIGTERM (a scheduler, `timeout`): 143, as a shell reports it

_interrupts: list[int] = []  # the SIGINTs received while interrupts_recorded() is active
_recording = 0  # interrupts_recorded() blocks that installed the handler and are still open


@contextlib.contextmanager
def interrupts_recorded(verbose: bool = False) -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt as Python's own handler does, and is recorded first:
    Beam turns a KeyboardInterrupt raised inside a step into its own error (a RuntimeError
    naming the step), so `interrupted()` is what tells a stopped run from a failed one, not
    the exception that reaches the command. Once interrupted, and until the block ends, library
    log lines and the tracebacks of threads that die with the pipeline (its workers' gRPC
    readers, say) are dropped unless `verbose` (or -v): they are the interrupt's consequences,
    not errors. Installed only where Python's own handler is (the main thread; a SIGINT the
    parent ignores, as for a background job, stays ignored); nested, the outer one records."""
    global _recording
    if not _recording:  # no outer block records: an earlier command's Ctrl-C is not this one's
        _interrupts.clear()
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    hook, disabled = threading.excepthook, logging.root.manager.disable

    def interrupt(signum, frame):
        _interrupts.append(signum)
        if not (verbose or is_verbose()):
            logging.disable(logging.CRITICAL)  # the tool's own lines are printed, not logged
            threading.excepthook = _dropped
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    _recording += 1
    try:
        yield
    finally:
        _recording -= 1
        signal.signal(signal.SIGINT, previous)
        threading.excepthook = hook
        logging.disable(disabled)


def _dropped(args) -> None:
    """A thread's uncaught exception, not printed."""


def interrupted() -> bool:
    """Whether Ctrl-C came while interrupts_recorded() was active."""
    return bool(_interrupts)


@contextlib.contextmanager
def unwound_on_sigterm() -> Iterator[list[int]]:
    """SIGTERM (a scheduler stopping a command, `timeout`) unwinds the block like Ctrl-C, by a
    SystemExit(STOPPED), so what it holds (an output folder's claim, a staging folder) is
    released on the way out; only SIGKILL leaves a claim for --overwrite to take over. Yields
    the signals received: Beam re-raises what a step raised as its own error, so the caller
    tells a stopped run from a failed one by this list (`stopped_by`), not by the exception.
    Installed only on the main thread, where Python runs signal handlers."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def stop(signum, frame):
        received.append(signum)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def stopped_by(received: list[int], error: BaseException) -> None:
    """Raises SystemExit(128 + the signal) from `error` when unwound_on_sigterm's `received`
    holds one: `error` is then what Beam made of the SystemExit raised inside a step, and the
    command was stopped, not failed."""
    if received:
        raise SystemExit(128 + received[0]) from error


def exit_now(code: int | None) -> NoReturn:
    """Ends the process with `code` (None: OK) without the interpreter's teardown. A command
    returns only once its files are closed, published and its claim released; what is left is
    freeing TensorFlow's and Beam's modules and stopping their threads, ~1-2 s that write
    nothing. The `atexit` handlers still run (~2 ms): libraries clean up there, TensorFlow's
    autograph for one removes the modules it generated in the temp folder (33 files an
    `export-model` left behind without them). Then log handlers and stdout/stderr are flushed,
    so no line is lost."""
    from beam_embed.process.private_apis.stdlib import run_atexit_handlers

    run_atexit_handlers()  # what a normal exit calls
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken pipe: nothing more can reach it
            pass
    os._exit(OK if code is None else code)


def exit_after(command: Callable[[], int | None]) -> NoReturn:
    """Runs `command` and ends the process with its code through exit_now. A SystemExit ends it
    the same way: SIGTERM unwinds a command with one (unwound_on_sigterm) once its claim is
    released, and the step it stopped may leave a thread running that the
    interpreter's teardown would wait on for ever (Beam's state sampler, when the signal lands
    after its thread starts and before it is marked started)."""
    try:
        code = command()
    except SystemExit as e:
        code = e.code
        if code is not None and not isinstance(code, int):  # SystemExit("message"), as Python does
            print(code, file=sys.stderr)
            code = FAILED
    exit_now(code)
