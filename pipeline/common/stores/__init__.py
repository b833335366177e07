"""Vector stores a finished run is loaded into: one module per store (its client, its table or
collection made with the run's width and cosine distance, an upsert keyed by the record's id,
the removal of ids a run no longer has), and this registry of URI schemes, the one place that
says which stores exist.

Every store takes the same rows (rows.py: id, the chosen pooling's float32 vector, text, source,
the metadata columns), a batch at a time, and upserts them: loading a run twice, or a re-run of
it, leaves one point per id. The clients are an extra (`[stores]`); a missing one is one line
naming the install command. Nothing here is imported before a store is asked for.

May import: beam_embed.pipeline.common.finished_run (a run as its readers see it),
.output_formats (the schema's columns), .rows, .settings, and the store clients inside
functions. Nothing else of beam_embed.pipeline.common imports this.
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
    "bigquery": ("bigquery_store", "google.cloud.bigquery", "a BigQuery table "
                 "(bigquery://PROJECT.DATASET.TABLE), written by the job itself"),
}
# Stores the job writes as a step of its pipeline (where its workers are), not loaded after it
# publishes: no `open_store`, and `beam-embed store` does not load them.
IN_JOB = ("bigquery",)


def in_job(targets: list[StoreTarget]) -> tuple[list[StoreTarget], list[StoreTarget]]:
    """(the targets the job writes itself, those loaded once it publishes)."""
    return ([t for t in targets if t.scheme in IN_JOB],
            [t for t in targets if t.scheme not in IN_JOB])


def opener(target: StoreTarget) -> Callable:
    """The `open_store(target, table, width)` of the store `target` names; a missing client is
    a ValueError naming the extra to install."""
    check_client(target)
    module = STORES[target.scheme][0]
    return importlib.import_module(f"{__name__}.{module}").open_store


def check_client(target: StoreTarget) -> None:
    """A ValueError naming the extra to install when the store's client is missing."""
    client = STORES[target.scheme][1]
    if _missing(client):
        from beam_embed.process.versions import install_command

        extra = None if target.scheme in IN_JOB else "stores"  # BigQuery's: Beam's [gcp]
        raise ValueError(f"{target.uri}: the {client} package is not installed; "
                         f"{install_command(extra)}")


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return True


__all__ = ["IN_JOB", "STORES", "StoreTarget", "check_client", "in_job", "opener",
           "parse_store_uri"]
