"""Length buckets, and fixed batch shapes for an XLA-compiled encoder: one batch size per
length bucket.

A batch is padded to its longest text rounded up to a bucket (few shapes: few retraces, little
padding); `bucket_length` picks it. The buckets of a kind's fixed shapes are its registry
entry's `fixed_lengths` (beam_embed.models.encoders), SEQ_BUCKETS for BERT.

XLA compiles one program per input shape (minutes of compiling on a TPU if every batch had its
own). The job's batches vary in size under a token budget and the CPU encoder packs each group
of rows to its own length, so here every call instead runs in one of a few (rows, length)
shapes: the length is a bucket, and each bucket has one batch size, the token budget over the
length rounded down to a multiple of 8 (a TPU's bfloat16 tile is 8 rows) and at most the
largest batch. A call that has fewer rows is padded with empty texts ([CLS] [SEP]), which the
encoder drops before pooling. The number of shapes, and so of compilations, is at most the
number of buckets up to --max_seq_length.
"""

from __future__ import annotations

import bisect
import dataclasses

import numpy as np

ROW_MULTIPLE = 8
SEQ_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def bucket_length(longest: int, max_seq_length: int, buckets=SEQ_BUCKETS) -> int:
    """The bucket that holds `longest`, at most `max_seq_length`; `longest` past the last."""
    i = bisect.bisect_left(buckets, longest)
    return min(buckets[i] if i < len(buckets) else longest, max_seq_length)


@dataclasses.dataclass(frozen=True)
class FixedShapes:
    batch_tokens: int  # the token budget of one call (--batch_tokens)
    max_batch_size: int  # rows of one call at most (--max_batch_size)
    lengths: tuple[int, ...]  # the length buckets, ascending, the longest = max_seq_length

    @classmethod
    def of(cls, batch_tokens: int, max_batch_size: int, buckets, max_seq_length: int):
        lengths = tuple(b for b in buckets if b < max_seq_length) + (max_seq_length,)
        return cls(batch_tokens, max_batch_size, lengths)

    def length(self, tokens: int) -> int:
        """The bucket that holds `tokens` (special tokens included); the longest for more."""
        i = bisect.bisect_left(self.lengths, tokens)
        return self.lengths[min(i, len(self.lengths) - 1)]

    def rows(self, length: int) -> int:
        """The batch size of `length`'s bucket."""
        fit = min(self.batch_tokens // length, self.max_batch_size)
        return max(fit // ROW_MULTIPLE * ROW_MULTIPLE, min(ROW_MULTIPLE, self.max_batch_size))

    def shapes(self) -> list[tuple[int, int]]:
        """Every (rows, length) a call may run in."""
        return [(self.rows(n), n) for n in self.lengths]

    def plan(self, tokens: np.ndarray) -> list[tuple[np.ndarray, tuple[int, int]]]:
        """(row indices, (rows, length) shape) per call, for rows of `tokens` tokens each
        (special tokens included). Longest rows first: each call takes the next rows of its
        shape (its first row's bucket), so the padding a longer bucket's call would carry is
        filled with shorter rows; only the last call is padded."""
        order = np.argsort(-np.asarray(tokens), kind="stable")
        calls, i = [], 0
        while i < len(order):
            length = self.length(int(tokens[order[i]]))
            rows = self.rows(length)
            calls.append((order[i:i + rows], (rows, length)))
            i += rows
        return calls
