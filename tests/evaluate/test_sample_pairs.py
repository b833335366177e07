"""The sample pairs: each score is what its two sentences share, recovered here by parsing the
sentences back into the sample corpus's parts."""

from __future__ import annotations

import collections

from beam_embed.pipeline.common.settings.sample_corpus import TOPICS
from beam_embed.pipeline.evaluate.data import read_pairs
from beam_embed.pipeline.evaluate.sample_pairs import pairs, write_sample_pairs


def _parts(sentence: str) -> tuple[str, tuple[str, ...]]:
    """(topic, (subject, verb, object, ending)) of a sentence built from TOPICS."""
    found = []
    for topic, (subjects, verbs, objects, endings) in TOPICS.items():
        for parts in ((s, v, o, e) for s in subjects for v in verbs for o in objects
                      for e in endings):
            if " ".join(parts) == sentence:
                found.append((topic, parts))
    assert len(found) == 1, sentence
    return found[0]


def test_scores_are_topic_and_shared_parts():
    made = pairs()
    assert made == pairs()  # deterministic
    assert collections.Counter(score for score, _, _ in made) == dict.fromkeys(range(5), 60)
    for score, first, second in made:
        (t1, p1), (t2, p2) = _parts(first), _parts(second)
        if score == 0:
            assert t1 != t2
        else:
            assert t1 == t2 and sum(a == b for a, b in zip(p1, p2)) == score - 1


def test_the_file_reads_back_as_pairs(tmp_path):
    path = write_sample_pairs(str(tmp_path / "sample" / "pairs.tsv"))
    data = read_pairs(path)
    assert data.layout == "pairs" and len(data) == 300
    assert list(zip(data.scores, data.first, data.second)) == [
        (float(s), a, b) for s, a, b in pairs()]
