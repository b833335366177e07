"""The README's first command: the default job on the bundled model and sample corpus."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from beam_embed.models.export_cache import entries
from beam_embed.pipeline.job.command import main
from tests.job_helpers import parquet_rows

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end


def test_default_run_embeds_the_sample_corpus_with_minilm(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BEAM_EMBED_CACHE", str(tmp_path / "cache"))
    assert main(["--progress_every", "0"]) == 0
    with open(os.path.join("output", "embeddings", "manifest.json")) as f:
        manifest = json.load(f)
    assert manifest["model"]["name"] == "all-MiniLM-L6-v2"
    assert manifest["poolings"] == [{"name": "mean", "column": "mean", "width": 384,
                                     "normalize": True}]
    counts = manifest["counts"]
    assert {k: counts[k] for k in ("read", "embedded", "skipped_empty", "dead_lettered",
                                   "truncated")} == {"read": 600, "embedded": 600,
                                                     "skipped_empty": 0, "dead_lettered": 0,
                                                     "truncated": 0}
    assert counts["tokens"] > 600 * 8
    rows = parquet_rows(os.path.join("output", "embeddings"))
    topics = {r["topic"] for r in rows.values()}
    assert len(topics) == 6
    norms = np.linalg.norm(np.array([r["mean"] for r in rows.values()]), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)
    assert "done: read 600, embedded 600 (0 truncated)" in capsys.readouterr().err
    # the preset's export is cached: the next run reuses it (and refuses to overwrite)
    assert [e.kind for e in entries(str(tmp_path / "cache"))].count("export") == 1
    assert main([]) == 2
