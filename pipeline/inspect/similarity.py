"""`beam-embed similarity`: word-in-context similarity matrices, one per model, side by side.

The SciBERT notebook's experiment for any models: each requested word's contextual vector
(the mean of its pieces for BERT, the word itself for ELMo) from one sentence, compared by
cosine similarity. Words found twice are reported as `word#1`, `word#2`; missing words are
named; words split into several pieces say how many.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from models.spec import EncoderSpec, encoder_spec


def word_vectors(spec: EncoderSpec, sentence: str, words: list[str]):
    """(labels, vectors [n, width], notes) for the requested words in the sentence."""
    result = spec.build().embed([sentence])
    tokens, vectors, pieces = result.tokens[0], result.vectors[0], result.pieces[0]
    labels, rows, notes = [], [], []
    for word in words:
        hits = [i for i, t in enumerate(tokens) if t.lower() == word.lower()]
        if not hits:
            notes.append(f"{word!r} does not occur as a word in the sentence")
        for n, i in enumerate(hits, start=1):
            labels.append(word if len(hits) == 1 else f"{word}#{n}")
            rows.append(vectors[i].astype(np.float64))
            if pieces[i] > 1:
                notes.append(f"{labels[-1]!r} spans {pieces[i]} word pieces (vector = their mean)")
    matrix = np.stack(rows) if rows else np.zeros((0, 0))
    return labels, matrix, notes


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    if not len(vectors):
        return vectors
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


def _table(name: str, labels: list[str], sims: np.ndarray) -> list[str]:
    width = max([len(label) for label in labels] + [6])
    lines = [name, " " * width + "".join(f"{label:>{width + 2}}" for label in labels)]
    for label, row in zip(labels, sims):
        lines.append(f"{label:<{width}}" + "".join(f"{v:>{width + 2}.3f}" for v in row))
    return lines


def _side_by_side(blocks: list[list[str]]) -> str:
    widths = [max(map(len, b)) for b in blocks]
    height = max(map(len, blocks))
    rows = []
    for i in range(height):
        rows.append("    ".join((b[i] if i < len(b) else "").ljust(w) for b, w in zip(blocks, widths)))
    return "\n".join(r.rstrip() for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="beam-embed similarity", description=__doc__)
    parser.add_argument("sentence")
    parser.add_argument("--words", nargs="+", required=True)
    parser.add_argument("--model", action="append", help="preset, export folder or SavedModel "
                                                           "(repeatable; default minilm)")
    parser.add_argument("--layer", help="BERT layer (default -1) or ELMo output (default elmo)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    report, blocks = {}, []
    try:
        for model in args.model or ["minilm"]:
            spec = encoder_spec(model, normalize=False, granularity="token",
                                token_layer=args.layer, token_unit="word")
            labels, vectors, notes = word_vectors(spec, args.sentence, args.words)
            sims = cosine_matrix(vectors)
            report[spec.name] = {"words": labels, "similarity": sims.round(6).tolist(),
                                 "notes": notes}
            blocks.append(_table(spec.name, labels, sims) + [f"  note: {n}" for n in notes])
    except ValueError as e:
        print(f"beam-embed similarity: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else _side_by_side(blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
