"""`beam-embed search`: the records of an embedding job's output closest in meaning to a query.

    beam-embed search OUTPUT_DIR "query text" ["another query" ...] [-k 10] [--pooling mean]

Each query is embedded with the model, pooling, normalization and length settings recorded in
OUTPUT_DIR/manifest.json (the model's fingerprint is checked first), then the Parquet shards are
scanned once for all queries, block by block (scan.py): exact cosine top k, bounded memory.
Prints rank, score, id and text, marking words shared with the query (highlight.py). Hits of
one text are shown once, with how many records hold it (`--no-collapse`: every record).
`--model` points at the model when the recorded handle moved; it must be the same model.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
import unicodedata

from beam_embed.models.tf_import import import_tensorflow
from beam_embed.pipeline.common.settings.command_line import CommandParser
from beam_embed.pipeline.common.settings.errors import one_line_errors, refused
from beam_embed.pipeline.search.highlight import STYLES, highlight, query_words
from beam_embed.pipeline.search.limits import (
    COLLAPSE_CANDIDATES,
    DEFAULT_BLOCK_ROWS,
    DEFAULT_K,
    DEFAULT_MAX_CHARS,
    QUERY_SHOWN_CHARS,
)
from beam_embed.process.log import log
from beam_embed.process.terminal import json_printable, printable

PROG = "beam-embed search"


def _shown(text: str | None, max_chars: int) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    return text if max_chars <= 0 or len(text) <= max_chars else text[:max_chars - 1] + "…"


def format_hits(query: str, hits: list, style: str, max_chars: int) -> str:
    """`hits`: scan.Hit values, best first. Texts and ids come from the corpus and the query
    from the command line: their control characters are shown as escapes (terminal.py) before
    the highlight adds its own, on a terminal and in a pipe alike (a pipe often ends in `less
    -R` or a terminal)."""
    words = query_words(query)
    ids = [printable(h.id) for h in hits]
    width = max(map(len, ids), default=0)
    lines = [f"{i:>3}. {h.score:.4f}  {shown_id:<{width}}  "
             f"{highlight(printable(_shown(h.text, max_chars)), words, style)}".rstrip()
             + (f"  (and {h.copies - 1} more with this text)" if h.copies > 1 else "")
             for i, (h, shown_id) in enumerate(zip(hits, ids), 1)]
    return "\n".join([f"query: {printable(_shown(query, QUERY_SHOWN_CHARS))}"] + lines)


def blank_query(query: str) -> bool:
    """Nothing to search for: only whitespace and control or format characters, which the
    tokenizers drop (BERT's removes Cc and Cf), leaving a query of [CLS] [SEP] alone."""
    return all(c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in query)


def cut_queries(num_tokens, truncated, max_tokens: int | None) -> list[str]:
    """One line per query the model read only the start of (an Embedded's `num_tokens` and
    `truncated`; a run with --long-text chunk reads every query whole)."""
    return [f"query {i} is {int(n):,} tokens long; only its first {max_tokens:,} were used (the "
            "model's max_seq_length), the rest was ignored"
            for i, (n, cut) in enumerate(zip(num_tokens, truncated), 1) if cut]


def _collapsing(asked: bool | None, has_text: bool) -> bool:
    """Hits of one text are collapsed by default: a run with repeated texts (the same
    paragraph in several documents) would fill the top k with copies. It needs the texts."""
    if asked and not has_text:
        raise ValueError("--collapse folds hits of the same text, and this run stored no text "
                         "(--no-include_text); expected a run with its text column, or drop "
                         "--collapse")
    return has_text if asked is None else asked


def _search(corpus, args, queries, collapsing: bool):
    """(per query its hits, rows scanned, where the vectors came from). Collapsing, the scan
    keeps COLLAPSE_CANDIDATES times k candidates, and again that many times more while a
    query's candidates hold fewer than k distinct texts and the run has more rows."""
    from beam_embed.pipeline.search.corpus import blocks
    from beam_embed.pipeline.search.scan import collapse, resolve_hits, top_k

    k = args.k * COLLAPSE_CANDIDATES if collapsing else args.k
    while True:
        scored, source = blocks(corpus, args.index, args.block_rows)
        best, rows = top_k(scored, queries, k, normalized=args.index or corpus.pooling.unit_length)
        hits = resolve_hits(corpus.format, corpus.shards, best, corpus.has_text)
        if not collapsing:
            return hits, rows, source
        shown = [collapse(found, args.k) for found in hits]
        if all(enough for _, enough in shown) or k >= rows:
            return [found for found, _ in shown], rows, source
        k *= COLLAPSE_CANDIDATES


def parser() -> CommandParser:
    p = CommandParser(PROG, __doc__.split("\n\n")[0])
    p.add_argument("output", help="the embedding job's output folder (with manifest.json)")
    p.add_argument("queries", nargs="+", metavar="QUERY", help="one or more queries")
    p.add_argument("-k", type=int, default=DEFAULT_K, help="hits per query")
    p.add_argument("--pooling", help="pooling name or column (default: the manifest's first)")
    p.add_argument("--model", help="the same model at another place (checked by fingerprint)")
    p.add_argument("--highlight", choices=["auto", *STYLES], default="auto",
                   help="shared words: bold on a terminal, **markdown** otherwise (auto)")
    p.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS,
                   help="longest text shown (0: all)")
    p.add_argument("--block-rows", type=int, default=DEFAULT_BLOCK_ROWS,
                   help="records scored per block: the memory bound")
    p.add_argument("--index", action="store_true",
                   help="build (first time) and reuse OUTPUT/search-index/COLUMN.npy: faster "
                        "repeated searches of large outputs (local folders only)")
    p.add_argument("--collapse", action=argparse.BooleanOptionalAction, default=None,
                   help="show a text once, however many records hold it, and say how many "
                        "were folded (default: on when the run stored its texts)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    return p


def parse_args(argv: list[str]):
    p = parser()
    args = p.parse(argv)
    for flag, value in (("-k", args.k), ("--block-rows", args.block_rows)):
        if value < 1:
            p.error(f"{flag} must be a positive integer, got {value}")
    for i, query in enumerate(args.queries, 1):
        if blank_query(query):
            what = "blank (only whitespace or control characters)" if query else "empty"
            p.error(f"query {i} is {what}; expected some text to search for")
    return args


@one_line_errors(PROG)
def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else list(argv))
        from beam_embed.pipeline.search.corpus import load_corpus

        corpus = load_corpus(args.output.rstrip("/"), args.pooling)
        if args.index:
            from beam_embed.pipeline.search.index import check_local

            check_local(corpus.folder)
        import_tensorflow()
        from beam_embed.pipeline.search.corpus import build_embedder

        embedder = build_embedder(corpus, args.model)
        collapsing = _collapsing(args.collapse, corpus.has_text)
    except ValueError as e:
        return refused(PROG, e)
    from beam_embed.pipeline.common.finished_run.shards import check_unchanged
    p = corpus.pooling
    embedded = embedder.embed(list(args.queries))
    for line in cut_queries(embedded.num_tokens, embedded.truncated,
                            embedder.encoder.max_seq_length):
        log(line)
    queries = embedded.vectors[p.column]
    began = time.monotonic()
    hits, rows, source = _search(corpus, args, queries, collapsing)
    if corpus.checked is not None:  # the hits are the run the manifest describes
        check_unchanged(corpus.checked)
    log(f"{printable(str(corpus.model.name))}, pooling {printable(p.name)}: {rows} records "
        f"from {source} in {time.monotonic() - began:.2f}s")
    folded = sum(h.copies - 1 for found in hits for h in found)
    if folded:
        log(f"folded {folded} hit(s) whose text repeats a better hit's (shown once, with how "
            "many records hold it); --no-collapse lists every record")
    if args.json:  # exact texts, with the characters a terminal obeys as JSON escapes
        print(json_printable(json.dumps(
            [{"query": q, "hits": [dataclasses.asdict(h) for h in found]}
             for q, found in zip(args.queries, hits)], ensure_ascii=False)))
        return 0
    style = args.highlight if args.highlight != "auto" else (
        "bold" if sys.stdout.isatty() else "markdown")
    print("\n\n".join(format_hits(q, found, style, args.max_chars)
                      for q, found in zip(args.queries, hits)))
    return 0
