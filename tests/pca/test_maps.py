"""The maps drawn for people: the leading PCs, t-SNE of all K, and the method checks."""

import importlib.util

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from beam_embed.pipeline.pca import maps as pca_maps
from beam_embed.pipeline.pca.maps import axis_labels, check_method, compute_map
from beam_embed.process.versions import install_command
from tests.pca.fixtures import clustered_matrix


def test_pca_map_is_the_leading_components():
    coords = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(compute_map("pca", coords, 2, 0), coords[:, :2])
    assert axis_labels("pca", 3) == ["PC1", "PC2", "PC3"]


def test_tsne_is_seeded_and_keeps_clusters_apart():
    x, labels = clustered_matrix(90, width=10, clusters=3)
    with threadpool_limits(1, user_api="openmp"):  # OpenMP barriers crawl on a shared 2-core box
        a, b = compute_map("tsne", x, 2, 7), compute_map("tsne", x, 2, 7)
    assert a.shape == (90, 2)
    np.testing.assert_array_equal(a, b)
    distances = np.linalg.norm(a[:, None] - a[None], axis=-1)
    np.fill_diagonal(distances, np.inf)
    assert (labels[distances.argmin(axis=1)] == labels).mean() > 0.95


def test_methods_are_checked(monkeypatch):
    with pytest.raises(ValueError, match=r"unknown method 'mds'; expected one of "
                                         r"\['pca', 'tsne', 'umap'\]"):
        check_method("mds", 50, 2)
    real = importlib.util.find_spec
    monkeypatch.setattr(pca_maps.importlib.util, "find_spec",
                        lambda name: None if name == "umap" else real(name))
    with pytest.raises(ValueError) as e:
        check_method("umap", 50, 2)
    assert str(e.value) == (f"method 'umap' needs umap-learn, which the base install leaves "
                            f"out: {install_command('umap')}; usable here: ['pca', 'tsne']")
    assert " -m pip install " in str(e.value)
    with pytest.raises(ValueError, match="--dims 3 needs at least 3 components; got 2"):
        check_method("pca", 2, 3)
