"""PostgreSQL with pgvector (`postgresql://...`, libpq's URI): a table with the record's id as
primary key, its vector as `vector(WIDTH)`, text, source and the metadata columns as one jsonb
column; rows are upserted on the id (INSERT ... ON CONFLICT). Cosine distance is pgvector's
`<=>` operator."""

from __future__ import annotations

import numpy as np

from beam_embed.pipeline.common.stores.base import Store, metadata_json
from beam_embed.pipeline.common.stores.rows import RowBatch


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class PgvectorStore(Store):
    def __init__(self, target, width: int):
        super().__init__(target, width)
        import psycopg
        from psycopg import sql

        self.sql = sql
        self.conn = psycopg.connect(target.uri, connect_timeout=10, autocommit=True)
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        table = sql.Identifier(target.table)
        found = self.conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attname = 'embedding'", (target.table,)).fetchone()
        self.check_width(found[0] if found else None)
        self.conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, embedding vector({}) NOT NULL, "
            "text text, source text, metadata jsonb)").format(table, sql.Literal(width)))
        self.upsert_sql = sql.SQL(
            "INSERT INTO {} (id, embedding, text, source, metadata) VALUES "
            "(%s, %s::vector, %s, %s, %s::jsonb) ON CONFLICT (id) DO UPDATE SET "
            "embedding = EXCLUDED.embedding, text = EXCLUDED.text, source = EXCLUDED.source, "
            "metadata = EXCLUDED.metadata").format(table)

    def upsert(self, batch: RowBatch) -> None:
        rows = [(p["id"], vector_literal(v), p.get("text"), p.get("source"), metadata_json(p))
                for p, v in zip(batch.payloads, batch.vectors)]
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(self.upsert_sql, rows)

    def ids(self) -> set[str]:
        query = self.sql.SQL("SELECT id FROM {}").format(self.sql.Identifier(self.target.table))
        return {row[0] for row in self.conn.execute(query)}

    def delete(self, ids: list[str]) -> None:
        query = self.sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(
            self.sql.Identifier(self.target.table))
        for start in range(0, len(ids), 4096):
            self.conn.execute(query, (ids[start:start + 4096],))

    def close(self) -> None:
        self.conn.close()


def open_store(target, width: int) -> PgvectorStore:
    return PgvectorStore(target, width)



