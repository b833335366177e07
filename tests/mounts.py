"""Real full disks and read-only folders for tests, where the machine lets them be mounted (root
in a container that allows mount(2)): a small tmpfs, a read-only bind mount. Each context
manager yields whether it mounted, and always unmounts (lazily: a file a failed write left open
must not keep the mount busy), so no mount outlives its test. Where none can be mounted the test
patches the error in instead; which of the two each test ran is listed at the end of the run
(tests/conftest.py), so a CI log says whether the real mount was used."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

# (test, what it mounts, whether it was mounted), in the order the tests ran
RAN: list[tuple[str, str, bool]] = []


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _ran(what: str, mounted: bool) -> None:
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
    RAN.append((test, what, mounted))


def summary() -> list[str]:
    """One line per test that asked for a mount: the real one, or the patched error."""
    return [f"{test}: " + (f"a real {what}" if mounted else
                           f"no {what} could be mounted here: its error was patched in")
            for test, what, mounted in RAN]


def _unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], check=True)


@contextlib.contextmanager
def small_disk(folder: Path, size: str):
    """`folder` (created) as a tmpfs of `size` bytes ("256k", "6m")."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
    _ran(f"{size} tmpfs (a full disk)", mounted)
    try:
        yield mounted
    finally:
        if mounted:
            _unmount(folder)


@contextlib.contextmanager
def read_only(folder: Path):
    """`folder`, with what it holds, mounted read-only over itself."""
    mounted = _mount("--bind", str(folder), str(folder))
    if mounted and not _mount("-o", "remount,ro,bind", str(folder)):
        _unmount(folder)
        mounted = False
    _ran("read-only bind mount", mounted)
    try:
        yield mounted
    finally:
        if mounted:
            _unmount(folder)
