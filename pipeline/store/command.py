"""`beam-embed store`: a finished run's rows upserted into vector stores.

    beam-embed store RUN_DIR URI [URI ...] [--store_table embeddings] [--pooling mean] [--store_sync]

URIs: qdrant:///PATH (local mode) or qdrant://HOST:PORT; milvus:///FILE.db (Milvus Lite) or
milvus://HOST:PORT; postgresql://... (pgvector); lancedb:///PATH or lancedb+gs://BUCKET/PATH
(a BigQuery table is written by `beam-embed run --store bigquery://...` itself).
Each row is keyed by its id (the vector of the chosen pooling; text, source and the metadata
columns as payload or columns), so loading twice leaves one point per id; --store_sync also
removes the ids the run no longer has. Every store is reached, and its table made with the run's
width and cosine distance, before any row is read.
"""

from __future__ import annotations

import sys

from beam_embed.pipeline.common.settings.command_line import CommandParser
from beam_embed.pipeline.common.settings.errors import one_line_errors
from beam_embed.process import exits

PROG = "beam-embed store"


def parser() -> CommandParser:
    p = CommandParser(PROG, __doc__.split("\n\n")[0])
    p.add_argument("output", help="a finished run's folder (with manifest.json)")
    p.add_argument("stores", nargs="+", metavar="URI", help="one or more store URIs")
    p.add_argument("--store_table", default="embeddings",
                   help="the collection or table to upsert into (made when missing)")
    p.add_argument("--pooling", help="pooling name or column (default: the manifest's first)")
    p.add_argument("--store_sync", action="store_true",
                   help="also remove the ids the store holds that the run does not")
    p.add_argument("--batch_rows", type=int, default=2048, help="rows per upsert")
    return p


@one_line_errors(PROG)
def main(argv: list[str] | None = None) -> int:
    from beam_embed.pipeline.common.stores import IN_JOB, STORES, parse_store_uri

    try:
        args = parser().parse(sys.argv[1:] if argv is None else list(argv))
        if args.batch_rows < 1:
            raise ValueError(f"--batch_rows must be a positive integer, got {args.batch_rows}")
        targets = [parse_store_uri(uri, args.store_table) for uri in args.stores]
        for target in targets:
            if target.scheme in IN_JOB:
                here = ", ".join(s + "://" for s in STORES if s not in IN_JOB)
                raise ValueError(f"{target.shown()}: a BigQuery table is written by the job "
                                 "itself, as a step of its pipeline (beam-embed run ... --store "
                                 f"{target.shown()}); this command loads {here}")
        from beam_embed.pipeline.common.stores.load import open_stores
        from beam_embed.pipeline.common.stores.rows import run_rows

        rows = run_rows(args.output, args.pooling)
        stores = open_stores(targets, rows.width)
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return exits.BAD_CONFIG
    from beam_embed.pipeline.common.stores.load import load

    load(rows, stores, sync=args.store_sync, batch_rows=args.batch_rows)
    return 0
