"""`pca --method tsne` (or umap) on a sample of identical vectors: t-SNE's start divides by the
points' spread and crashed the process (exit 139), leaving the folder's claim and staging folder
so that the next pca into it failed too. The plots fall back to the PCA map, said in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from beam_embed.pipeline.common.run_folder.claim_stores import CLAIM
from beam_embed.pipeline.common.run_folder.staging import STAGING_PREFIX
from beam_embed.pipeline.pca.maps import drawn_method, without_spread
from tests.pca.fixtures import clustered_matrix, read_projections, records, write_embeddings

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

WARNING = ("warning: the 40 sampled points are all the same vector, which t-SNE cannot map; "
           "the plots show the leading PCs instead")


def _pca(*argv: str) -> subprocess.CompletedProcess:
    """The command in a process of its own, as the user ran it: a crash is an exit code here."""
    env = {**os.environ, "PYTHONPATH": ":".join(sys.path)}
    return subprocess.run([sys.executable, "-m", "beam_embed.pipeline.cli", "pca", *argv],
                          capture_output=True, text=True, env=env, timeout=600)


def test_tsne_of_identical_vectors_draws_the_pca_map_and_leaves_no_claim(tmp_path):
    same = np.tile(clustered_matrix(1)[0], (40, 1))
    emb = write_embeddings(str(tmp_path / "emb"), records({"mean": same}), shards=2)
    viz = tmp_path / "viz"
    for again in ([], ["--overwrite"]):  # the second run finds the folder free
        done = _pca("--input", emb, "--output", str(viz), "--method", "tsne",
                    "--components", "3", *again)
        assert done.returncode == 0, done.stderr[-3000:]
        assert [line.split("] ", 1)[-1] for line in done.stderr.splitlines()
                if "same vector" in line] == [WARNING]
        manifest = json.loads((viz / "manifest.json").read_text())
        assert manifest["plot"]["method"] == "pca"
        assert not (viz / CLAIM).exists()
        assert not [n for n in os.listdir(viz) if n.startswith(STAGING_PREFIX)]
        assert (viz / "plot.png").stat().st_size > 0 and (viz / "plot.html").exists()
    pcs = np.stack([read_projections(str(viz)).column(f"pc_{i}").to_numpy()
                    for i in (1, 2, 3)], axis=1)
    assert np.abs(pcs).max() <= 1e-5  # every point at the mean: nothing to spread


def test_only_a_sample_without_spread_falls_back():
    x = clustered_matrix(50)[0][:, :5].astype(np.float64)
    assert drawn_method("tsne", x) == ("tsne", None)
    assert drawn_method("pca", np.zeros((5, 3))) == ("pca", None)
    assert without_spread(np.full((5, 3), 7.0)) and not without_spread(x[:2])
    tiny = np.zeros((20, 3))
    tiny[0, 0] = 1e-30  # as far apart as t-SNE's float32 start cannot tell
    assert drawn_method("umap", tiny)[0] == "pca"
