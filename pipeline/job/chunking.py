"""--split chunks: each document as overlapping windows of at most N tokens of the model's own
tokenizer, cut between words, one record each (`DOC#cK`), carrying its place in the document
(records.ChunkPlace: the parent's id, K, its character span in the text as read).

A window's tokens are counted as the sum of its words' tokens, each word tokenized alone by the
model's preprocessor: BERT's tokenizers split at every space first, so a slice cut at spaces
tokenizes to exactly its words' pieces, and the window's vector is the vector of its text
embedded alone. The windows of a text holding a less common space (no-break, ideographic, ...)
are counted again whole after they are made, and made again word by word where a tokenizer
joins what this module splits there.
A word longer than a window (a long URL, a run of text without spaces) is cut inside, into the
longest parts that fit; two parts of one word never share a window.

The text is the text as read (--clean does not rewrite it), so `text[char_start:char_end]` is a
row's text; a window starts and ends on a word, never on a space.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import numpy as np

from beam_embed.models.encoders import encoder_kind
from beam_embed.pipeline.common.rows.records import ChunkPlace, Record
from beam_embed.pipeline.job.settings import MIN_CHUNK_TOKENS

# What an export's normalizer turns into a space (models/bert_preprocessor.py), so where its
# tokenizer splits words: tab, newline, carriage return and the Unicode space separators.
SEPARATORS = "\t\n\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_WORD = re.compile(f"[^{SEPARATORS}]+")
# Every BERT tokenizer splits at tab, newline, carriage return and space before anything else;
# one normalizing otherwise than an export (a TF-Hub preprocessor, say) may not at the other
# separators: only a text holding one has its windows counted again as wholes.
_UNCOMMON_SPACE = re.compile("[\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
DEFAULT_OVERLAP = 32  # at most; and at most a quarter of the window, as --long_text chunk's


@dataclasses.dataclass(frozen=True)
class Chunking:
    """What a worker needs to cut documents: the model's spec (its tokenizer), the window's
    most tokens (special tokens not counted) and about how many consecutive windows share."""

    encoder: object  # beam_embed.models.spec.EncoderSpec
    tokens: int
    overlap: int


def chunking(settings, spec, prompt: int = 0) -> Chunking | None:
    """The run's Chunking (None without --split chunks), checked against the model: its kind
    must have a WordPiece tokenizer, and a window must fit its --max_seq_length with the
    special tokens and the `prompt`'s tokens (the encoder prepends it to every text). A
    ValueError naming the bad value and the valid range."""
    if settings.split != "chunks":
        return None
    kind = encoder_kind(spec.kind)
    if not kind.wordpieces or spec.max_seq_length is None:
        raise ValueError(f"--split chunks counts tokens with the model's WordPiece "
                         f"preprocessor; {spec.name or spec.encoder} is a {spec.kind} model, "
                         "which has none it can use; expected a BERT-family preset, an "
                         "export-model folder (`beam-embed export-model` makes one of a Hugging "
                         "Face folder), a TF-Hub BERT pair or a TF1 Hub BERT module")
    room = spec.max_seq_length - kind.encoder_class().special_tokens - prompt
    tokens = settings.chunk_tokens if settings.chunk_tokens is not None else room
    if not MIN_CHUNK_TOKENS <= tokens <= room:
        with_prompt = f" and the prompt's {prompt} tokens" if prompt else ""
        raise ValueError(f"--chunk_tokens {tokens} does not fit the model's --max_seq_length "
                         f"{spec.max_seq_length} with its special tokens{with_prompt}; expected "
                         f"{MIN_CHUNK_TOKENS} to {room}")
    overlap = (settings.chunk_overlap if settings.chunk_overlap is not None
               else min(DEFAULT_OVERLAP, tokens // 4))
    if not 0 <= overlap < tokens:
        raise ValueError(f"--chunk_overlap {overlap} is out of range; expected 0 to {tokens - 1} "
                         "(less than --chunk_tokens)")
    return Chunking(spec, tokens, overlap)


def prompt_tokens(spec) -> int:
    """The tokens of the prompt the encoder prepends to every text (0 without one), by the
    model's tokenizer: a window leaves room for them. Exact when the prompt ends between words
    (a space, a colon: "query: "), as prompts do."""
    if not getattr(spec, "prompt", "") or not encoder_kind(spec.kind).wordpieces:
        return 0
    return int(_counter(spec)([spec.prompt])[0])


def _counter(spec):
    """strings -> their token counts by the model's tokenizer, special tokens not counted."""
    tokenizer = encoder_kind(spec.kind).encoder_class().wordpieces(spec).tokenizer

    def count(strings: list[str]) -> np.ndarray:
        if not strings:
            return np.zeros(0, np.int64)
        import tensorflow as tf

        from beam_embed.models.accelerators import HOST

        with tf.device(HOST):
            pieces = tokenizer.tokenize(tf.constant(strings, dtype=tf.string))
        if pieces.ragged_rank == 2:
            pieces = pieces.merge_dims(-2, -1)
        return pieces.row_lengths().numpy()
    return count


def windows(counts, budget: int, overlap: int, glued=()) -> list[tuple[int, int]]:
    """[first, end) unit ranges: each the most units from its first whose counts sum to at most
    `budget` (one unit at least), the next starting as far back as keeps the units both share
    at most `overlap` tokens (and after the previous one's first); the last one ends at the end.
    A unit in `glued` (the indices of a cut word's parts after its first) never shares a window
    with the unit before it: together they would tokenize as the word does."""
    n, out, start = len(counts), [], 0
    while start < n:
        end, total = start, 0
        while end < n and total + counts[end] <= budget and (end == start or end not in glued):
            total += counts[end]
            end += 1
        end = max(end, start + 1)
        out.append((start, end))
        if end >= n:
            break
        start = _next_start(counts, start, end, overlap, glued)
    return out


def _next_start(counts, start: int, end: int, overlap: int, glued=()) -> int:
    """Where the window after [start, end) starts: as far back from `end` as keeps the units
    both share at most `overlap` tokens, after `start`; at `end` when that unit is glued (a
    window holding the unit before could not reach it)."""
    if end in glued:
        return end
    back, shared = end, 0
    while back - 1 > start and shared + counts[back - 1] <= overlap:
        back -= 1
        shared += counts[back]
    return back


class Chunker:
    """Cuts records into chunk records; built on the worker (it loads the tokenizer)."""

    reads_raw = True  # the text as read: chunks' offsets point into it

    def __init__(self, plan: Chunking, count=None):
        """`count`: strings -> their token counts (special tokens not counted), in place of the
        model's tokenizer."""
        self._budget = plan.tokens
        self._overlap = plan.overlap
        self.count = count or _counter(plan.encoder)

    def units(self, text: str) -> tuple[list[tuple[int, int, int]], set[int]]:
        """(start, end, tokens) of each word, a word over the window's budget as its parts; and
        the indices of the parts after a word's first (`windows`' glued units)."""
        spans = [m.span() for m in _WORD.finditer(text)]
        counts = self.count([text[s:e] for s, e in spans])
        out, glued = [], set()
        for (s, e), n in zip(spans, counts.tolist()):
            if n <= self._budget:
                out.append((s, e, n))
                continue
            for k, part in enumerate(self._parts(text, s, e)):
                if k:
                    glued.add(len(out))
                out.append(part)
        return out, glued

    def _parts(self, text: str, start: int, end: int) -> Iterator[tuple[int, int, int]]:
        """(start, end, tokens) of the parts a word over the budget is cut into: the longest
        prefixes that fit, one character at least (found by doubling a prefix until it does not
        fit, then a binary search: each part costs tokenizer calls on about its own length,
        however long the word)."""
        while start < end:
            size = 2
            while start + size < end and self.count([text[start:start + size]])[0] <= self._budget:
                size *= 2
            lo, hi, best = start + max(size // 2, 2), min(start + size, end), start + 1
            if size > 2:
                best = start + size // 2  # it fit
            while lo <= hi:
                mid = (lo + hi) // 2
                if self.count([text[start:mid]])[0] <= self._budget:
                    best, lo = mid, mid + 1
                else:
                    hi = mid - 1
            yield start, best, int(self.count([text[start:best]])[0])
            start = best

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Each window's character span in `text`, in order, covering every word."""
        units, glued = self.units(text)
        counts = [n for _, _, n in units]
        ranges = windows(counts, self._budget, self._overlap, glued)
        spans = [(units[a][0], units[b - 1][1]) for a, b in ranges]
        if not _UNCOMMON_SPACE.search(text) or \
                all(self.count([text[s:e] for s, e in spans]) <= self._budget):
            return spans
        return self._checked_spans(text, units, glued)

    def _checked_spans(self, text: str, units, glued) -> list[tuple[int, int]]:
        """Windows made one at a time, each shortened until its text alone fits."""
        counts = [n for _, _, n in units]
        spans, start = [], 0
        while start < len(units):
            end = start + windows(counts[start:], self._budget, 0,
                                  {g - start for g in glued})[0][1]
            while end - start > 1 and \
                    self.count([text[units[start][0]:units[end - 1][1]]])[0] > self._budget:
                end -= 1
            spans.append((units[start][0], units[end - 1][1]))
            if end >= len(units):
                break
            start = _next_start(counts, start, end, self._overlap, glued)
        return spans

    def __call__(self, record: Record) -> Iterator[Record]:
        for k, (s, e) in enumerate(self.spans(record.text)):
            place = ChunkPlace(record.id, k, s, e)
            yield Record(id=f"{record.id}#c{k}", text=record.text[s:e], source=record.source,
                         meta=record.meta + (place.to_meta(),))
