"""Evaluation files: STS-style scored pairs and (query, positive, negative) triplets, as TSV.

Pairs, one of two layouts (chosen from the first line; every line must follow it):

    score<TAB>sentence1<TAB>sentence2
    genre<TAB>file<TAB>year<TAB>id<TAB>score<TAB>sentence1<TAB>sentence2[<TAB>...]  (STS Benchmark)

The STS Benchmark's extra trailing columns (source credits on some lines) are ignored.
Triplets: `query<TAB>positive<TAB>negative`. Blank lines are skipped; there is no header line.
Malformed lines are reported together, by line number, before any model is loaded.
"""

from __future__ import annotations

import dataclasses
import math
import os

MAX_REPORTED = 5  # malformed lines quoted in one error
STSB_MIN_FIELDS, STSB_SCORE = 7, 4


class EvalDataError(ValueError):
    """A missing or malformed evaluation file; the message names the file and the lines."""


@dataclasses.dataclass(frozen=True)
class Pairs:
    path: str
    layout: str  # "pairs" or "stsb"
    scores: tuple[float, ...]
    first: tuple[str, ...]
    second: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.scores)

    def texts(self) -> list[str]:
        """Every sentence: all the first ones, then all the second ones."""
        return [*self.first, *self.second]


@dataclasses.dataclass(frozen=True)
class Triplets:
    path: str
    queries: tuple[str, ...]
    positives: tuple[str, ...]
    negatives: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.queries)

    def texts(self) -> list[str]:
        """All queries, then all positives, then all negatives."""
        return [*self.queries, *self.positives, *self.negatives]


def _lines(path: str, what: str) -> list[tuple[int, list[str]]]:
    """(line number, tab-separated fields) of the non-blank lines. Only \\n, \\r\\n and \\r end
    a line, so other Unicode separators inside a sentence stay in it."""
    if not os.path.isfile(path):
        raise EvalDataError(f"{what} file {path!r} does not exist")
    with open(path, encoding="utf-8", errors="strict", newline=None) as f:
        try:
            return [(n, line.rstrip("\n").split("\t")) for n, line in enumerate(f, 1)
                    if line.strip()]
        except UnicodeDecodeError as e:
            raise EvalDataError(f"{what} file {path!r} is not UTF-8 ({e})") from e


def _score(value: str) -> float | None:
    try:
        score = float(value)
    except ValueError:
        return None
    return score if math.isfinite(score) else None


def _raise_bad(path: str, what: str, bad: list[str], expected: str) -> None:
    if bad:
        more = f" (and {len(bad) - MAX_REPORTED} more)" if len(bad) > MAX_REPORTED else ""
        raise EvalDataError(f"{what} file {path!r}: {'; '.join(bad[:MAX_REPORTED])}{more}; "
                            f"expected {expected}")


PAIRS_EXPECTED = ("score<TAB>sentence1<TAB>sentence2, or the STS Benchmark layout (7 or more "
                  "fields, the score 5th)")


def read_pairs(path: str) -> Pairs:
    rows = _lines(path, "pairs")
    if not rows:
        raise EvalDataError(f"pairs file {path!r} holds no pairs; expected {PAIRS_EXPECTED}")
    first = rows[0][1]
    stsb = len(first) >= STSB_MIN_FIELDS and _score(first[STSB_SCORE]) is not None
    start = STSB_SCORE if stsb else 0
    scores, left, right, bad = [], [], [], []
    for n, fields in rows:
        if (len(fields) < STSB_MIN_FIELDS) if stsb else (len(fields) != 3):
            bad.append(f"line {n} has {len(fields)} fields")
            continue
        score, a, b = fields[start:start + 3]
        if _score(score) is None:
            bad.append(f"line {n}: score {score!r} is not a number")
        elif not a.strip() or not b.strip():
            bad.append(f"line {n}: empty sentence")
        else:
            scores.append(_score(score))
            left.append(a)
            right.append(b)
    _raise_bad(path, "pairs", bad, PAIRS_EXPECTED)
    if len(scores) < 2:
        raise EvalDataError(f"pairs file {path!r} holds {len(scores)} pair; a correlation needs "
                            "at least 2")
    return Pairs(path, "stsb" if stsb else "pairs", tuple(scores), tuple(left), tuple(right))


def read_triplets(path: str) -> Triplets:
    rows = _lines(path, "triplets")
    bad, kept = [], []
    for n, fields in rows:
        if len(fields) != 3:
            bad.append(f"line {n} has {len(fields)} fields")
        elif not all(f.strip() for f in fields):
            bad.append(f"line {n}: empty text")
        else:
            kept.append(fields)
    expected = "query<TAB>positive<TAB>negative"
    _raise_bad(path, "triplets", bad, expected)
    if not kept:
        raise EvalDataError(f"triplets file {path!r} holds no triplets; expected {expected}")
    queries, positives, negatives = zip(*kept)
    return Triplets(path, queries, positives, negatives)
