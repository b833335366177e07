"""BigQuery (`bigquery://PROJECT.DATASET.TABLE`): written by the job itself, a step of its
pipeline (Beam's `WriteToBigQuery`, file loads: no Java, no streaming quota), not loaded after
the run publishes as the other stores are. A Dataflow job's workers write it where they
embed.

The table's schema is one BigQuery's `VECTOR_SEARCH` reads: `id STRING` (required), `text`,
`source`, the metadata columns (STRING), and `embedding ARRAY<FLOAT64>` (a REPEATED FLOAT64
field) holding the run's first pooling as `search` reads it (int8 and binary decoded). A load
job appends or replaces, it never merges: each run replaces the table (WRITE_TRUNCATE), which
so holds the last run's rows (one a record), whatever ran before (--store_sync's result; give
each run its own table to keep several; a run without rows starts no load job, and leaves it).
The table is made when missing (CREATE_IF_NEEDED). Beam groups a table's load jobs so that a
large write, split over temporary tables, truncates once.
"""

from __future__ import annotations

import re

VECTOR = "embedding"
# BigQuery's column names (without its flexible names, which a load of JSON files refuses)
COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,299}")
RESERVED = ("_TABLE_", "_FILE_", "_PARTITION", "_ROW_TIMESTAMP", "__ROOT__", "_COLIDENTIFIER")


def table_schema(include_text: bool, metadata_columns) -> dict:
    """The table's schema, as WriteToBigQuery takes it (and the dry run shows it); a ValueError
    naming a metadata column BigQuery would refuse."""
    for column in metadata_columns:
        if not COLUMN.fullmatch(column) or column.upper().startswith(RESERVED) \
                or column == VECTOR:
            raise ValueError(f"--metadata_fields: column {column!r} is not a BigQuery column "
                             "name (letters, digits and underscores, starting with a letter or "
                             f"an underscore, at most 300, not {VECTOR!r}); leave it out for "
                             "--store bigquery://...")
    fields = [{"name": "id", "type": "STRING", "mode": "REQUIRED"}]
    if include_text:
        fields.append({"name": "text", "type": "STRING", "mode": "NULLABLE"})
    fields.append({"name": "source", "type": "STRING", "mode": "NULLABLE"})
    fields += [{"name": c, "type": "STRING", "mode": "NULLABLE"} for c in metadata_columns]
    fields.append({"name": VECTOR, "type": "FLOAT64", "mode": "REPEATED"})
    return {"fields": fields}


def table_rows(batch, include_text: bool, metadata, column: str, storage) -> list[dict]:
    """One EmbeddedBatch as the table's rows: `metadata` (field, column) pairs, `column` the
    pooling written, `storage` its StoredVectors (the vectors as stored, then read back)."""
    vectors = storage.decode(storage.encode(batch.vectors[column])).astype(float).tolist()
    rows = []
    for record, vector in zip(batch.records, vectors):
        meta = dict(record.meta)
        row = {"id": record.id}
        if include_text:
            row["text"] = record.text
        row["source"] = record.source
        row.update({c: meta.get(f) for f, c in metadata})
        row[VECTOR] = vector
        rows.append(row)
    return rows


def write_transform(target, schema):
    """The job's step writing its batches into `target` (`schema`: the run's OutputSchema;
    its first pooling is written)."""
    import functools

    import apache_beam as beam
    from apache_beam.io.gcp.bigquery import BigQueryDisposition, WriteToBigQuery

    column, storage = schema.storage()[0]
    metadata = tuple(schema.metadata())
    bq_schema = table_schema(schema.include_text, [c for _, c in metadata])
    project, dataset = target.host.rsplit(".", 1)
    rows = functools.partial(table_rows, include_text=schema.include_text, metadata=metadata,
                             column=column, storage=storage)
    return ("ToTableRows" >> beam.FlatMap(rows)
            | "WriteToBigQuery" >> WriteToBigQuery(
                table=target.table, dataset=dataset, project=project, schema=bq_schema,
                method=WriteToBigQuery.Method.FILE_LOADS,
                create_disposition=BigQueryDisposition.CREATE_IF_NEEDED,
                write_disposition=BigQueryDisposition.WRITE_TRUNCATE))
