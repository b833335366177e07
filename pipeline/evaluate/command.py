"""`beam-embed eval`: which model and pooling make the best sentence vector, in numbers.

    beam-embed eval [--pairs sts-dev.tsv] [--triplets FILE] --model minilm --model MODEL2 \
        --pooling cls,pooled_output,mean,mean@-2 [--vector-dtype float32,int8] [--json]

Pairs (STS-style, scored): Spearman and Pearson correlation of the cosine similarity with the
gold scores. Triplets (query, positive, negative): the share with cos(query, positive) >
cos(query, negative). One row per model and pooling; every pooling of a model comes from one
encoder pass, with the job's own encoder code, in this process (meant for files of thousands of
pairs, not millions). `--vector-dtype` scores the vectors as a run with that --vector_dtype
would store and read them back (int8 calibrated on a sample of the evaluated vectors), a row
each. Files, models, poolings and dtypes are all checked before anything is embedded.
Without --pairs or --triplets: the sample pairs (sample_pairs.py), a quick check.
"""

from __future__ import annotations

import itertools
import json
import sys
import time

from beam_embed.models.tf_import import import_tensorflow
from beam_embed.pipeline.common.rows.vector_dtype_names import VECTOR_DTYPES
from beam_embed.pipeline.common.settings.command_line import CommandParser
from beam_embed.pipeline.common.settings.errors import one_line_errors, refused
from beam_embed.pipeline.evaluate.data import Pairs, read_pairs, read_triplets
from beam_embed.pipeline.evaluate.sample_pairs import sample_dataset
from beam_embed.process.log import log

DEFAULT_MODEL = "minilm"
DEFAULT_BATCH = 64
PROG = "beam-embed eval"


def parser() -> CommandParser:
    p = CommandParser(PROG, __doc__.split("\n\n")[0])
    p.add_argument("--pairs", help="TSV of scored pairs (score, sentence1, sentence2; or the "
                                   "STS Benchmark layout). Default, without --triplets: 300 "
                                   "sample pairs made from the sample corpus's topics")
    p.add_argument("--triplets", help="TSV of query, positive, negative")
    p.add_argument("--model", action="append",
                   help="a preset, an export-model folder or a SavedModel (folder or TF-Hub "
                        "URL, kind recognized); repeat to compare "
                        f"(default {DEFAULT_MODEL})")
    p.add_argument("--pooling",
                   help="comma-separated poolings, e.g. cls,pooled_output,mean,mean@-2 "
                        "(default: each model's recommended one)")
    p.add_argument("--max-seq-length", type=int, help="tokens per text (default: the model's)")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="texts per encoder call")
    p.add_argument("--vector-dtype",
                   help=f"comma-separated, of {list(VECTOR_DTYPES)}: score the vectors as a run "
                        "storing them so would read them back (default float32, exact)")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    return p


def parse_args(argv: list[str]):
    p = parser()
    args = p.parse(argv)
    if args.batch_size < 1:
        p.error(f"--batch-size must be a positive integer, got {args.batch_size}")
    args.dtypes = tuple(d.strip() for d in (args.vector_dtype or "").split(",") if d.strip())
    for dtype in args.dtypes:
        if dtype not in VECTOR_DTYPES:
            p.error(f"unknown --vector-dtype {dtype!r}; expected one of {list(VECTOR_DTYPES)}")
    return args


def evaluate(found, embedder, datasets: list, batch_size: int, dtypes=()) -> list[dict]:
    """One row per (dataset, pooling, dtype) for one loaded model (`found`: an
    embed.Candidate); `dtypes`: the --vector-dtype values given (none: float32, no dtype key)."""
    from beam_embed.pipeline.common.rows.vector_dtypes import stored_as
    from beam_embed.pipeline.evaluate.embed import embed_texts

    vectors = embed_texts(embedder, [t for d in datasets for t in d.texts()], batch_size)
    rows, start = [], 0
    for data in datasets:
        n = len(data)
        for (spec, column), dtype in itertools.product(found.columns().items(),
                                                       dtypes or (None,)):
            v = vectors[column][start:start + len(data.texts())]
            row = {"model": found.label, "name": found.encoder.name, "pooling": spec,
                   "file": data.path, "n": n}
            if dtype is not None:  # int8's ranges from all the texts' vectors, as a run's are
                stored = stored_as(dtype, vectors[column])
                v = stored.decode(stored.encode(v))
                row["vector_dtype"] = dtype
            row.update(_pairs(v, data) if isinstance(data, Pairs) else _triplets(v, n))
            rows.append(row)
        start += len(data.texts())
    return rows


def _pairs(v, data: Pairs) -> dict:
    """The pairs' correlations; None, with a note saying why, where either side is constant
    (a correlation with a constant is not defined: numpy would say nan)."""
    from beam_embed.pipeline.evaluate.metrics import constant, cosine, pearson, spearman

    n = len(data)
    sims = cosine(v[:n], v[n:])
    note = None
    if constant(data.scores):
        note = (f"every pair's gold score is {data.scores[0]:g}: no correlation is defined; "
                "give pairs of different scores")
    elif constant(sims):
        note = (f"every pair's cosine is {sims[0]:.4f}: these vectors do not tell the pairs "
                "apart (identical sentences in each pair, or a --vector-dtype too coarse for "
                "them), so no correlation is defined")
    if note:
        return {"task": "pairs", "spearman": None, "pearson": None, "note": note}
    return {"task": "pairs", "spearman": spearman(sims, data.scores),
            "pearson": pearson(sims, data.scores)}


def _triplets(v, n: int) -> dict:
    """The triplets' accuracy and its ties (a tie is a miss); None, with a note, when every
    triplet ties: the vectors rank none of them."""
    from beam_embed.pipeline.evaluate.metrics import triplet_accuracy, triplet_ties

    query, positive, negative = v[:n], v[n:2 * n], v[2 * n:]
    ties = triplet_ties(query, positive, negative)
    row = {"task": "triplets", "accuracy": triplet_accuracy(query, positive, negative),
           "ties": ties}
    if ties == n:
        row.update(accuracy=None, note=f"all {n} triplets tie: the positive and the negative "
                                       "score the same cosine with the query (identical texts, "
                                       "or a --vector-dtype too coarse for them), so these "
                                       "vectors rank none of them")
    elif ties:
        row["note"] = f"{ties} of {n} triplets tie (the positive and the negative score the " \
                      "same cosine), counted as misses"
    return row


def _cell(value) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def format_table(rows: list[dict]) -> str:
    """A plain-text table per task, aligned, metrics with four decimals."""
    blocks = []
    for task, metrics in (("pairs", ("spearman", "pearson")), ("triplets", ("accuracy",))):
        picked = [r for r in rows if r["task"] == task]
        if not picked:
            continue
        dtype = ("dtype",) if any("vector_dtype" in r for r in picked) else ()
        header = ("model", "pooling", *dtype, task, *metrics)
        cells = [header] + [(r["model"], r["pooling"], *(r["vector_dtype"] for _ in dtype),
                             str(r["n"]), *(_cell(r[m]) for m in metrics)) for r in picked]
        widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) if i < 2 + len(dtype) else c.rjust(w) for i, (c, w) in
                           enumerate(zip(row, widths))) for row in cells]
        notes = [f"note: {r['model']} {r['pooling']}"
                 f"{' ' + r['vector_dtype'] if dtype else ''}: {r['note']}"
                 for r in picked if r.get("note")]
        blocks.append("\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:],
                                 *notes]))
    return "\n\n".join(blocks)


@one_line_errors("beam-embed eval")
def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else list(argv))
        datasets = ([read_pairs(args.pairs)] if args.pairs else []) + \
                   ([read_triplets(args.triplets)] if args.triplets else []) or \
                   [sample_dataset()]
        poolings = tuple(p.strip() for p in (args.pooling or "").split(",") if p.strip())
        import_tensorflow()
        from beam_embed.pipeline.evaluate.embed import candidate

        found = [candidate(m, poolings, args.max_seq_length) for m in args.model or [DEFAULT_MODEL]]
        embedders = [c.encoder.build() for c in found]  # bad handles and layers fail here
    except ValueError as e:
        return refused(PROG, e)
    rows = []
    for c, embedder in zip(found, embedders):
        began = time.monotonic()
        rows += evaluate(c, embedder, datasets, args.batch_size, args.dtypes)
        log(f"{c.label}: embedded in {time.monotonic() - began:.1f}s")
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 0
