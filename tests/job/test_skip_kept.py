"""--resume's reading filter: the records a kept shard set holds are dropped, every other record
passes once, whether it ends a block of lookups or the bundle."""

from __future__ import annotations

import random

import apache_beam as beam
import numpy as np
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beam_embed.pipeline.common.rows.records import Record
from beam_embed.pipeline.common.run_folder.committed_shards import record_key
from beam_embed.pipeline.job.resume import SkipKept


def _records(n: int) -> list[Record]:
    return [Record(id=f"a.txt:{i}", text=f"sentence {i % 997}", source="a.txt") for i in range(n)]


def _keys_file(tmp_path, records) -> str:
    path = tmp_path / "kept.keys"
    keys = np.sort(np.array([record_key(r) for r in records], np.uint64))
    path.write_bytes(keys.astype("<u8").tobytes())
    return str(path)


def test_kept_records_are_dropped_and_the_rest_pass_once(tmp_path):
    records = _records(SkipKept.BLOCK * 3 + 17)  # full blocks, then a part block at the end
    rng = random.Random(7)
    kept = rng.sample(records, len(records) // 2)
    kept_keys = {record_key(r) for r in kept}
    assert len(kept_keys) == len(kept)  # the test's records have distinct keys
    path = _keys_file(tmp_path, kept)
    expected = [r.id for r in records if record_key(r) not in kept_keys]
    with TestPipeline() as p:
        passed = (p | beam.Create(records, reshuffle=False) | beam.ParDo(SkipKept(path))
                  | beam.Map(lambda r: r.id))
        assert_that(passed, equal_to(expected))


def test_keys_above_and_below_every_kept_key_pass(tmp_path):
    records = _records(50)
    by_key = sorted(records, key=record_key)
    kept = by_key[20:30]  # the smallest and largest keys are not kept
    path = _keys_file(tmp_path, kept)
    with TestPipeline() as p:
        passed = (p | beam.Create(records, reshuffle=False) | beam.ParDo(SkipKept(path))
                  | beam.Map(lambda r: r.id))
        assert_that(passed, equal_to([r.id for r in by_key[:20] + by_key[30:]]))
