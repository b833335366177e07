"""A run's shards checked against its own counts before the run is published: each output
format's shards hold as many rows as the run embedded records.

For runners that recompute what a lost worker held (the Dask runner): a step whose output is not
the same the second time it runs, upstream of a shuffle, could write a record twice or lose one
(the bundles of the Dask runner draw the same Python random numbers each time they run, which
covers Beam's round-robin sharding, but not everything a DoFn might do). Such a run fails
instead, and nothing is published.
"""

from __future__ import annotations

from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest
from beam_embed.pipeline.common.settings.errors import CommandError


def check_rows(folder: str) -> None:
    """A CommandError when a format's shards in `folder` (their rows read back when its
    manifest was written) do not hold exactly the records the run counted as embedded."""
    manifest = JobManifest.read(folder)
    embedded = manifest.counts.embedded
    for fmt, names in manifest.files.items():
        rows = sum(manifest.rows.get(name, 0) for name in names)
        if rows != embedded:
            raise CommandError(f"the {fmt} shards hold {rows} rows for the {embedded} records "
                               "the run embedded (a step ran again after a worker was lost "
                               "and did not repeat its output)")
