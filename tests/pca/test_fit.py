"""The PCA maths against scikit-learn and numpy: moments, eigendecomposition, merge, save/load."""

import numpy as np
import pyarrow as pa
import pytest
from sklearn.decomposition import PCA, TruncatedSVD

from beam_embed.pipeline.common.finished_run.embedding_set import PoolingColumn
from beam_embed.pipeline.pca import fit as pca_fit
from beam_embed.pipeline.pca.fit import (
    FitSpec,
    Moments,
    MomentsCombineFn,
    fit_pca,
    load_fit,
    save_fit,
)
from tests.pca.fixtures import (
    FLOAT32_RTOL,
    TWO_FITS_RTOL,
    WIDTH,
    assert_close,
    clustered_matrix,
    records,
)

POOLING = PoolingColumn("mean", "mean", WIDTH, False)


def _fit(x, k=10, **flags):
    return fit_pca(Moments(x.shape[1]).add(x), FitSpec(POOLING, k, **flags))


@pytest.mark.parametrize("whiten", [False, True])
def test_fit_matches_sklearn_pca(monkeypatch, whiten):
    monkeypatch.setattr(pca_fit, "CHUNK_ROWS", 97)  # many chunks per block
    x, _ = clustered_matrix(2000)
    fit = _fit(x, whiten=whiten)
    ref = PCA(10, whiten=whiten, svd_solver="full").fit(x.astype(np.float64))
    assert fit.count == 2000
    assert_close(fit.mean, ref.mean_)
    # same sign convention, no flips needed
    assert_close(fit.components, ref.components_, rtol=FLOAT32_RTOL)
    assert_close(fit.explained_variance, ref.explained_variance_)
    assert_close(fit.explained_variance_ratio, ref.explained_variance_ratio_)
    assert_close(fit.singular_values, ref.singular_values_)
    assert_close(fit.transform(x), ref.transform(x.astype(np.float64)), rtol=FLOAT32_RTOL)


def test_uncentred_fit_matches_svd_of_the_raw_matrix():
    x, _ = clustered_matrix(1500, seed=3)
    fit = _fit(x, k=6, center=False)
    x64 = x.astype(np.float64)
    _, s, vt = np.linalg.svd(x64, full_matrices=False)
    signs = np.sign(vt[np.arange(6), np.abs(vt[:6]).argmax(axis=1)])
    assert_close(fit.components, vt[:6] * signs[:, None], rtol=FLOAT32_RTOL)
    assert_close(fit.singular_values, s[:6])
    assert_close(fit.transform(x), x64 @ (vt[:6] * signs[:, None]).T, rtol=FLOAT32_RTOL)
    ref = TruncatedSVD(6, algorithm="arpack", tol=0).fit(x64)  # ddof=0 variances
    assert_close(fit.explained_variance * (1499 / 1500), ref.explained_variance_)
    assert_close(fit.explained_variance_ratio, ref.explained_variance_ratio_)


def test_merged_accumulators_equal_a_single_pass():
    x, _ = clustered_matrix(1000, seed=5)
    fn = MomentsCombineFn(POOLING)
    bounds = [0, 3, 120, 121, 500, 777, 1000]
    blocks = [records({"mean": x[a:b]}) for a, b in zip(bounds, bounds[1:])]
    accs = [fn.create_accumulator() for _ in range(3)]
    for i, block in enumerate(blocks):
        fn.add_input(accs[i % 3], block)
    merged = fn.extract_output(fn.merge_accumulators([accs[2], accs[0], accs[1]]))
    whole = fn.add_input(fn.create_accumulator(), records({"mean": x}))
    assert merged.count == whole.count == 1000
    np.testing.assert_allclose(merged.total, whole.total, rtol=1e-12)  # float64 sums
    assert_close(merged.scatter, whole.scatter)  # other chunks: other float32 roundings
    a, b = fit_pca(merged, FitSpec(POOLING, 8)), fit_pca(whole, FitSpec(POOLING, 8))
    assert_close(a.components, b.components, rtol=TWO_FITS_RTOL)


def test_saved_fit_round_trips(tmp_path):
    x, _ = clustered_matrix(300, seed=9)
    fit = fit_pca(Moments(WIDTH).add(x),
                  FitSpec(POOLING, 7, center=True, whiten=True, source="/e/manifest.json",
                          model={"name": "m"}))
    back = load_fit(save_fit(fit, str(tmp_path / "pca.npz")))
    assert back.spec == fit.spec and back.count == fit.count
    for name in ("mean", "components", "explained_variance", "explained_variance_ratio",
                 "singular_values"):
        np.testing.assert_array_equal(getattr(back, name), getattr(fit, name))
    np.testing.assert_array_equal(back.transform(x), fit.transform(x))


def test_fit_needs_at_least_k_vectors():
    x, _ = clustered_matrix(5)
    with pytest.raises(ValueError, match="needs at least 10 vectors in column 'mean'; got 5"):
        _fit(x, k=10)


def test_null_vectors_are_refused():
    block = pa.table({"mean": pa.array([None, [1.0] * WIDTH], pa.list_(pa.float32(), WIDTH))})
    with pytest.raises(ValueError, match="column 'mean' holds 1 null vectors"):
        MomentsCombineFn(POOLING).add_input(Moments(WIDTH), block)
