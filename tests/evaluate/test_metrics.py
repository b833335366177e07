"""The eval metrics against scipy.stats and plain loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from beam_embed.pipeline.evaluate.metrics import cosine, pearson, ranks, spearman, triplet_accuracy

# STS-like fixture: gold scores in 0.2 steps (many ties) and noisy similarities with ties too.
RNG = np.random.default_rng(7)
GOLD = np.round(RNG.uniform(0, 5, 200) * 5) / 5
SIMS = np.round(GOLD / 5 + RNG.normal(0, 0.3, 200), 2)


@pytest.mark.parametrize("x, y", [(SIMS, GOLD), (GOLD, GOLD[::-1]),
                                  (RNG.normal(size=50), RNG.normal(size=50)),
                                  (np.array([1.0, 2.0, 2.0, 3.0]), np.array([4.0, 4.0, 1.0, 0.0]))])
def test_correlations_equal_scipy(x, y):
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)


def test_ranks_average_ties_like_scipy():
    np.testing.assert_array_equal(ranks(SIMS), stats.rankdata(SIMS))
    np.testing.assert_array_equal(ranks([3, 1, 3, 3, 2]), [4, 1, 4, 4, 2])


def test_constant_input_has_no_correlation():
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))


def test_cosine_and_triplet_accuracy_match_loops():
    q, p, n = (RNG.normal(size=(40, 6)) for _ in range(3))
    p[0] = q[0]  # a positive identical to its query
    n[1] = 0.0  # a zero vector scores 0
    want = [float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) or 1.0)) for a, b in zip(q, p)]
    np.testing.assert_allclose(cosine(q, p), want, atol=1e-12)
    assert cosine(q[1:2], n[1:2])[0] == 0.0
    wins = [cosine(q[i:i + 1], p[i:i + 1])[0] > cosine(q[i:i + 1], n[i:i + 1])[0]
            for i in range(40)]
    assert triplet_accuracy(q, p, n) == sum(wins) / 40
    assert triplet_accuracy(q, q, q) == 0.0  # ties are not wins
