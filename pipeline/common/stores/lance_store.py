"""LanceDB (`lancedb:///PATH`, `lancedb+gs://BUCKET/PATH`): a table whose `vector` column is a
fixed-size list of float32 of the run's width, beside id, text, source, a chunk run's parent_id
and offsets (int64) and the metadata columns (strings); rows are upserted on the id (merge_insert). Search it with cosine distance
(`.search(q).distance_type("cosine")`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from beam_embed.pipeline.common.output_formats.schema import CHUNK_COLUMNS
from beam_embed.pipeline.common.stores.base import Store
from beam_embed.pipeline.common.stores.rows import RowBatch


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class LanceStore(Store):
    def __init__(self, target, width: int):
        super().__init__(target, width)
        import lancedb

        self.db = lancedb.connect(target.path or target.host)
        self.table = None
        if target.table in self.db.list_tables().tables:
            self.table = self.db.open_table(target.table)
            self.check_width(self.table.schema.field("vector").type.list_size)

    def _arrow(self, batch: RowBatch) -> pa.Table:
        columns = {k: pa.array([p.get(k) for p in batch.payloads],
                               pa.int64() if k in CHUNK_COLUMNS[1:] else pa.string())
                   for k in batch.payloads[0]} if batch.payloads else {}
        flat = pa.array(np.asarray(batch.vectors, np.float32).reshape(-1))
        columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, self.width)
        return pa.table(columns)

    def upsert(self, batch: RowBatch) -> None:
        data = self._arrow(batch)
        if self.table is None:
            self.table = self.db.create_table(self.target.table, data=data)
            return
        self.table.merge_insert("id").when_matched_update_all() \
            .when_not_matched_insert_all().execute(data)

    def ids(self) -> set[str]:
        if self.table is None:
            return set()
        rows = self.table.count_rows()
        return set(self.table.search().select(["id"]).limit(rows).to_arrow().column("id")
                   .to_pylist()) if rows else set()

    def delete(self, ids: list[str]) -> None:
        for start in range(0, len(ids), 1024):
            self.table.delete(f"id IN ({', '.join(map(_quoted, ids[start:start + 1024]))})")


def open_store(target, width: int) -> LanceStore:
    return LanceStore(target, width)
