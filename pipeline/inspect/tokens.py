"""`beam-embed tokens`: how models split the same text, and how their vocabularies differ.

    beam-embed tokens "The BRCA1 p.V600E mutation" [MORE TEXT ...] --model minilm \
        --model bert-base-uncased [--json]

For each text: one row per word (as written in the text), each model's WordPieces side by side,
then pieces per word and [UNK]s per model. Then the vocabularies: size, share of entries with a digit, share of `##`
continuation pieces, and the overlap of every two models. Only the tokenizers are loaded where
the model allows (a TF-Hub BERT preprocessor and the vocab.txt inside it; a TF1 Hub BERT
module's own vocabulary, which needs the module loaded).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys

from beam_embed.models.tf_import import import_tensorflow
from beam_embed.pipeline.common.settings.command_line import CommandParser
from beam_embed.pipeline.common.settings.errors import one_line_errors, refused
from beam_embed.process.terminal import json_printable, printable

UNKNOWN = ("[UNK]", "<unk>")  # WordPiece's, SentencePiece's (XLM-R)
PROG = "beam-embed tokens"


@dataclasses.dataclass(frozen=True)
class Tokenizer:
    label: str
    vocab: tuple[str, ...]
    tokenizer: object  # tokenize(strings) -> ragged ids [batch, words, pieces]

    def words(self, text: str) -> list[list[str]]:
        """The text's words, each as its WordPiece strings."""
        import tensorflow as tf

        ids = self.tokenizer.tokenize(tf.constant([text])).to_list()[0]
        return [[self.vocab[i] for i in word] for word in ids]


def load_tokenizer(label: str) -> Tokenizer:
    from beam_embed.models.spec import encoder_spec

    return tokenizer_of(encoder_spec(label), label)


def tokenizer_of(spec, label: str) -> Tokenizer:
    """The tokenizer of the model of `spec` (beam_embed.models.spec.EncoderSpec), `label` in
    messages and reports."""
    from beam_embed.models.encoders import encoder_kind

    try:
        pieces = encoder_kind(spec.kind).encoder_class().wordpieces(spec)
    except ValueError as e:
        raise ValueError(f"model {label!r} ({spec.kind}): {e}") from e
    return Tokenizer(label, pieces.vocab, pieces.tokenizer)


def vocab_stats(tokenizers: list[Tokenizer]) -> dict:
    sets = {t.label: set(t.vocab) for t in tokenizers}
    per_model = {t.label: {"size": len(sets[t.label]),
                           "with_digits": sum(any(c.isdigit() for c in v) for v in sets[t.label])
                           / len(sets[t.label]),
                           "continuations": sum(v.startswith("##") for v in sets[t.label])
                           / len(sets[t.label])} for t in tokenizers}
    overlap = [{"models": [a, b], "shared": len(sets[a] & sets[b]),
                "share_of_first": len(sets[a] & sets[b]) / len(sets[a]),
                "share_of_second": len(sets[a] & sets[b]) / len(sets[b])}
               for a, b in itertools.combinations(sets, 2)]
    return {"models": per_model, "overlap": overlap}


def text_words(text: str) -> list[str]:
    """The text's words as written, split the way BERT's basic tokenizer splits them (spaces,
    punctuation and CJK characters), case and accents kept."""
    import tensorflow as tf
    from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer

    words = BasicTokenizer(lower_case=False, normalization_form=None).tokenize(tf.constant([text]))
    return [w.decode("utf-8") for w in words.to_list()[0]]


def word_labels(text: str, split: dict[str, list[list[str]]]) -> list[str]:
    """One label per row of the side-by-side table: the word as written in the text when every
    model found the same number of words (a model's preprocessor may drop control characters or
    join differently); else the first model's pieces joined, `##` and `▁` removed."""
    words = text_words(text)
    if all(len(w) == len(words) for w in split.values()):
        return words
    longest = max(split.values(), key=len)
    return ["".join(p[2:] if p.startswith("##") else p.removeprefix("\u2581") for p in word)
            for word in longest]


def compare(text: str, tokenizers: list[Tokenizer]) -> dict:
    split = {t.label: t.words(text) for t in tokenizers}
    return {"text": text, "labels": word_labels(text, split), "words": split,
            "stats": {label: {"words": len(w), "pieces": sum(map(len, w)),
                              "pieces_per_word": sum(map(len, w)) / max(len(w), 1),
                              "unknown": sum(p in UNKNOWN for word in w for p in word)}
                      for label, w in split.items()}}


def _table(header: list[str], rows: list[list[str]]) -> str:
    # Cells hold the user's text and its pieces: escaped before their widths are measured.
    header, rows = [printable(c) for c in header], [[printable(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def format_report(texts: list[dict], vocab: dict) -> str:
    blocks = []
    for item in texts:
        labels = list(item["words"])
        rows = [[label] + [" ".join(w) if w else "" for w in words]
                for label, words in zip(item["labels"],
                                        itertools.zip_longest(*item["words"].values()))]
        stats = [[label, str(s["words"]), str(s["pieces"]), f"{s['pieces_per_word']:.2f}",
                  str(s["unknown"])] for label, s in item["stats"].items()]
        blocks.append(f"text: {printable(item['text'])}\n{_table(['word', *labels], rows)}\n\n"
                      + _table(["model", "words", "pieces", "pieces/word", "[UNK]"], stats))
    blocks.append("vocabulary\n" + _table(
        ["model", "size", "with digits", "## pieces"],
        [[label, str(s["size"]), f"{s['with_digits']:.1%}", f"{s['continuations']:.1%}"]
         for label, s in vocab["models"].items()]))
    if vocab["overlap"]:
        blocks.append("overlap\n" + _table(
            ["models", "shared", "of first", "of second"],
            [[" & ".join(o["models"]), str(o["shared"]), f"{o['share_of_first']:.1%}",
              f"{o['share_of_second']:.1%}"] for o in vocab["overlap"]]))
    return "\n\n".join(blocks)


def parser() -> CommandParser:
    p = CommandParser(PROG, __doc__.split("\n\n")[0])
    p.add_argument("texts", nargs="+", metavar="TEXT", help="one or more texts")
    p.add_argument("--model", action="append", required=True,
                   help="a preset (minilm works offline), an export-model folder or a TF1 Hub "
                        "BERT module; repeat to compare")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return p


@one_line_errors("beam-embed tokens")
def main(argv: list[str] | None = None) -> int:
    p = parser()
    try:
        args = p.parse(sys.argv[1:] if argv is None else list(argv))
        if len(set(args.model)) != len(args.model):
            p.error(f"--model given twice: {args.model}")
        import_tensorflow()
        tokenizers = [load_tokenizer(m) for m in args.model]
    except ValueError as e:
        return refused(PROG, e)
    texts = [compare(t, tokenizers) for t in args.texts]
    vocab = vocab_stats(tokenizers)
    print(json_printable(json.dumps({"texts": texts, "vocabulary": vocab}, ensure_ascii=False,
                                    indent=2))
          if args.json else format_report(texts, vocab))
    return 0
