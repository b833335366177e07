"""--shard_mb and --resume's checks that need no data: a bound under 1 MiB and a BigQuery
store (whose load would hold only the resumed attempt's rows) are refused on construction,
naming the value and what is expected."""

from __future__ import annotations

import pytest

from beam_embed.pipeline.job.settings import DEFAULT_SHARD_MB, RunSettings


@pytest.mark.parametrize("bad", [0, -5])
def test_a_shard_bound_under_one_megabyte_is_refused(bad):
    with pytest.raises(ValueError, match=rf"--shard_mb must be a number of megabytes, at least "
                                         rf"1 \(default {DEFAULT_SHARD_MB}\), got {bad}"):
        RunSettings(shard_mb=bad)


def test_resume_into_a_bigquery_store_is_refused():
    with pytest.raises(ValueError, match="--resume: the job's BigQuery load holds only"):
        RunSettings(resume=True, store=("bigquery://my-project.data.table",))
    assert RunSettings(resume=True, store=("qdrant:///tmp/q",)).resume  # loaded when published
