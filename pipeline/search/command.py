"""`beam-embed search`: the records of an embedding job's output closest in meaning to a query.

    beam-embed search OUTPUT_DIR "query text" ["another query" ...] [-k 10] [--pooling mean]

Each query is embedded with the model, pooling, normalization and length settings recorded in
OUTPUT_DIR/manifest.json (the model's fingerprint is checked first), then the Parquet shards are
scanned once for all queries, block by block (scan.py): exact cosine top k, bounded memory.
Prints rank, score, id and text, marking words shared with the query (highlight.py).
`--model` points at the model when the recorded handle moved; it must be the same model.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time

from pipeline.common.manifest import PoolingColumn, fingerprint, load_embedding_set
from pipeline.search.highlight import STYLES, highlight, query_words
from pipeline.search.index import building, check_local, index_blocks, open_index
from pipeline.search.scan import DEFAULT_BLOCK_ROWS, Hit, parquet_blocks, resolve_hits, top_k

DEFAULT_MAX_CHARS = 300


@dataclasses.dataclass(frozen=True)
class Corpus:
    """What search needs of a finished run: one pooling column in its Parquet shards."""

    folder: str
    model: dict
    pooling: PoolingColumn
    shards: list[str]
    has_text: bool
    finished_at: str


def load_corpus(folder: str, pooling: str | None) -> Corpus:
    found = load_embedding_set(folder)
    chosen = found.pooling(pooling)
    shards = found.files.get("parquet")
    if not shards:
        raise ValueError(f"{found.manifest_path} lists no Parquet shards (formats "
                         f"{sorted(found.files)}); search reads Parquet: rerun the job with "
                         "--format parquet")
    return Corpus(folder, found.model, chosen, list(shards), found.has_text, found.finished_at)


def query_handles(corpus: Corpus, model: str | None) -> tuple[str, str, str | None]:
    """(kind, encoder, preprocessor) of the model that embedded the corpus, checked by
    fingerprint: a different model's vectors are not comparable with the stored ones."""
    from models.presets import resolve

    recorded, m = corpus.model["fingerprint"], corpus.model
    if model is not None:
        spec = resolve(model)
        found = fingerprint(spec.encoder, spec.preprocessor)
        if found != recorded:
            raise ValueError(
                f"--model {model!r} is {spec.name} (fingerprint {found}), but {corpus.folder} was "
                f"embedded with {m['name']} (fingerprint {recorded}); a query must be embedded "
                "with the model of the stored vectors")
        return spec.kind, spec.encoder, spec.preprocessor
    found = fingerprint(m["encoder"], m["preprocessor"])
    if found != recorded:
        raise ValueError(
            f"the model {m['name']} at {m['encoder']!r} is missing or changed since "
            f"{corpus.folder} was embedded (fingerprint {found}, manifest {recorded}); pass "
            "--model with a copy of the original model")
    return m["kind"], m["encoder"], m["preprocessor"]


def build_embedder(corpus: Corpus, model: str | None):
    """The run's own encoder settings, for embedding queries."""
    from models.spec import encoder_spec

    kind, encoder, preprocessor = query_handles(corpus, model)
    p, m = corpus.pooling, corpus.model
    return encoder_spec(encoder=encoder, preprocessor=preprocessor, kind=kind,
                        max_seq_length=m["max_seq_length"], poolings=(p.name,),
                        normalize=p.normalize, long_text=m.get("long_text", "truncate"),
                        name=m.get("name")).build()


def _blocks(corpus: Corpus, use_index: bool, block_rows: int):
    """(vector blocks in scan order, where they come from, for the log line)."""
    p = corpus.pooling
    if not use_index:
        return (parquet_blocks(corpus.shards, p.column, p.width, block_rows),
                f"{len(corpus.shards)} Parquet shard(s)")
    index = open_index(corpus)
    if index is None:
        return building(corpus, block_rows), "Parquet, building the search index"
    return index_blocks(index, block_rows), "the search index"


def _shown(text: str | None, max_chars: int) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    return text if max_chars <= 0 or len(text) <= max_chars else text[:max_chars - 1] + "…"


def format_hits(query: str, hits: list[Hit], style: str, max_chars: int) -> str:
    words = query_words(query)
    width = max((len(h.id) for h in hits), default=0)
    lines = [f"{i:>3}. {h.score:.4f}  {h.id:<{width}}  "
             f"{highlight(_shown(h.text, max_chars), words, style)}".rstrip()
             for i, h in enumerate(hits, 1)]
    return "\n".join([f"query: {query}"] + lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="beam-embed search", description=__doc__.split("\n\n")[0])
    p.add_argument("output", help="the embedding job's output folder (with manifest.json)")
    p.add_argument("queries", nargs="+", metavar="QUERY", help="one or more queries")
    p.add_argument("-k", type=int, default=10, help="hits per query (default 10)")
    p.add_argument("--pooling", help="pooling name or column (default: the manifest's first)")
    p.add_argument("--model", help="the same model at another place (checked by fingerprint)")
    p.add_argument("--highlight", choices=["auto", *STYLES], default="auto",
                   help="shared words: bold on a terminal, **markdown** otherwise (auto)")
    p.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS,
                   help=f"longest text shown (default {DEFAULT_MAX_CHARS}; 0: all)")
    p.add_argument("--block-rows", type=int, default=DEFAULT_BLOCK_ROWS,
                   help="records scored per block: the memory bound "
                        f"(default {DEFAULT_BLOCK_ROWS})")
    p.add_argument("--index", action="store_true",
                   help="build (first time) and reuse OUTPUT/search-index/COLUMN.npy: faster "
                        "repeated searches of large outputs (local folders only)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = p.parse_args(argv)
    for flag, value in (("-k", args.k), ("--block-rows", args.block_rows)):
        if value < 1:
            p.error(f"{flag} must be a positive integer, got {value}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        corpus = load_corpus(args.output.rstrip("/"), args.pooling)
        if args.index:
            check_local(corpus.folder)
        embedder = build_embedder(corpus, args.model)
    except ValueError as e:
        print(f"beam-embed search: {e}", file=sys.stderr)
        return 2
    p = corpus.pooling
    queries = embedder.embed(list(args.queries)).vectors[p.column]
    began = time.monotonic()
    blocks, source = _blocks(corpus, args.index, args.block_rows)
    best, rows = top_k(blocks, queries, args.k, normalized=args.index or p.normalize)
    hits = resolve_hits(corpus.shards, best, corpus.has_text)
    print(f"{corpus.model['name']}, pooling {p.name}: {rows} records from {source} in "
          f"{time.monotonic() - began:.2f}s", file=sys.stderr)
    if args.json:
        print(json.dumps([{"query": q, "hits": [dataclasses.asdict(h) for h in found]}
                          for q, found in zip(args.queries, hits)], ensure_ascii=False))
        return 0
    style = args.highlight if args.highlight != "auto" else (
        "bold" if sys.stdout.isatty() else "markdown")
    print("\n\n".join(format_hits(q, found, style, args.max_chars)
                      for q, found in zip(args.queries, hits)))
    return 0
