"""`beam-embed similarity`: word-in-context similarity matrices, one per model, side by side.

The SciBERT notebook's experiment for any models: each requested word's contextual vector
(the mean of its pieces for BERT, the word itself for ELMo) from one sentence, compared by
cosine similarity. Words found twice are reported as `word#1`, `word#2`; missing words are
named; words split into several pieces say how many.
"""

from __future__ import annotations

import json
import sys

from beam_embed.models.tf_import import import_tensorflow
from beam_embed.pipeline.common.settings.command_line import CommandParser
from beam_embed.pipeline.common.settings.errors import one_line_errors, refused
from beam_embed.process.terminal import printable

PROG = "beam-embed similarity"


def word_vectors(spec, sentence: str, words: list[str]):
    """(labels, vectors [n, width], notes) for the requested words in the sentence (`spec`: a
    beam_embed.models.spec.EncoderSpec)."""
    import numpy as np

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


def cosine_matrix(vectors):
    """[n, width] -> [n, n] cosine similarities."""
    import numpy as np

    if not len(vectors):
        return vectors
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


def _table(name: str, labels: list[str], sims) -> list[str]:
    labels = [printable(label) for label in labels]  # the user's words, shown, never obeyed
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


def parser() -> CommandParser:
    p = CommandParser(PROG, __doc__.split("\n\n")[0])
    p.add_argument("sentence")
    p.add_argument("--words", nargs="+", required=True, help="the words to compare")
    p.add_argument("--model", action="append",
                   help="preset, export-model folder or SavedModel (repeatable; default minilm)")
    p.add_argument("--layer", help="BERT layer (default -1) or ELMo output (default elmo)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return p


@one_line_errors("beam-embed similarity")
def main(argv: list[str] | None = None) -> int:
    report, blocks = {}, []
    try:
        args = parser().parse(sys.argv[1:] if argv is None else list(argv))
        import_tensorflow()
        from beam_embed.models.spec import encoder_spec

        for model in args.model or ["minilm"]:
            # the sentence's own words in context: no prompt, not even a model's default
            spec = encoder_spec(model, normalize=False, granularity="token",
                                token_layer=args.layer, token_unit="word", prompt="")
            labels, vectors, notes = word_vectors(spec, args.sentence, args.words)
            sims = cosine_matrix(vectors)
            report[spec.name] = {"words": labels, "similarity": sims.round(6).tolist(),
                                 "notes": notes}
            blocks.append(_table(spec.name, labels, sims) + [f"  note: {n}" for n in notes])
    except ValueError as e:
        return refused(PROG, e)
    print(json.dumps(report, indent=2) if args.json else _side_by_side(blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
