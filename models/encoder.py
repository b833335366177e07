"""The interface every encoder kind implements, and what the rest of the project may rely on.

An encoder turns texts into token units (WordPiece ids, words) and units into an EncoderOutput
(token vectors per layer, the mask, the model's own sentence vectors). Pooling, normalization,
long-text handling and token-level output are built on top of it (models/embedder.py,
models/tokens.py) and never inside it. The static facts of a kind (its poolings, precisions,
token layers) live in its registry entry (models/encoders/__init__.py), which imports no
TensorFlow, so flags are checked before any model loads.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from beam_embed.models.pooling import EncoderOutput


@dataclasses.dataclass(frozen=True, eq=False)
class Units:
    """A batch's token units in numpy, flat: what `tokenize` returns and `encode` reads, so the
    embedder slices, regroups and truncates rows without TensorFlow ops. Row i is
    `values[splits[i]:splits[i + 1]]`; values are int32 ids (WordPieces) or bytes (words)."""

    values: np.ndarray  # [all units of all rows]
    lengths: np.ndarray  # [rows] int64

    @classmethod
    def of(cls, ragged) -> Units:
        """From a [batch, units] tf.RaggedTensor, as the encoders' tokenizers give them."""
        return cls(ragged.flat_values.numpy(), ragged.row_lengths().numpy())

    @classmethod
    def from_rows(cls, rows: list[np.ndarray]) -> Units:
        lengths = np.array([len(r) for r in rows], np.int64)
        return cls(np.concatenate(rows) if rows else np.zeros(0, np.int32), lengths)

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def splits(self) -> np.ndarray:
        """[rows + 1]: where each row starts in `values`, then the end."""
        return np.concatenate([np.zeros(1, np.int64), np.cumsum(self.lengths)])

    def _columns(self) -> np.ndarray:
        """Each value's position in its row."""
        return np.arange(len(self.values)) - np.repeat(self.splits[:-1], self.lengths)

    def rows(self) -> list[np.ndarray]:
        return np.split(self.values, self.splits[1:-1]) if len(self) else []

    def take(self, index: np.ndarray) -> Units:
        """The rows at `index`, in that order."""
        lengths = self.lengths[index]
        starts = np.repeat(self.splits[:-1][index], lengths)
        within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return Units(self.values[starts + within], lengths)

    def truncated(self, length: int) -> Units:
        """Each row's first `length` units."""
        if not len(self) or self.lengths.max() <= length:
            return self
        return Units(self.values[self._columns() < length], np.minimum(self.lengths, length))

    def padded(self, length: int, fill) -> np.ndarray:
        """[rows, length]: each row's first `length` units, then `fill`."""
        out = np.full((len(self), length), fill, dtype=self.values.dtype)
        row, col = np.repeat(np.arange(len(self)), self.lengths), self._columns()
        keep = col < length
        out[row[keep], col[keep]] = self.values[keep]
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class Words:
    """What `tokenize_with_offsets` returns, in numpy: a batch's units and the words they make,
    each word with its byte span in the original text. Text i has `counts[i]` words, in order;
    a word's units follow each other in `units` (its pieces, or the word itself)."""

    units: Units  # each text's units, special tokens not included
    counts: np.ndarray  # [texts] int64: words per text
    begin: np.ndarray  # [all words] int64: each word's first byte in its text
    end: np.ndarray  # [all words] int64: the byte after its last
    pieces: np.ndarray | None = None  # [all words] units per word; None: each unit is a word

    @classmethod
    def of(cls, units, begin, end) -> Words:
        """From tf.RaggedTensors as the tokenizers give them: units [batch, words, pieces] or
        [batch, words], begin and end [batch, words]."""
        nested = units.ragged_rank == 2
        return cls(Units.of(units.merge_dims(1, 2) if nested else units),
                   begin.row_lengths().numpy(), begin.flat_values.numpy(),
                   end.flat_values.numpy(), units.values.row_lengths().numpy() if nested else None)

    @functools.cached_property
    def _splits(self) -> np.ndarray:
        return np.concatenate([np.zeros(1, np.int64), np.cumsum(self.counts)])

    def _row(self, values: np.ndarray, i: int) -> np.ndarray:
        return values[self._splits[i]:self._splits[i + 1]]

    def spans(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Text i's words' byte begins and ends."""
        return self._row(self.begin, i), self._row(self.end, i)

    def word_pieces(self, i: int) -> np.ndarray:
        """Text i's units per word."""
        if self.pieces is None:
            return np.ones(int(self.counts[i]), np.int64)
        return self._row(self.pieces, i)


@dataclasses.dataclass(frozen=True)
class WordPieces:
    """A WordPiece vocabulary and the object whose `tokenize(strings)` returns ragged ids
    [batch, words, pieces] (held whole: its tf.function methods keep only a weak reference)."""

    vocab: tuple[str, ...]
    tokenizer: object


class Encoder(abc.ABC):
    kind: ClassVar[str]  # its key in beam_embed.models.encoders.KINDS
    special_tokens: ClassVar[int] = 0  # tokens added around each text ([CLS] ... [SEP]: 2)
    # True when `plan` groups a batch's rows by length; the embedder then runs two groups at
    # once where TensorFlow has the threads for it.
    plans: ClassVar[bool] = False
    # False when one call must finish before the next starts (an XLA program on one TPU).
    parallel_calls: bool = True
    # the model's layers after pooling (a sentence-transformers Dense stack: models/dense_head.py),
    # applied to every pooling's vectors; None: the pooled vectors are the model's
    head = None
    # True when `warm_up(spec)` loads the model and runs it once ahead of from_spec, on another
    # thread (models/warm_up.py); from_spec then waits for it rather than loading again.
    warms_up: ClassVar[bool] = False

    max_seq_length: int | None  # units per text, special tokens included; None: no limit
    num_layers: int  # layers (or named outputs) a pooling or token vector may read
    width: int  # the vector width of every layer

    @classmethod
    @abc.abstractmethod
    def from_spec(cls, spec) -> Encoder:
        """Loads the model a beam_embed.models.spec.EncoderSpec names (once per process)."""

    @classmethod
    def warm_up(cls, spec, loaded: Callable[[], None]) -> None:
        """Loads the model `spec` names, calls `loaded()`, then runs the model once (kinds
        with `warms_up`; the others are never asked)."""
        raise NotImplementedError(f"{cls.__name__} has no warm-up")

    @classmethod
    def recognize(cls, handle: str, found) -> dict | None:
        """For a handle given alone (`--encoder H`): None when it is not a model of this kind,
        else the facts learned on the way (beam_embed.models.presets.ModelSpec fields, e.g. the maximum
        length). `found` is the handle's beam_embed.models.encoders.detect.SavedModelFacts (tags,
        signatures) read without loading it, with no graphs when the handle's folder
        (`found.folder`) holds no SavedModel: a kind of another format recognizes its own files
        there. A kind may load the handle (once per process).
        Kinds that are never guessed (a BERT pair needs its preprocessor named) keep this."""
        return None

    @classmethod
    def fingerprint(cls, encoder: str, preprocessor: str | None = None) -> str:
        """A short digest of the model files the handles name: manifests record it, and
        `search` compares it with the model at hand, across versions (the same files must
        always give the same value). The handles, not a spec: a manifest's model is its kind
        and handles. This default is the SavedModel kinds': sha256 over every file that decides
        the vectors (graph, variables, vocabulary, an export's metadata: models/saved_model.py);
        a kind of another format hashes its own files."""
        from beam_embed.models.saved_model import fingerprint

        return fingerprint(encoder, preprocessor)

    @classmethod
    def earlier_fingerprints(cls, encoder: str, preprocessor: str | None = None
                             ) -> tuple[str, ...]:
        """The values earlier versions recorded as `fingerprint` for these handles (manifests
        they wrote hold them): this default is the SavedModel kinds' sha256 over saved_model.pb
        only. A kind whose fingerprint never changed has none."""
        from beam_embed.models.saved_model import earlier_fingerprint

        return (earlier_fingerprint(encoder, preprocessor),)

    @classmethod
    def max_positions(cls, spec) -> int | None:
        """The token positions of the model `spec` names: the longest --max-seq-length it can
        run, read without running it; None when it has no such limit or it is unknown. This
        default: the rows of a SavedModel's position embedding variable."""
        from beam_embed.models.saved_model import position_rows

        return position_rows(spec.encoder)

    @classmethod
    def wordpieces(cls, spec) -> WordPieces:
        """The tokenizer alone, for `beam-embed tokens`: kinds with a WordPiece vocabulary."""
        raise ValueError(f"{cls.kind} encoders have no WordPiece vocabulary; tokens compares "
                         "BERT-family models")

    @abc.abstractmethod
    def tokenize(self, texts: list[str]) -> Units:
        """Each text's units, special tokens not included."""

    @abc.abstractmethod
    def tokenize_with_offsets(self, texts: list[str]) -> Words:
        """Each text's units grouped in words, with each word's byte span in the original
        text. Token granularity needs it."""

    @abc.abstractmethod
    def encode(self, units: Units, layers: tuple, shape: tuple[int, int] | None = None
               ) -> EncoderOutput:
        """Runs the model on already-short-enough rows (TensorFlow tensors are made here);
        `layers` names the layers the caller reads, `shape` (rows, length) is one `plan`
        chose."""

    def plan(self, lengths: np.ndarray, min_groups: int = 1) -> list[tuple[np.ndarray, tuple]]:
        """[(row indices, (rows, length) shape)]: how to split one batch into encoder calls.
        Only called when `plans` is True."""
        raise NotImplementedError(f"{type(self).__name__} does not plan its batches")

    def vocabulary(self) -> list[str]:
        """id -> unit string, for encoders whose units are ids."""
        raise ValueError(f"{self.kind} encoders have no id vocabulary")
