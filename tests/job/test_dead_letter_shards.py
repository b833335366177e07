"""Dead letters are bounded like the embeddings: an in-process run's errors files roll before
--shard_mb, every dead letter in exactly one of them, all listed by the manifest."""

from __future__ import annotations

import json
import os

import pytest

from beam_embed.pipeline.job.command import main
from tests.job_helpers import dead_letters, write_lines

pytestmark = pytest.mark.pipeline


def test_errors_files_roll_at_the_shard_bound(tiny_export, tmp_path):
    # 4,000 texts over --max_text_bytes: ~400 bytes a dead letter, 1.5 MiB in all at 1 MiB a file
    long = [f"long {i} " + "word " * 60 for i in range(4000)]
    short = [f"short text {i}" for i in range(40)]
    corpus = write_lines(str(tmp_path / "corpus.txt"), long + short)
    out = str(tmp_path / "out")
    assert main(["--input", corpus, "--model", tiny_export, "--output", out, "--shard_mb", "1",
                 "--max_text_bytes", "100"]) == 0
    with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    files = manifest["errors_files"]
    assert len(files) >= 2
    sizes = [os.path.getsize(os.path.join(out, name)) for name in files]
    assert max(sizes) <= 1 << 20 and sum(sizes) > 1 << 20
    letters = dead_letters(out)
    expected = {f"{corpus}:{i + 1}" for i in range(len(long))}
    assert sorted(d["id"] for d in letters) == sorted(expected)  # each once
    assert all("--max-text-bytes" in d["reason"] for d in letters)
    assert manifest["counts"]["dead_lettered"] == len(long)
    assert manifest["counts"]["embedded"] == len(short)
