"""models/fixed_shapes.py: one batch size per length bucket, and the plan that keeps calls in
those shapes (numpy only: the XLA calls themselves are in test_xla_encoder.py)."""

from __future__ import annotations

import numpy as np
import pytest

from beam_embed.models.fixed_shapes import ROW_MULTIPLE, SEQ_BUCKETS, FixedShapes


def test_each_bucket_has_one_batch_size_under_the_token_budget():
    shapes = FixedShapes.of(16384, 512, SEQ_BUCKETS, 256)
    assert shapes.lengths == (8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
    for rows, length in shapes.shapes():
        assert rows % ROW_MULTIPLE == 0 and rows <= 512
        assert rows * length <= 16384
        # the largest multiple of 8 under the budget: 8 more rows would break it or the cap
        assert (rows + ROW_MULTIPLE) * length > 16384 or rows + ROW_MULTIPLE > 512
    assert shapes.rows(48) == 336 and shapes.rows(256) == 64
    # a length that is no bucket caps the list: --max_seq_length 100
    assert FixedShapes.of(16384, 512, SEQ_BUCKETS, 100).lengths[-2:] == (96, 100)


def test_a_budget_too_small_for_eight_rows_still_runs_eight():
    assert FixedShapes.of(256, 64, SEQ_BUCKETS, 64).rows(64) == 8
    assert FixedShapes.of(256, 4, SEQ_BUCKETS, 64).rows(8) == 4  # never above --max_batch_size


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_plan_covers_every_row_once_in_known_shapes_padding_only_the_last_call(seed):
    rng = np.random.default_rng(seed)
    shapes = FixedShapes.of(2048, 128, SEQ_BUCKETS, 128)
    tokens = rng.integers(3, 129, rng.integers(1, 400))
    calls = shapes.plan(tokens)
    seen = np.concatenate([index for index, _ in calls])
    assert sorted(seen.tolist()) == list(range(len(tokens)))
    for k, (index, (rows, length)) in enumerate(calls):
        assert (rows, length) in shapes.shapes()
        assert tokens[index].max() <= length  # every row fits its call's length
        assert len(index) == rows or k == len(calls) - 1  # only the last call has padding
    assert len({shape for _, shape in calls}) <= len(shapes.lengths)
