"""What a job's own process never imports.

pandas (~0.2-0.5 s to import on 2 cores, measured) is imported twice over in a job's process
without ever being handed a value: by Beam, only to register converters between Beam schemas and
pandas DataFrames (`apache_beam/typehints/__init__.py` goes on without them when the import
fails), and by pyarrow, only to ask whether each array it converts is a pandas object (its
pandas shim takes a failed import as "no pandas"). The job's PCollections hold Records and numpy
batches, its sinks build Arrow arrays from numpy and lists. So the process entries of the job
(`python -m pipeline.run`, `beam-embed run`) refuse the import for the life of the process.
Only there: a process that calls the job's `main` as a library (tests, notebooks) may use pandas
with pyarrow afterwards, which the refusal would break.
"""

from __future__ import annotations

import sys

NEVER_IMPORTED = ("pandas",)


class _Refuse:
    """A meta path finder that fails the import of NEVER_IMPORTED as if it were not installed
    (a None entry in sys.modules would do for Beam, but pyarrow's shim reads sys.modules)."""

    def find_spec(self, name, path=None, target=None):
        if name in NEVER_IMPORTED:
            raise ModuleNotFoundError(f"{name} is not imported in a beam-embed job's process",
                                      name=name)
        return None


def refuse_unused_imports() -> None:
    if not any(isinstance(f, _Refuse) for f in sys.meta_path):
        sys.meta_path.insert(0, _Refuse())
