"""Errors as one line on stderr: what every command prints instead of a traceback.

A command's `main` is wrapped in `one_line_errors(prog)`: an OS, Arrow, TensorFlow, YAML or Beam
error becomes `prog: <cause> (<file>)` and exit code FAILED (or the code the error carries);
`-v`/`--verbose` (beam_embed.process.log) or `--debug` adds the full traceback, to a refusal
(exit 2, `refused`) too. Beam re-raises a
step's error wrapped in its own (with "[while running 'Step']"), so the line is made from the
innermost cause, plus the step's name. Ctrl-C is `prog: interrupted` and exit code INTERRUPTED
(130) wherever it lands, whatever Beam turns it into (exits.interrupts_recorded).
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import traceback

from beam_embed.process import exits
from beam_embed.process.log import is_verbose, set_verbose
from beam_embed.process.terminal import printable

DEBUG_FLAG = "--debug"
_STEP = re.compile(r"\[while running '([^']+)'\]")
# Beam logs a failing step's traceback before re-raising it; the one line says it already.
# A local run's worker processes log it to the launcher, which logs each of their lines again.
_BEAM_ERROR_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.worker.sdk_worker",
                       "apache_beam.runners.portability.fn_api_runner.fn_runner",
                       "apache_beam.runners.portability.local_job_service")
# A step that failed in a worker process reaches the launcher as the text of its traceback
_REMOTE = "Traceback (most recent call last):"
_RAISED = re.compile(r"([A-Za-z_][\w.]*): (.*)")  # a traceback's last line: `Type: message`
_OS_ERROR = re.compile(r"\[Errno (\d+)\] (.*?)(?:: '(.*)')?")  # OSError's str(), its file last


class CommandError(Exception):
    """An error whose message is already the one line to print, with its exit code."""

    def __init__(self, message: str, code: int = exits.FAILED):
        super().__init__(message)
        self.code = code


class IncompleteInput(CommandError):
    """A file a command reads is missing, cut short or damaged; the message names it."""

    def __init__(self, message: str):
        super().__init__(message, exits.INCOMPLETE_INPUT)


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and its causes, outermost first (each exception once); `raise ... from None` ends
    it, as it ends a traceback."""
    seen: list[BaseException] = []
    while exc is not None and all(exc is not s for s in seen):
        seen.append(exc)
        context = None if exc.__suppress_context__ else exc.__context__
        exc = exc.__cause__ or context or _held(exc)
    return seen


def _held(exc: BaseException) -> BaseException | None:
    """The first error a Beam IO error holds: BeamIOError collects each path's error in
    `exception_details` instead of chaining it, and prints them as a dict's repr."""
    details = getattr(exc, "exception_details", None)
    if not isinstance(details, dict):
        return None
    return next((e for e in details.values() if isinstance(e, BaseException)), None)


def _with_files(strerror: str, *files) -> str:
    named = [str(f) for f in files if f]
    return strerror + (f": {' -> '.join(named)}" if named else "")


def _remote(text: str) -> str | None:
    """The message of the error a worker process's traceback `text` ends with, as a local one
    is described (an OSError: its cause and file; else `Type: message`); None when `text` is
    not a traceback. Beam re-raises a step's error as `RuntimeError: OSError: ...`: the
    innermost type is the one that says what happened."""
    if not text.startswith(_REMOTE):
        return None
    last = next((line for line in reversed(text.splitlines())
                 if line.strip() and not line[0].isspace() and _RAISED.fullmatch(line)), None)
    if last is None:
        return None
    kind, message = _RAISED.fullmatch(_STEP.sub("", last).strip()).groups()
    while (inner := _RAISED.fullmatch(message)) and inner.group(1).endswith(("Error",
                                                                             "Exception")):
        kind, message = inner.groups()
    os_error = _OS_ERROR.fullmatch(message)
    if os_error:
        return _with_files(os_error.group(2), os_error.group(3))
    return f"{kind}: {message}"


def _describe(exc: BaseException) -> str:
    """One exception's own message, with the file it names."""
    # a library's OSError may carry a number where the text goes (distributed's TimeoutError)
    if isinstance(exc, OSError) and isinstance(exc.strerror, str) and exc.strerror:
        return _with_files(exc.strerror, exc.filename, exc.filename2)
    message = getattr(exc, "message", None)  # TensorFlow's OpError keeps its own text here
    text = str(message if isinstance(message, str) and message else exc).strip()
    remote = _remote(text)
    if remote is not None:
        return remote
    text = _STEP.sub("", text).strip()
    if not text:
        return type(exc).__name__
    if hasattr(exc, "problem_mark"):  # YAML: "while parsing ... line 3, column 5 ..."
        return " ".join(line.strip() for line in text.splitlines() if line.strip())
    return text.splitlines()[0].strip()


def one_line(exc: BaseException) -> str:
    """The message to print for `exc`: ours when we raised one, else the innermost cause, plus
    the Beam step it happened in."""
    chain = _chain(exc)
    ours = [e for e in chain if isinstance(e, CommandError)]
    cause = ours[-1] if ours else chain[-1]
    text = _describe(cause)
    if not ours and not isinstance(cause, (OSError, EOFError)) and \
            type(cause).__name__ not in text and _remote(str(cause).strip()) is None:
        text = f"{type(cause).__name__}: {text}"
    if ours:  # our message says everything already
        return text
    step = next((m.group(1) for e in chain for m in [_STEP.search(str(e))] if m), None)
    return text + (f" (in step {step})" if step else "")


def exit_code(exc: BaseException) -> int:
    return next((e.code for e in _chain(exc) if isinstance(e, CommandError)), exits.FAILED)


def report(prog: str, exc: BaseException) -> int:
    """Prints `exc` as one line (the traceback too when verbose); returns its exit code."""
    if is_verbose():
        traceback.print_exception(exc, file=sys.stderr)
    # the line names the user's paths and quotes their data: shown, never obeyed by the terminal
    print(f"{prog}: {printable(one_line(exc))}", file=sys.stderr, flush=True)
    return exit_code(exc)


def refused(prog: str, exc: BaseException, code: int = exits.BAD_CONFIG) -> int:
    """Prints a refusal (bad configuration: `exc`'s message is the line) as one line, after its
    traceback when verbose, as `report` prints any other error; returns `code`."""
    if is_verbose():
        traceback.print_exception(exc, file=sys.stderr)
    print(f"{prog}: {printable(str(exc))}", file=sys.stderr, flush=True)
    return code


def _interrupted(prog: str, exc: BaseException, verbose: bool) -> int:
    if verbose or is_verbose():
        traceback.print_exception(exc, file=sys.stderr)
    print(f"{prog}: interrupted", file=sys.stderr, flush=True)
    return exits.INTERRUPTED


def take_debug_flag(argv: list[str]) -> list[str]:
    """`--debug` is `--verbose` for errors: removed from argv, it turns on tracebacks."""
    if DEBUG_FLAG in argv:
        set_verbose(True)
    return [a for a in argv if a != DEBUG_FLAG]


def one_line_errors(prog: str):
    """Decorates a command's main(argv, **kwargs) -> exit code: every uncaught error is one
    line."""

    def wrap(main):
        @functools.wraps(main)
        def wrapped(argv=None, **kwargs):
            argv = take_debug_flag(sys.argv[1:] if argv is None else list(argv))
            verbose = is_verbose() or any(a in ("-v", "--verbose") for a in argv)
            quieted = [] if verbose else [logging.getLogger(n) for n in _BEAM_ERROR_LOGGERS]
            levels = [(log, log.level) for log in quieted]
            for log in quieted:
                log.setLevel(logging.CRITICAL)
            try:
                with exits.interrupts_recorded(verbose):
                    return main(argv, **kwargs)
            except KeyboardInterrupt as e:
                return _interrupted(prog, e, verbose)
            except Exception as e:  # every error ends here as one line  # noqa: BLE001
                if exits.interrupted():
                    return _interrupted(prog, e, verbose)
                return report(prog, e)
            finally:
                for log, level in levels:
                    log.setLevel(level)
        return wrapped

    return wrap
