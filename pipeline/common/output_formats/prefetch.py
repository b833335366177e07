"""An iterator's next items made on a thread while the caller works on the current one.

Reading a Parquet row group (decompression, list levels -> arrays) and the work done on it
(BLAS, Arrow writes) both run in C with the GIL released, so with the reading on a thread a
worker keeps two cores busy instead of alternating between the two kinds of work on one. At
most `depth` items wait, so memory stays bounded by the item size.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
_END = object()


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


def prefetched(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """Yields what `items` yields, in order, `items` advanced on a thread up to `depth` items
    ahead. An exception raised by `items` is raised here, where its item would have come; when
    the caller stops early (closes the generator), the thread stops at its next item and is
    waited for, so nothing the items use (an open file) is touched after this returns."""
    ready: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def offer(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not offer(item):
                    return
        except BaseException as e:  # noqa: BLE001  (handed to the consumer, raised there)
            offer(_Failed(e))
            return
        offer(_END)

    worker = threading.Thread(target=produce, name="prefetch", daemon=True)
    worker.start()
    try:
        while (item := ready.get()) is not _END:
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        worker.join()
