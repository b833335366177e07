"""Scored sentence pairs made from the sample corpus's sentence parts, so `beam-embed eval` runs
on a fresh clone: a quick check that a model ranks pairs sensibly, not a benchmark (the README
says where to get the STS Benchmark for real numbers).

A sentence is subject + verb + object + ending, all from one topic. A pair's score is how much
it shares, by construction: 0 for two topics; for one topic, 1 plus the number of the four
parts the two sentences have in common (1..4).
"""

from __future__ import annotations

import os
import random

from beam_embed.pipeline.common.settings.sample_corpus import TOPICS
from beam_embed.pipeline.evaluate.data import Pairs

SAMPLE_PAIRS = os.path.join("output", "sample", "pairs.tsv")
SAMPLE_NAME = "(the sample pairs)"  # what `eval`'s rows name as their file
PARTS = 4


def _other(rng: random.Random, choices: list[str], not_this: str) -> str:
    return rng.choice([c for c in choices if c != not_this])


def pairs(n: int = 300, seed: int = 11) -> list[tuple[int, str, str]]:
    """(score, sentence1, sentence2); the five scores equally often."""
    rng = random.Random(seed)
    topics = list(TOPICS)
    out = []
    for i in range(n):
        score = i % (PARTS + 1)
        topic = rng.choice(topics)
        first = [rng.choice(part) for part in TOPICS[topic]]
        if score == 0:
            other = TOPICS[_other(rng, topics, topic)]
            second = [rng.choice(part) for part in other]
        else:
            shared = set(rng.sample(range(PARTS), score - 1))
            second = [word if k in shared else _other(rng, TOPICS[topic][k], word)
                      for k, word in enumerate(first)]
        out.append((score, " ".join(first), " ".join(second)))
    rng.shuffle(out)
    return out


def sample_dataset() -> Pairs:
    """The sample pairs as `eval` scores them without --pairs: made in memory, so a quick check
    writes nothing into the folder it runs from."""
    scores, first, second = zip(*pairs())
    return Pairs(SAMPLE_NAME, "pairs", tuple(map(float, scores)), first, second)


def write_sample_pairs(path: str = SAMPLE_PAIRS) -> str:
    """Writes `score<TAB>sentence1<TAB>sentence2` lines once; later runs reuse the file."""
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{score}\t{a}\t{b}\n" for score, a, b in pairs())
    return path
