"""A run whose shards do not hold exactly the records it embedded is refused before it is
published (what a Dask run checks: a step that ran again after a worker was lost)."""

from __future__ import annotations

import pytest

from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest
from beam_embed.pipeline.common.settings.errors import CommandError
from beam_embed.pipeline.job.complete import check_rows


def _manifest(folder, rows: dict, embedded: int) -> None:
    JobManifest.from_json({
        "model": {"name": "m"}, "poolings": [], "counts": {"embedded": embedded},
        "files": {"parquet": sorted(n for n in rows if n.endswith(".parquet")),
                  "tfrecord": sorted(n for n in rows if n.endswith(".tfrecord"))},
        "rows": rows}).write(str(folder))


def test_shards_that_hold_every_record_once_pass(tmp_path):
    _manifest(tmp_path, {"a.parquet": 3, "b.parquet": 4, "a.tfrecord": 7}, 7)
    check_rows(str(tmp_path))


@pytest.mark.parametrize("rows, fmt, held", [
    ({"a.parquet": 3, "b.parquet": 5, "a.tfrecord": 7}, "parquet", 8),  # one written twice
    ({"a.parquet": 3, "b.parquet": 4, "a.tfrecord": 6}, "tfrecord", 6),  # one lost
])
def test_shards_with_a_record_twice_or_missing_are_refused(tmp_path, rows, fmt, held):
    _manifest(tmp_path, rows, 7)
    with pytest.raises(CommandError, match=f"the {fmt} shards hold {held} rows for the 7 "
                                           "records the run embedded"):
        check_rows(str(tmp_path))
