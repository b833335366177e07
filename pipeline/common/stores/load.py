"""Loads a finished run into stores: each store opened (reached, its table or collection made
or checked) before any row is read, then the run's rows upserted a batch at a time, and, when
asked (`sync`), the ids the run no longer has removed. One line per store when it is done."""

from __future__ import annotations

import dataclasses
import time

from beam_embed.pipeline.common.stores import StoreTarget, opener
from beam_embed.pipeline.common.stores.rows import DEFAULT_BATCH_ROWS, RunRows
from beam_embed.process.log import log


@dataclasses.dataclass(frozen=True)
class Loaded:
    target: StoreTarget
    upserted: int
    removed: int
    seconds: float


def open_stores(targets: list[StoreTarget], width: int) -> list:
    """Every store reached and its table ready, or a ValueError naming the first that is not
    (nothing is read or written before all are)."""
    opened = []
    try:
        for target in targets:
            try:
                opened.append(opener(target)(target, width))
            except ValueError:
                raise
            except Exception as e:  # a client's own error: unreachable, refused, locked
                raise ValueError(f"{target.shown()}: cannot open the store: "
                                 f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                                 ) from e
    except ValueError:
        for store in opened:
            store.close()
        raise
    return opened


def load(rows: RunRows, stores: list, sync: bool = False,
         batch_rows: int = DEFAULT_BATCH_ROWS) -> list[Loaded]:
    began, done, seen = time.monotonic(), 0, set()
    try:
        for batch in rows.batches(batch_rows):
            for store in stores:
                store.upsert(batch)
            done += len(batch.ids)
            if sync:
                seen.update(batch.ids)
        report = []
        for store in stores:
            gone = sorted(store.ids() - seen) if sync else []
            if gone:
                store.delete(gone)
            report.append(Loaded(store.target, done, len(gone), time.monotonic() - began))
            log(f"{store.target.shown()} {store.target.table!r}: {done:,} rows upserted"
                + (f", {len(gone):,} ids the run no longer has removed" if sync else "")
                + f" ({time.monotonic() - began:.1f}s)")
        return report
    finally:
        for store in stores:
            store.close()
