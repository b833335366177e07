"""Real full disks and read-only folders for tests, where the machine lets them be mounted (root
in a container that allows mount(2)): a small tmpfs, a read-only bind mount. Each context
manager yields whether it mounted, and always unmounts (lazily: a file a failed write left open
must not keep the mount busy), so no mount outlives its test."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], check=True)


@contextlib.contextmanager
def small_disk(folder: Path, size: str):
    """`folder` (created) as a tmpfs of `size` bytes ("256k", "6m")."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
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
    try:
        yield mounted
    finally:
        if mounted:
            _unmount(folder)
