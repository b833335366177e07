"""A finished run's rows as the stores take them, a batch at a time: ids, the chosen pooling's
vectors as float32 (int8 and binary runs decoded as `search` reads them), and each row's payload
(text, source, a chunk's parent id and offsets, the metadata columns). Shards are read one at a time and checked as every reader
checks them (listed, sizes and SHA-256 as recorded, unchanged while read)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from beam_embed.pipeline.common.output_formats.schema import CHUNK_COLUMNS

DEFAULT_BATCH_ROWS = 2048


@dataclasses.dataclass(frozen=True)
class RowBatch:
    ids: list[str]
    vectors: np.ndarray  # float32 [rows, width]
    payloads: list[dict]  # id, text (when the run wrote it), source, chunk columns, metadata


@dataclasses.dataclass(frozen=True)
class RunRows:
    """The run in `folder`, its pooling `column` (width `width`), `count` rows in all."""
    folder: str
    pooling: str
    column: str
    width: int
    count: int
    payload_columns: tuple[str, ...]
    model: str

    def batches(self, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[RowBatch]:
        from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set
        from beam_embed.pipeline.common.finished_run.shards import check_shards, check_unchanged
        from beam_embed.pipeline.common.rows.vector_dtypes import read_back

        found = load_embedding_set(self.folder)
        chosen = found.pooling(self.column)
        fmt = found.first_with("read_table")
        if fmt.tensorflow:
            from beam_embed.models.tf_import import import_tensorflow

            import_tensorflow()
        checked = check_shards(found, fmt.name)
        for shard in checked.paths:
            table = fmt.read_table(shard, found.columns, chosen, found.rows)
            vectors = read_back(table.column(chosen.column), chosen.stored(), chosen.column)
            columns = {c: table.column(c).to_pylist() for c in self.payload_columns}
            for start in range(0, table.num_rows, batch_rows):
                stop = min(start + batch_rows, table.num_rows)
                payloads = [{c: columns[c][i] for c in self.payload_columns}
                            for i in range(start, stop)]
                yield RowBatch([p["id"] for p in payloads],
                               np.ascontiguousarray(vectors[start:stop], dtype=np.float32),
                               payloads)
        check_unchanged(checked)


def run_rows(folder: str, pooling: str | None) -> RunRows:
    """The run's rows to load; a ValueError naming what is wrong (no manifest, no such pooling,
    no shards a store can read)."""
    from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set

    found = load_embedding_set(folder.rstrip("/"))
    chosen = found.pooling(pooling)
    if found.first_with("read_table") is None:
        raise ValueError(f"{found.manifest_path} lists no shards a store can be loaded from "
                         f"(formats {sorted(found.files)})")
    payload = ("id",) + (("text",) if found.has_text else ()) + ("source",) + \
        (CHUNK_COLUMNS if found.chunks else ()) + found.metadata_columns
    return RunRows(folder.rstrip("/"), chosen.name, chosen.column, chosen.width, int(found.counts.embedded or 0), payload,
                   str(found.model.name))
