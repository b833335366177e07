"""`search` shows a text once, however many documents hold it (a licence paragraph in a
thousand packages filled the top 5 with its copies), and says how many hits it folded;
`--no-collapse` lists every record."""

from __future__ import annotations

import json

import numpy as np
import pytest

from beam_embed.pipeline.cli import main as cli
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "bank", "river", "money", "is", "was"]
REPEATED = "the cat sat on the mat and the dog sat on the bank"


@pytest.fixture(scope="module")
def output(tiny_export, tmp_path_factory):
    """40 documents, 4 of which hold one paragraph, in batches of their own (so their vectors
    may differ in the last bits), over 3 shards."""
    folder = tmp_path_factory.mktemp("collapse")
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS, rng.integers(3, 12))) for _ in range(36)]
    for at in (0, 11, 23, 35):
        texts.insert(at, REPEATED)
    lines = [json.dumps({"id": f"doc{i}", "text": t}) for i, t in enumerate(texts)]
    corpus = write_lines(str(folder / "corpus.jsonl"), lines)
    out = str(folder / "out")
    run_job(out, "--input", corpus, "--model", tiny_export, "--id_field", "id", "--format",
            "parquet", "--num_shards", "3", "--batch_tokens", "64")
    return out


def _search(capsys, *argv):
    code = cli(["search", *argv])
    got = capsys.readouterr()
    assert code == 0, got.err
    return got.out, got.err


def test_hits_of_one_text_are_shown_once_and_counted(output, capsys):
    every, _ = _search(capsys, output, REPEATED, "-k", "40", "--no-collapse", "--json")
    ranked = json.loads(every)[0]["hits"]
    assert [h["text"] for h in ranked[:4]] == [REPEATED] * 4  # what the user saw
    distinct = list(dict.fromkeys(h["text"] for h in ranked))[:5]  # collapsed by hand
    got, err = _search(capsys, output, REPEATED, "-k", "5", "--json")
    hits = json.loads(got)[0]["hits"]
    assert [h["text"] for h in hits] == distinct
    assert [h["copies"] for h in hits] == [sum(r["text"] == t for r in ranked) for t in distinct]
    assert hits[0]["copies"] == 4 and hits[0]["id"] == ranked[0]["id"]
    assert "folded 3 hit(s) whose text repeats a better hit's" in err
    text, _ = _search(capsys, output, REPEATED, "-k", "5")
    lines = text.splitlines()
    assert len(lines) == 6 and lines[1].endswith("(and 3 more with this text)")


def test_no_collapse_lists_every_record(output, capsys):
    got, err = _search(capsys, output, REPEATED, "-k", "5", "--no-collapse", "--json")
    hits = json.loads(got)[0]["hits"]
    assert [h["text"] for h in hits[:4]] == [REPEATED] * 4 and len(hits) == 5
    assert all(h["copies"] == 1 for h in hits) and "folded" not in err


def test_collapse_needs_the_texts(tiny_export, tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "c.txt"), [REPEATED, REPEATED, "a dog"])
    out = str(tmp_path / "out")
    run_job(out, "--input", corpus, "--model", tiny_export, "--format", "parquet",
            "--no-include_text")
    got, err = _search(capsys, out, REPEATED, "-k", "2", "--json")  # nothing to fold by
    assert len(json.loads(got)[0]["hits"]) == 2 and "folded" not in err
    assert cli(["search", out, REPEATED, "--collapse"]) == 2
    assert "--collapse folds hits of the same text, and this run stored no text" in \
        capsys.readouterr().err
