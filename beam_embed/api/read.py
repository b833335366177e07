"""read_embeddings: a finished run's folder (written by `beam-embed run` or WriteEmbeddings,
local or gs://, any --vector_dtype) read into memory, as the commands read it: the manifest's
view (EmbeddingSet), the shards it lists checked (each present, rows adding up), each shard
read by its format's module, the vectors decoded to float32 (vector_dtypes.read_back)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from beam_embed.api.quiet import LOGGER

__all__ = ["StoredEmbeddings", "read_embeddings"]


@dataclasses.dataclass(frozen=True)
class StoredEmbeddings:
    """A run's records in shard order: `ids` (a list of str), `vectors` (float32
    [rows, width], one pooling's; int8 and binary runs decoded as `search` reads them),
    `table` (a pyarrow Table of the other columns: id, text when the run wrote it, source, a
    --split chunks run's parent_id, chunk_index, char_start and char_end, the metadata columns,
    num_tokens, truncated), `pooling` (the vectors' column) and `manifest`
    (the run's manifest.json, as a dict)."""

    ids: list[str]
    vectors: np.ndarray
    table: pa.Table
    pooling: str
    manifest: dict

    def __len__(self) -> int:
        return len(self.ids)


def read_embeddings(path: str, pooling: str | None = None) -> StoredEmbeddings:
    """The run in the folder `path` (local or gs://): its records with the vectors of `pooling`
    (a pooling's name or column; default the run's first), read from the first format it wrote
    that this reader reads (Parquet, then TFRecord). A missing, damaged or replaced shard (one
    whose size or SHA-256 is not the one the run recorded, or that changed while it was read)
    is an error naming it (IncompleteInput), never fewer or other rows, and so is a damaged
    manifest (not a JSON object, a key of the wrong shape, a pooling width its shards do not
    hold: never more vectors than ids); a run of an earlier
    version records no SHA-256, which is said as a warning."""
    from beam_embed.models.tf_import import import_tensorflow
    from beam_embed.pipeline.common.finished_run.embedding_set import load_embedding_set
    from beam_embed.pipeline.common.finished_run.shards import (
        check_shards,
        check_unchanged,
        unverified,
    )
    from beam_embed.pipeline.common.rows.vector_dtypes import read_back

    if path.startswith("gs://"):
        from beam_embed.process.gcs_auth import install_now

        install_now()  # credentials found in one look, as the commands find them
    found = load_embedding_set(path.rstrip("/"))
    chosen = found.pooling(pooling)
    fmt = found.first_with("read_table")
    if fmt is None:
        raise ValueError(f"{found.manifest_path} lists no shards read_embeddings reads (formats "
                         f"{sorted(found.files)})")
    if fmt.tensorflow:
        from beam_embed.process.log import library_quiet_wanted

        import_tensorflow(library_quiet_wanted())  # quietly, unless asked otherwise
    checked = check_shards(found, fmt.name)
    if not checked.verified:
        LOGGER.warning("%s", unverified(found))
    tables = [fmt.read_table(shard, found.columns, chosen, found.rows) for shard in checked.paths]
    check_unchanged(checked)  # what was read is the run the manifest describes
    table = pa.concat_tables(tables) if len(tables) != 1 else tables[0]
    vectors = read_back(table.column(chosen.column), chosen.stored(), chosen.column)
    table = table.drop_columns([chosen.column])
    return StoredEmbeddings(table.column("id").to_pylist(), vectors, table, chosen.column,
                            found.manifest.to_json())
