"""Vector stores a finished run is loaded into: one module per store (its client, its table or
collection made with the run's width and cosine distance, an upsert keyed by the record's id,
the removal of ids a run no longer has), and this registry of URI schemes, the one place that
says which stores exist.

Every store takes the same rows (rows.py: id, the chosen pooling's float32 vector, text, source,
the metadata columns), a batch at a time, and upserts them: loading a run twice, or a re-run of
it, leaves one point per id. The clients are an extra (`[stores]`); a missing one is one line
naming the install command. Nothing here is imported before a store is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from beam_embed.pipeline.common.stores.target import StoreTarget, parse_store_uri

# scheme -> (module of this package, the client package it imports, what it is)
STORES: dict[str, tuple[str, str, str]] = {
    "lancedb": ("lance_store", "lancedb", "a LanceDB database folder (local)"),
    "lancedb+gs": ("lance_store", "lancedb", "a LanceDB database on Cloud Storage"),
    "qdrant": ("qdrant_store", "qdrant_client", "Qdrant: local mode (qdrant:///PATH) or a server "
               "(qdrant://HOST:PORT)"),
    "milvus": ("milvus_store", "pymilvus", "Milvus Lite (milvus:///FILE.db) or a server "
               "(milvus://HOST:PORT)"),
    "postgresql": ("pgvector_store", "psycopg", "PostgreSQL with pgvector"),
    "postgres": ("pgvector_store", "psycopg", "PostgreSQL with pgvector"),
}


def opener(target: StoreTarget) -> Callable:
    """The `open_store(target, table, width)` of the store `target` names; a missing client is
    a ValueError naming the extra to install."""
    module, client, _ = STORES[target.scheme]
    if importlib.util.find_spec(client) is None:
        from beam_embed.process.versions import install_command

        raise ValueError(f"{target.uri}: the {client} package is not installed; "
                         f"{install_command('stores')}")
    return importlib.import_module(f"{__name__}.{module}").open_store


__all__ = ["STORES", "StoreTarget", "opener", "parse_store_uri"]
