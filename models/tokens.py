"""Token-level (word-in-context) vectors: per text, its tokens, character offsets into the
original text, and one vector per token from a chosen layer.

BERT: `wordpiece` units (one vector per piece) or `word` units (the mean of a word's pieces, as
the SciBERT notebook's `get_embedding(word=...)` did). ELMo: words.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from beam_embed.models.encoder import Units
from beam_embed.models.encoder_choices import TOKEN_DTYPES, TOKEN_UNITS
from beam_embed.models.encoders import encoder_kind

UNKNOWN_PIECES = {"[UNK]", "<unk>"}  # WordPiece's, SentencePiece's (XLM-R)


def piece_text(piece: str) -> str:
    """The characters of the word a piece stands for: WordPiece's "##" continuation mark and
    SentencePiece's "▁" word-start mark (XLM-R) dropped."""
    return piece[2:] if piece.startswith("##") else piece.removeprefix("\u2581")


@dataclasses.dataclass(frozen=True)
class TokenVectors:
    tokens: list[list[str]]
    starts: list[np.ndarray]  # character offsets into the original text
    ends: list[np.ndarray]
    vectors: list[np.ndarray]  # [tokens, width] per text
    num_tokens: np.ndarray
    truncated: np.ndarray
    pieces: list[np.ndarray] = dataclasses.field(default_factory=list)  # per token, word units


def _char_index(text: str) -> np.ndarray:
    """byte offset -> character offset, for every byte boundary of the UTF-8 text."""
    if text.isascii():
        return np.arange(len(text) + 1)
    widths = [len(c.encode("utf-8")) for c in text]
    index = np.zeros(sum(widths) + 1, np.int64)
    index[np.cumsum(widths)] = np.arange(1, len(text) + 1)
    return np.maximum.accumulate(index)


class TokenEmbedder:
    def __init__(self, encoder, layer=None, unit: str = "word", dtype: str = "float32"):
        if unit not in TOKEN_UNITS:
            raise ValueError(f"unknown token unit {unit!r}; expected one of {list(TOKEN_UNITS)}")
        if dtype not in TOKEN_DTYPES:
            raise ValueError(f"unknown token dtype {dtype!r}; expected one of {list(TOKEN_DTYPES)}")
        kind = encoder_kind(encoder.kind)
        self.encoder = encoder
        self.layer = kind.parse_token_layer(layer, encoder.num_layers)
        self.unit = unit if unit in kind.token_units else kind.token_units[0]
        self.dtype = np.dtype(dtype)
        self._room = encoder.max_seq_length - encoder.special_tokens
        self._offset = 1 if encoder.special_tokens else 0  # [CLS] comes first

    @property
    def width(self) -> int:
        return self.encoder.width

    def embed(self, texts: list[str]) -> TokenVectors:
        words = self.encoder.tokenize_with_offsets(texts)
        lengths = words.units.lengths
        out = self.encoder.encode(words.units.truncated(self._room),
                                  (self.layer,) if isinstance(self.layer, int) else ())
        layer = out.layers[self.layer]
        result = TokenVectors([], [], [], [], (lengths + self.encoder.special_tokens)
                              .astype(np.int32), lengths > self._room)
        nested = words.pieces is not None  # BERT: units are pieces of words; ELMo: words
        strings = self._strings(words.units) if nested and self.unit == "wordpiece" else None
        for i, text in enumerate(texts):
            index = _char_index(text)
            begin, end = words.spans(i)
            starts, ends = index[begin], index[end]
            n = min(int(lengths[i]), self._room)
            vectors = layer[i, self._offset:self._offset + n]
            if not nested:
                units = [text[s:e] for s, e in zip(starts, ends)][:n]
                self._add(result, units, starts[:n], ends[:n], vectors)
                result.pieces.append(np.ones(len(units), np.int64))
            elif self.unit == "word":
                counts = words.word_pieces(i)
                owner = np.repeat(np.arange(len(counts)), counts)[:n]
                kept = np.unique(owner)
                sums = np.zeros((len(counts), layer.shape[-1]), np.float64)
                np.add.at(sums, owner, vectors)
                means = sums[kept] / np.bincount(owner)[kept][:, None]
                self._add(result, [text[s:e] for s, e in zip(starts[kept], ends[kept])],
                          starts[kept], ends[kept], means)
                result.pieces.append(np.bincount(owner)[kept])
            else:
                self._add(result, strings[i][:n], *self._piece_spans(
                    strings[i][:n], words.word_pieces(i), starts, ends), vectors)
        return result

    def _add(self, result, tokens, starts, ends, vectors):
        result.tokens.append(list(tokens))
        result.starts.append(np.asarray(starts, np.int32))
        result.ends.append(np.asarray(ends, np.int32))
        result.vectors.append(np.asarray(vectors, self.dtype))

    def _strings(self, units: Units) -> list[list[str]]:
        vocab = self.encoder.vocabulary()
        return [[vocab[t] for t in row] for row in units.rows()]

    @staticmethod
    def _piece_spans(strings, counts, word_starts, word_ends):
        """Each piece's span: exact when the word's pieces spell it out character for
        character (accents stripped keep the count), else the whole word's span."""
        starts, ends, k = [], [], 0
        for w, count in enumerate(counts):
            pieces = strings[k:k + count]
            if not pieces:
                break
            sizes = [len(piece_text(p)) for p in pieces]
            exact = (not UNKNOWN_PIECES.intersection(pieces)
                     and sum(sizes) == word_ends[w] - word_starts[w])
            pos = word_starts[w]
            for size in sizes:
                starts.append(pos if exact else word_starts[w])
                ends.append(pos + size if exact else word_ends[w])
                pos += size
            k += count
        return starts, ends
