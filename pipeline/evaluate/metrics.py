"""Scores for sentence vectors: cosine similarity, Pearson and Spearman correlation, triplet
accuracy. Plain numpy in float64 (the tests check them against scipy.stats)."""

from __future__ import annotations

import numpy as np


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two [n, width] arrays; a zero vector scores 0."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return (a * b).sum(axis=1) / np.maximum(norms, 1e-300)


def ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks; tied values share the average of their ranks (as scipy's rankdata)."""
    x = np.asarray(x, np.float64)
    order = np.argsort(x, kind="stable")
    _, first, counts = np.unique(x[order], return_index=True, return_counts=True)
    out = np.empty(len(x))
    out[order] = np.repeat(first + (counts + 1) / 2, counts)
    return out


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r; NaN when either side is constant (no correlation is defined)."""
    x = np.asarray(x, np.float64) - np.mean(x)
    y = np.asarray(y, np.float64) - np.mean(y)
    denominator = np.linalg.norm(x) * np.linalg.norm(y)
    return float(np.dot(x, y) / denominator) if denominator > 0 else float("nan")


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: Pearson's r of the (tie-averaged) ranks."""
    return pearson(ranks(x), ranks(y))


def triplet_accuracy(query: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> float:
    """Share of triplets with cos(query, positive) > cos(query, negative), strictly."""
    return float(np.mean(cosine(query, positive) > cosine(query, negative)))


def constant(x: np.ndarray) -> bool:
    """All values equal, to the rounding a cosine carries (identical texts' cosines differ in
    the last bits): no correlation with them means anything."""
    x = np.asarray(x, np.float64)
    return bool(np.ptp(x) <= 1e-9 * max(1.0, float(np.abs(x).max()))) if len(x) else True


def triplet_ties(query: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> int:
    """Triplets whose positive and negative score the same cosine with the query (counted as
    misses by triplet_accuracy)."""
    return int(np.sum(cosine(query, positive) == cosine(query, negative)))
