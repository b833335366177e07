"""SortAndBatchWindows: every element batched once, budgets kept, the sort buffer bounded."""

import random

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_embed.pipeline.job.batching import SortAndBatchWindows, _WindowedSortAndBatchDoFn
from beam_embed.process.private_apis.beam import batch_buffer


def _sizes(n, seed=0):
    rng = random.Random(seed)
    return [rng.choice([rng.randint(1, 30), rng.randint(60, 200)]) for _ in range(n)]


def _run_dofn(elements, window, max_size=16, max_weight=400, first_window=None, cuts=None):
    fn = _WindowedSortAndBatchDoFn(1, max_size, max_weight, lambda e: e[1], window, first_window)
    fn.start_bundle()
    batches, largest_buffer = [], 0
    for i, e in enumerate(elements):
        out = [list(b) for b in fn.process(e)]
        if out and cuts is not None:
            cuts.append(i + 1)
        batches += out
        largest_buffer = max(largest_buffer, len(batch_buffer(fn)))
    batches += [list(wv.value) for wv in fn.finish_bundle()]
    return batches, largest_buffer


def test_the_first_window_is_cut_early_then_windows_are_full():
    """The encoder gets its first batches after `first_window` elements, not a whole window."""
    elements = list(enumerate(_sizes(3000, seed=4)))
    cuts = []
    batches, _ = _run_dofn(elements, window=512, first_window=64, cuts=cuts)
    assert cuts[0] == 64
    # every later cut waits for a full window (plus the longest batch carried over)
    assert all(512 - 16 <= b - a <= 512 for a, b in zip(cuts, cuts[1:]))
    assert sorted(e for b in batches for e in b) == elements


def test_every_element_once_within_budgets_and_a_bounded_buffer():
    elements = list(enumerate(_sizes(5000)))
    batches, largest_buffer = _run_dofn(elements, window=256)
    flat = [e for b in batches for e in b]
    assert sorted(flat) == elements  # nothing lost, nothing twice
    for b in batches:
        assert len(b) <= 16
        assert len(b) == 1 or sum(e[1] for e in b) < 400
    # the buffer never holds more than a window plus the batch carried over
    assert largest_buffer <= 256 + 16
    assert len(batches) > 5000 // 16  # batches were cut all along, not only at the end


def test_batches_of_a_window_are_length_sorted_like_beams():
    """With the window as big as the bundle, the batches are exactly Beam's."""
    from beam_embed.process.private_apis.beam import sort_and_batch_dofn

    elements = list(enumerate(_sizes(700, seed=1)))
    ours, _ = _run_dofn(elements, window=10_000)
    beams = sort_and_batch_dofn()(1, 16, 400, lambda e: e[1])
    beams.start_bundle()
    for e in elements:
        beams.process(e)
    assert ours == [list(wv.value) for wv in beams.finish_bundle()]
    sizes = [e[1] for b in ours for e in b]
    assert sizes == sorted(sizes)


def test_small_windows_keep_padding_close_to_one_big_sort():
    """Padding (batch rows x longest, over real size) with windows of 32 batches stays within
    5% of sorting everything at once."""
    elements = list(enumerate(_sizes(6000, seed=2)))

    def padding(batches):
        real = sum(e[1] for b in batches for e in b)
        return sum(len(b) * max(e[1] for e in b) for b in batches) / real

    windowed, _ = _run_dofn(elements, window=32 * 16)
    whole, _ = _run_dofn(elements, window=len(elements) + 1)
    assert padding(windowed) <= 1.05 * padding(whole)


def test_in_a_pipeline():
    elements = list(enumerate(_sizes(1000, seed=3)))
    with beam.Pipeline() as p:
        batches = (p | beam.Create(elements)
                   | SortAndBatchWindows(1, 16, 400, lambda e: e[1], window=100))
        assert_that(batches | beam.FlatMap(lambda b: b), equal_to(elements))
