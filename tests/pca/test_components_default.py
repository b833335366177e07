"""K and the plots against what a run can give: the default fits runs of fewer records than 50,
and an impossible --components, --dims, --sample or a run too small is refused before any data
is read (exit 2, one line)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from sklearn.decomposition import PCA

from beam_embed.pipeline.common.finished_run.embedding_set import PoolingColumn
from beam_embed.pipeline.pca.command import main
from beam_embed.pipeline.pca.fit import FitSpec, Moments, fit_pca, save_fit
from tests.pca.fixtures import (
    FLOAT32_RTOL,
    MODEL,
    WIDTH,
    assert_close,
    clustered_matrix,
    pcs_of,
    read_projections,
    records,
    write_embeddings,
)

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

MEAN = PoolingColumn("mean", "mean", WIDTH, False)


def _folder(tmp_path, n: int, garbage: bool = False):
    """n records of width WIDTH; `garbage`: shards that fail whoever reads them."""
    x, _ = clustered_matrix(n, seed=n)
    folder = write_embeddings(str(tmp_path / "emb"), records({"mean": x}), shards=2 if n > 1 else 1)
    if garbage:
        for name in os.listdir(folder):
            if name.endswith(".parquet"):
                (tmp_path / "emb" / name).write_bytes(b"not parquet")
    return x


def _refused(capsys, tmp_path, *flags) -> str:
    code = main(["--input", str(tmp_path / "emb"), "--output", str(tmp_path / "viz"), *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("beam-embed pca: ") and err.count("\n") == 1
    assert not (tmp_path / "viz").exists()
    return err.removeprefix("beam-embed pca: ").rstrip("\n")


def _saved_fit(tmp_path, k: int) -> str:
    x, _ = clustered_matrix(200, seed=9)
    path = str(tmp_path / "old.npz")
    save_fit(fit_pca(Moments(WIDTH).add(x), FitSpec(MEAN, k, model=MODEL)), path)
    return path


def test_default_components_fit_a_run_of_fewer_records_than_50(tmp_path):
    x = _folder(tmp_path, 20)
    assert main(["--input", str(tmp_path / "emb"), "--output", str(tmp_path / "viz")]) == 0
    manifest = json.loads((tmp_path / "viz" / "manifest.json").read_text())
    assert manifest["fit"]["components"] == 20 and manifest["projections"]["rows"] == 20
    ref = PCA(20, svd_solver="full").fit(x.astype(np.float64))
    # the 20th axis has no variance (20 centred points span 19): its direction is arbitrary
    # the ratios' total variance is the float32-summed scatter's trace (measured: rtol 1.07e-6)
    assert_close(manifest["fit"]["explained_variance_ratio"][:19],
                 ref.explained_variance_ratio_[:19], rtol=2e-6)
    assert_close(pcs_of(read_projections(str(tmp_path / "viz")))[:, :19],
                 ref.transform(x.astype(np.float64))[:, :19], rtol=FLOAT32_RTOL)


@pytest.mark.parametrize("flags, message", [
    (["--components", "21"], f"--components 21 is out of range for column 'mean' of width "
                             f"{WIDTH} with 20 records; expected 1..20"),
    (["--components", "0"], f"--components 0 is out of range for column 'mean' of width "
                            f"{WIDTH} with 20 records; expected 1..20"),
    (["--sample", "1"], "--sample 1 is out of range; expected 2..100000 (the plots draw at "
                        "least 2 points; 100000 is the TensorBoard projector's limit)"),
])
def test_impossible_values_are_refused_before_reading_data(capsys, tmp_path, flags, message):
    _folder(tmp_path, 20, garbage=True)
    assert _refused(capsys, tmp_path, *flags) == message


def test_components_up_to_the_width_when_records_are_more(capsys, tmp_path):
    _folder(tmp_path, 60, garbage=True)
    assert _refused(capsys, tmp_path, "--components", "49") == (
        f"--components 49 is out of range for column 'mean' of width {WIDTH}; expected 1..48")


def test_a_run_of_one_record_is_refused_with_or_without_a_saved_fit(capsys, tmp_path):
    _folder(tmp_path, 1, garbage=True)
    message = (f"{tmp_path / 'emb' / 'manifest.json'} counts 1 embedded record(s); PCA and its "
               "plots need at least 2")
    assert _refused(capsys, tmp_path) == message
    assert _refused(capsys, tmp_path, "--fit", _saved_fit(tmp_path, 5)) == message


def test_three_dims_need_three_records_to_fit(capsys, tmp_path):
    _folder(tmp_path, 2, garbage=True)
    assert _refused(capsys, tmp_path, "--dims", "3") == (
        f"--dims 3 needs at least 3 components; column 'mean' of width {WIDTH} with 2 records "
        "has at most 2")


def test_a_map_of_fewer_points_than_dims_is_refused(capsys, tmp_path):
    _folder(tmp_path, 2, garbage=True)
    assert _refused(capsys, tmp_path, "--fit", _saved_fit(tmp_path, 5), "--dims", "3",
                    "--method", "tsne") == (
        "--method tsne --dims 3 needs at least 3 points to map; the sample has 2 (--sample "
        "10000 of 2 records)")


def test_a_saved_fit_draws_two_records_in_three_dims(tmp_path):
    _folder(tmp_path, 2)
    saved = _saved_fit(tmp_path, 5)
    assert main(["--input", str(tmp_path / "emb"), "--output", str(tmp_path / "viz"),
                 "--fit", saved, "--dims", "3"]) == 0
    manifest = json.loads((tmp_path / "viz" / "manifest.json").read_text())
    assert manifest["fit"]["components"] == 5 and manifest["plot"]["dims"] == 3
    assert read_projections(str(tmp_path / "viz")).num_rows == 2


def test_a_fit_of_fewer_vectors_than_components_says_what_would_do():
    # what the job meets only when a manifest does not count its records (older runs)
    x, _ = clustered_matrix(20)
    with pytest.raises(ValueError, match=r"PCA with 50 components needs at least 50 vectors in "
                                         r"column 'mean'; got 20 \(pass --components 20 or "
                                         r"fewer\)"):
        fit_pca(Moments(WIDTH).add(x), FitSpec(MEAN, 50))
