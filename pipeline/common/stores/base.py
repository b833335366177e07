"""What every store module gives the loader: a Store with `upsert(batch)`, `ids()` (every id
it holds, for --store_sync), `delete(ids)` and `close()`; and the checks they share."""

from __future__ import annotations

import abc
import json

from beam_embed.pipeline.common.stores.rows import RowBatch


class Store(abc.ABC):
    def __init__(self, target, width: int):
        self.target, self.width = target, width

    @abc.abstractmethod
    def upsert(self, batch: RowBatch) -> None: ...

    @abc.abstractmethod
    def ids(self) -> set[str]: ...

    @abc.abstractmethod
    def delete(self, ids: list[str]) -> None: ...

    def close(self) -> None:  # noqa: B027 - most clients need no closing
        """Releases the client (Qdrant's local mode holds its folder while open)."""

    def check_width(self, found: int | None) -> None:
        """An existing table or collection of another width is another run's: refused."""
        if found is not None and int(found) != self.width:
            raise ValueError(f"{self.target.shown()}: {self.target.table!r} holds vectors of "
                             f"width {found}, this run's are {self.width} wide; load it into "
                             "another --store_table, or drop that one first")


def metadata_json(payload: dict) -> str:
    """The metadata columns of a payload (everything but id, text, source) as one JSON object,
    for stores with a fixed schema."""
    return json.dumps({k: v for k, v in payload.items() if k not in ("id", "text", "source")},
                      ensure_ascii=False, sort_keys=True)
