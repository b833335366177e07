"""The deterministic sample: the id hash, bottom-k selection, merging, the sample file."""

import numpy as np
import pyarrow as pa

from beam_embed.pipeline.pca.sample import (
    KEY,
    TEXT_CHARS,
    SampleCombineFn,
    id_keys,
    read_sample,
    write_sample,
)


def _table(n, start=0):
    ids = [f"doc-{i}" for i in range(start, start + n)]
    return pa.table({"id": pa.array(ids), "text": pa.array([f"{i} " * 400 for i in ids]),
                     "pc_1": pa.array(np.arange(start, start + n, dtype=np.float32))})


def test_id_keys_depend_only_on_id_and_seed():
    ids = pa.array([f"doc-{i}" for i in range(50_000)] + ["", "é", "a\tb"])
    keys = id_keys(ids, seed=1)
    assert keys.dtype == np.uint64 and len(set(keys.tolist())) == len(ids)
    sliced = np.concatenate([id_keys(ids.slice(0, 7), 1), id_keys(ids.slice(7), 1)])
    np.testing.assert_array_equal(sliced, keys)
    chunked = pa.chunked_array([ids.slice(0, 100), ids.slice(100)])
    np.testing.assert_array_equal(id_keys(chunked, 1), keys)
    assert (id_keys(ids, 2) != keys).mean() > 0.99
    # the top 4 bits spread evenly: a uniform hash
    counts = np.bincount((keys >> np.uint64(60)).astype(int), minlength=16)
    assert counts.min() > 0.8 * len(ids) / 16


def test_sample_is_the_smallest_keys_however_blocks_are_split_and_merged():
    fn = SampleCombineFn(size=100, seed=4, schema=_table(1).schema)
    table = _table(2000)
    order = np.argsort(id_keys(table.column("id"), 4))[:100]
    expected = table.column("id").to_numpy(zero_copy_only=False)[order]

    accs = [fn.create_accumulator() for _ in range(4)]
    for i, start in enumerate(range(0, 2000, 130)):
        fn.add_input(accs[i % 4], _table(min(130, 2000 - start), start))
    sample = fn.extract_output(fn.merge_accumulators(accs[::-1]))
    assert sample.seen == 2000
    np.testing.assert_array_equal(sample.table.column("id").to_numpy(zero_copy_only=False),
                                  expected)
    assert KEY not in sample.table.column_names
    assert max(len(t) for t in sample.table.column("text").to_pylist()) == TEXT_CHARS


def test_small_inputs_are_kept_whole(tmp_path):
    fn = SampleCombineFn(size=100, seed=0, schema=_table(1).schema)
    sample = fn.extract_output(fn.add_input(fn.create_accumulator(), _table(30)))
    assert sample.seen == 30 and sample.table.num_rows == 30
    table, info = read_sample(write_sample(sample, str(tmp_path / "s.parquet"), seed=0))
    assert table.equals(sample.table)
    assert info["size"] == info["of"] == 30 and info["seed"] == 0
