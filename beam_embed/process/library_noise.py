"""Library output off unless asked for: by default a command's terminal shows only the tool's own
lines; `-v/--verbose` (or BEAM_EMBED_VERBOSE=1) shows TensorFlow's, absl's and Beam's as well.

TensorFlow reads its C++ log level from the environment when it loads, so `quiet_libraries` runs
before anything imports it (beam_embed.process.set_up, from every process entry). Its start-up
lines ("All log messages before absl::InitializeLog() ...", "Could not find cuda drivers") are
written by C++ before any level applies: `stderr_silenced` sends the process's stderr away while
TensorFlow loads (models/tf_import.py's import_tensorflow), and `stderr_held` keeps what
subprocesses write unless they fail (the sdist Beam builds for Dataflow).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings

from beam_embed.process.log import is_verbose, set_verbose, show_as_own

# TF_CPP_MIN_LOG_LEVEL 3 also drops "failed call to cuInit" (an ERROR line on every machine
# without a GPU); real failures still reach the user as Python exceptions.
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR"}
# The models layer's lines meant for the user (what a first use exports, and how long it took).
NOTICE_LOGGERS = ("beam_embed.models.export_cache",)
QUIET_LOGGERS = ("tensorflow", "absl", "tf_keras", "keras", "h5py")
# Known harmless lines that libraries log, in the launcher or forwarded from local worker
# processes. Beam 2.77's RunInference imports `resource` together with a module that needs
# PyTorch, so without PyTorch it warns that it cannot read memory use, once per batch; its
# multi-process workers warn that they have no semi-persistent directory, which only Dataflow
# gives them.
HARMLESS = ("Resource module is not available for current platform",
            "No semi_persistent_directory found")
FORWARDING_LOGGERS = ("", "apache_beam.runners.portability.local_job_service")
LIBRARIES = r"(tensorflow|tf_keras|keras|tensorflow_hub|tensorflow_text|apache_beam|google)"


class _DropHarmless(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(h in message for h in HARMLESS)


def verbose_requested(argv) -> bool:
    return is_verbose() or any(a in ("-v", "--verbose") for a in argv)


def quiet_libraries(verbose: bool, keep_levels: bool = False) -> None:
    """Quiet libraries (the default) or let them speak (`verbose`); before TensorFlow loads.
    `keep_levels`: a library logger that has a level of its own keeps it (the Python API runs
    inside a user's logging set-up)."""
    set_verbose(verbose)
    for name in NOTICE_LOGGERS:
        show_as_own(name)
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        return
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name in QUIET_LOGGERS:
        if not (keep_levels and logging.getLogger(name).level):
            logging.getLogger(name).setLevel(logging.ERROR)
    for name in FORWARDING_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropHarmless) for f in logger.filters):
            logger.addFilter(_DropHarmless())
    warnings.filterwarnings("ignore", module=LIBRARIES)


@contextlib.contextmanager
def quiet_environment_while():
    """QUIET_ENV's variables set inside the block where the process has none, and removed
    after: a library read them when it loads (TensorFlow's C++ log level stays the one it read),
    and the host process's environment is as it was."""
    added = [key for key in QUIET_ENV if key not in os.environ]
    for key in added:
        os.environ[key] = QUIET_ENV[key]
    try:
        yield
    finally:
        for key in added:
            if os.environ.get(key) == QUIET_ENV[key]:
                del os.environ[key]


@contextlib.contextmanager
def _stderr_to(file):
    """File descriptor 2 (C++ and subprocess writes included) sent to `file`, then back."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(file.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def stderr_silenced():
    """Sends the process's file descriptor 2 to /dev/null, then back."""
    with open(os.devnull, "w") as null, _stderr_to(null):
        yield


@contextlib.contextmanager
def stderr_held():
    """Holds what the block writes to file descriptor 2 (subprocesses included) in a temporary
    file and drops it, unless the block raises: then it goes to stderr after all, so a failing
    tool's own explanation still reaches the user."""
    import tempfile

    with tempfile.TemporaryFile() as held:
        try:
            with _stderr_to(held):
                yield
        except BaseException:
            held.seek(0)
            sys.stderr.buffer.write(held.read())
            sys.stderr.flush()
            raise
