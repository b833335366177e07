"""Imports a process refuses: for its whole life (a job's process never imports pandas, see
job_process.py), or while a block runs (TensorFlow's eager import of Keras, see
models/tf_import.py). A refused import fails as if the module were not installed; the libraries
concerned take that failure as "not available" and go on."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator


class _Refuse:
    """A meta path finder that fails the import of its names as if they were not installed
    (a None entry in sys.modules would do for Beam, but pyarrow's shim reads sys.modules)."""

    def __init__(self):
        self.names: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        if name in self.names:
            raise ModuleNotFoundError(f"{name} is not imported in this beam-embed process",
                                      name=name)
        return None


def refuse(names: Iterable[str]) -> None:
    """`names` refused from now on; a module already imported stays."""
    finder = next((f for f in sys.meta_path if isinstance(f, _Refuse)), None)
    if finder is None:
        finder = _Refuse()
        sys.meta_path.insert(0, finder)
    finder.names.update(names)


@contextlib.contextmanager
def refused_while(name: str) -> Iterator[None]:
    """`import name` raises ImportError inside the block (a None entry in sys.modules: the
    import system's own "not importable"), when nothing imported it before; after the block
    the module imports as usual."""
    stub = name not in sys.modules
    if stub:
        sys.modules[name] = None
    try:
        yield
    finally:
        if stub and sys.modules.get(name, ...) is None:
            del sys.modules[name]
