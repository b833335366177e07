"""prefetched: the same items in order, read ahead on a thread, errors where they happened,
and a producer that stops when the consumer does."""

import threading

import pytest

from beam_embed.pipeline.common.output_formats.prefetch import prefetched


def _counting(n, log, fail_at=None):
    for i in range(n):
        if i == fail_at:
            raise ValueError(f"item {i} is bad")
        log.append(i)
        yield i


def test_same_items_in_order():
    log = []
    assert list(prefetched(_counting(50, log), depth=3)) == list(range(50)) == log


def test_items_are_made_ahead_while_the_consumer_works():
    made = threading.Event()

    def items():
        yield "first"
        made.set()  # reached only if someone asks for the second item
        yield "second"

    it = prefetched(items(), depth=2)
    assert next(it) == "first"
    assert made.wait(timeout=5), "the second item was not made while the first was in use"
    assert list(it) == ["second"]


def test_an_error_comes_where_its_item_would_have():
    got = []
    with pytest.raises(ValueError, match="item 3 is bad"):
        for item in prefetched(_counting(10, [], fail_at=3)):
            got.append(item)
    assert got == [0, 1, 2]


def test_closing_early_stops_and_joins_the_producer():
    log = []
    it = prefetched(_counting(1000, log), depth=2)
    assert next(it) == 0
    it.close()
    assert not any(t.name == "prefetch" and t.is_alive() for t in threading.enumerate())
    assert len(log) <= 4  # the item in hand, `depth` waiting, one being offered
