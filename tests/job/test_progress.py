"""The progress lines' percentage follows the records embedded: at 95% of them it reads at least
85%, on a corpus with markup and a length mix (long texts come last in each sorted window),
plain or compressed, sampled from its start or read whole; and the launcher's estimate of the
records is close to the count."""

from __future__ import annotations

import gzip
import json
import os
import random
import re

import pytest

from beam_embed.pipeline.job.formats import Fields
from beam_embed.pipeline.job.input_size import PREFIX_BYTES, expected_records
from beam_embed.pipeline.job.settings import RunSettings
from tests.job_helpers import run_job

pytestmark = pytest.mark.pipeline  # whole jobs, end to end

WORDS = "the cat sat on a mat while river banks hold money and dogs play".split()
LINE = re.compile(r"worker \d+: (\d+) records embedded, \d+/s, ~(\d+)% of input, ETA")


def _corpus(path, n: int, compress: bool) -> str:
    """JSONL with ids and metadata around texts of mixed length: 95% short, 5% long."""
    rng = random.Random(3)
    lines = []
    for i in range(n):
        words = rng.randint(40, 120) if rng.random() < 0.05 else rng.randint(3, 25)
        lines.append(json.dumps({"id": f"doc-{i:06d}", "lang": "en", "topic": WORDS[i % 14],
                                 "text": " ".join(rng.choice(WORDS) for _ in range(words))}))
    data = ("\n".join(lines) + "\n").encode()
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.mark.parametrize("n, compress", [(300, False), (3000, False), (3000, True)])
def test_the_percentage_follows_the_records(n, compress, tiny_export, tmp_path, capsys):
    corpus = _corpus(tmp_path / ("c.jsonl.gz" if compress else "c.jsonl"), n, compress)
    manifest = run_job(str(tmp_path / "out"), "--input", corpus, "--model", tiny_export,
                       "--max_batch_size", "16", "--progress_every", "0.000001")
    assert manifest["counts"]["embedded"] == n
    figures = [(int(done), int(pct)) for done, pct in LINE.findall(capsys.readouterr().err)]
    assert len(figures) > 10
    for done, pct in figures:  # within a few points of the records' share, all along
        assert abs(pct - 100 * done / n) <= 6, (done, pct)
    late = [pct for done, pct in figures if done >= 0.95 * n]
    assert late and min(late) >= 85


def test_the_estimate_of_records(tiny_export, tmp_path):
    """Read whole (a small file): the count; sampled (a large one): close to it."""
    small = _corpus(tmp_path / "small.jsonl", 200, False)
    large = _corpus(tmp_path / "large.jsonl.gz", 20_000, True)
    fields = Fields("text", "id", ("lang",), 1 << 20)  # what a run reads, as the job reads it
    settings = RunSettings(input_format=None, clean=True, split="none")
    assert expected_records(settings, fields, [(small, _size(small))]) == 200
    assert _size(large) > PREFIX_BYTES  # only its start is read
    assert abs(expected_records(settings, fields, [(large, _size(large))]) - 20_000) \
        < 20_000 * 0.05
    both = expected_records(settings, fields, [(small, _size(small)), (large, _size(large))])
    assert abs(both - 20_200) < 20_000 * 0.05


def _size(path: str) -> int:
    return os.path.getsize(path)
