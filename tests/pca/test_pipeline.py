"""The whole job on small folders in the embedding job's format, against scikit-learn."""

import json
import os
import re

import numpy as np
import pyarrow.parquet as pq
import pytest
from sklearn.decomposition import PCA

from beam_embed.pipeline.common.run_folder.staging import check_output, publish
from beam_embed.pipeline.pca.command import main
from beam_embed.pipeline.pca.fit import load_fit
from beam_embed.pipeline.pca.job import PCA_OUTPUT
from tests.pca.fixtures import (
    FLOAT32_RTOL,
    TWO_FITS_RTOL,
    WIDTH,
    assert_close,
    clustered_matrix,
    pcs_of,
    read_projections,
    records,
    write_embeddings,
)

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end


def _table(n=600, seed=0):
    x, labels = clustered_matrix(n, seed=seed)
    second = (x[:, ::-1] * 0.5).copy()
    texts = [f"record {i} about topic {t}" for i, t in enumerate(labels)]
    return x, records({"mean": x, "mean_layer_m2": second}, texts=texts,
                      meta={"title": [f"topic {t}" for t in labels]})


def _run(input_dir, output_dir, *flags) -> dict:
    """Runs the job; returns the manifest it wrote."""
    assert main(["--input", str(input_dir), "--output", str(output_dir), *flags]) == 0
    return json.loads((output_dir / "manifest.json").read_text())


def _refused(capsys, input_dir, output_dir, *flags) -> str:
    """Runs the job expecting a configuration error; returns the one line it printed."""
    assert main(["--input", str(input_dir), "--output", str(output_dir), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("beam-embed pca: ") and err.count("\n") == 1
    return err


def test_job_matches_sklearn_and_writes_every_output(tmp_path):
    x, table = _table()
    write_embeddings(str(tmp_path / "emb"), table, shards=4)
    manifest = _run(tmp_path / "emb", tmp_path / "viz", "--components", "8", "--sample", "250",
                    "--columns", "source,length,title", "--color-by", "title")
    ref = PCA(8, svd_solver="full").fit(x.astype(np.float64))

    fit = load_fit(str(tmp_path / "viz" / "pca.npz"))
    assert fit.spec.pooling.column == "mean" and fit.count == 600  # the manifest's first
    assert_close(fit.components, ref.components_, rtol=FLOAT32_RTOL)
    assert_close(fit.explained_variance, ref.explained_variance_)
    assert_close(fit.explained_variance_ratio, ref.explained_variance_ratio_)

    projections = read_projections(str(tmp_path / "viz"))
    assert projections.column_names == ["id"] + [f"pc_{i}" for i in range(1, 9)] + [
        "source", "num_tokens", "title"]
    np.testing.assert_array_equal(projections.column("id"), table.column("id"))
    assert_close(pcs_of(projections), ref.transform(x.astype(np.float64)), rtol=FLOAT32_RTOL)
    np.testing.assert_array_equal(projections.column("title"), table.column("title"))

    assert manifest["projections"]["rows"] == 600
    assert manifest["sample"]["size"] == 250 and manifest["sample"]["of"] == 600
    assert pq.read_table(tmp_path / "viz" / "sample.parquet").num_rows == 250
    for name in ("plot.html", "plot.png", "projector/tensors.tsv", "projector/metadata.tsv",
                 "projector/projector_config.pbtxt"):
        assert (tmp_path / "viz" / name).stat().st_size > 0, name


def test_many_shards_and_workers_give_the_same_fit(tmp_path):
    x, table = _table(seed=1)
    write_embeddings(str(tmp_path / "one"), table, shards=1, row_group_size=1000)
    write_embeddings(str(tmp_path / "many"), table, shards=9, row_group_size=17)
    _run(tmp_path / "one", tmp_path / "a", "--components", "5", "--pooling", "mean@-2")
    _run(tmp_path / "many", tmp_path / "b", "--components", "5", "--pooling", "mean_layer_m2",
         "--direct_num_workers=3", "--direct_running_mode=multi_threading")
    a, b = load_fit(str(tmp_path / "a" / "pca.npz")), load_fit(str(tmp_path / "b" / "pca.npz"))
    assert a.count == b.count == 600 and a.spec.pooling.column == "mean_layer_m2"
    # other row groups: other float32 chunk sums (fit.py), float64 everywhere else
    assert_close(b.components, a.components, rtol=TWO_FITS_RTOL)
    assert_close(b.explained_variance, a.explained_variance)
    np.testing.assert_allclose(pcs_of(read_projections(str(tmp_path / "b"))),
                               pcs_of(read_projections(str(tmp_path / "a"))), rtol=1e-5,
                               atol=1e-5)
    same_sample = [pq.read_table(tmp_path / d / "sample.parquet").column("id") for d in "ab"]
    assert same_sample[0].equals(same_sample[1])


def test_tfrecord_shards_give_the_same_results(tmp_path):
    x, table = _table(n=200, seed=2)
    write_embeddings(str(tmp_path / "emb"), table, shards=3, formats=("parquet", "tfrecord"))
    _run(tmp_path / "emb", tmp_path / "viz", "--format", "tfrecord", "--components", "4",
         "--whiten")
    ref = PCA(4, whiten=True, svd_solver="full").fit(x.astype(np.float64))
    assert_close(load_fit(str(tmp_path / "viz" / "pca.npz")).components, ref.components_,
                 rtol=FLOAT32_RTOL)
    projections = read_projections(str(tmp_path / "viz"))
    np.testing.assert_array_equal(projections.column("text"), table.column("text"))
    np.testing.assert_array_equal(projections.column("truncated"), table.column("truncated"))
    assert_close(pcs_of(projections), ref.transform(x.astype(np.float64)), rtol=FLOAT32_RTOL)


def test_a_saved_fit_projects_new_data(tmp_path):
    x_old, old = _table(n=300, seed=3)
    x_new, new = _table(n=120, seed=4)
    write_embeddings(str(tmp_path / "old"), old, shards=2)
    write_embeddings(str(tmp_path / "new"), new, shards=2)
    _run(tmp_path / "old", tmp_path / "fit", "--components", "6")
    manifest = _run(tmp_path / "new", tmp_path / "viz", "--fit", str(tmp_path / "fit/pca.npz"),
                    "--dims", "3", "--color-by", "length")
    ref = PCA(6, svd_solver="full").fit(x_old.astype(np.float64))
    assert manifest["fit"]["reused"] and manifest["fit"]["count"] == 300
    copied = load_fit(str(tmp_path / "viz" / "pca.npz"))
    assert copied.spec.source == str(tmp_path / "old" / "manifest.json")
    assert_close(pcs_of(read_projections(str(tmp_path / "viz"))),
                 ref.transform(x_new.astype(np.float64)), rtol=FLOAT32_RTOL)
    assert manifest["projections"]["rows"] == 120


def test_the_closing_line_names_the_map_the_plots_show(tmp_path, capsys):
    _, table = _table(n=40, seed=5)
    write_embeddings(str(tmp_path / "emb"), table, shards=1)
    _run(tmp_path / "emb", tmp_path / "viz", "--components", "5", "--method", "tsne")
    done = [x for x in capsys.readouterr().err.splitlines() if "] done: " in x]
    assert len(done) == 1 and done[0].split("] ", 1)[1].startswith(
        f"done: PCA-5 of 40 records; the plots map the 40 sampled records by t-SNE of 5 PCs -> "
        f"{tmp_path / 'viz'} (plot.html")


@pytest.fixture()
def unreadable(tmp_path):
    """A folder whose manifest is fine but whose shards are garbage: reading any would fail."""
    _, table = _table(n=20)
    folder = write_embeddings(str(tmp_path / "emb"), table, shards=2)
    for name in os.listdir(folder):
        if name.endswith(".parquet"):
            (tmp_path / "emb" / name).write_bytes(b"not parquet")
    return tmp_path


@pytest.mark.parametrize("flags, message", [
    (["--pooling", "cls"], r"unknown pooling 'cls' .*expected one of \['mean', 'mean@-2', "
                           r"'mean_layer_m2'\]"),
    (["--components", "49"], r"--components 49 is out of range for column 'mean' of width "
                             rf"{WIDTH} with 20 records; expected 1..20"),
    (["--method", "mds"], r"unknown method 'mds'; expected one of \['pca', 'tsne', 'umap'\]"),
    (["--color-by", "colour"], r"unknown --color-by 'colour'; expected one of \['length', "
                               r"'num_tokens', 'source', 'title', 'truncated'\]; a field of the "
                               r"input is a column when the run carries it: run `beam-embed run` "
                               r"again with --metadata_fields title,colour$"),
    (["--color-by", "text"], r"unknown --color-by 'text'; expected one of \[.*'truncated'\]; "
                             r"'text' is a column `beam-embed run` writes itself, one value per "
                             r"record, not a field it carries as a group \(an input field of "
                             r"that name is carried as 'meta_text'\)$"),
    (["--color-by", "mean"], r"unknown --color-by 'mean'; expected one of \[.*'truncated'\]; "
                             r"'mean' is a column `beam-embed run` writes itself"),
    (["--columns", "id,txt"], r"unknown column 'txt' in --columns; expected some of"),
    (["--format", "tfrecord"], r"format 'tfrecord' has no shards .*expected one of \['parquet'\]"),
    (["--sample", "100001"], r"--sample 100001 is out of range; expected 2..100000"),
    (["--components", "1", "--dims", "3"], r"--dims 3 needs at least 3 components; got 1"),
])
def test_bad_options_fail_before_reading_data(capsys, unreadable, flags, message):
    assert re.search(message, _refused(capsys, unreadable / "emb", unreadable / "viz", *flags))
    assert not (unreadable / "viz").exists()


def test_color_by_text_of_a_run_without_text_suggests_no_flag_run_refuses(tmp_path, capsys):
    x, _ = clustered_matrix(20)
    folder = write_embeddings(str(tmp_path / "emb"), records({"mean": x}), shards=1)
    err = _refused(capsys, folder, tmp_path / "viz", "--color-by", "text")
    assert "'text' is a column `beam-embed run` writes itself" in err
    assert "--metadata_fields" not in err


def test_missing_manifest_and_previous_runs_are_refused(capsys, unreadable):
    err = _refused(capsys, unreadable / "nowhere", unreadable / "viz")
    assert re.search(r"no manifest.json in '.*nowhere'", err)
    (unreadable / "viz").mkdir()
    (unreadable / "viz" / "projections-00000-of-00001.parquet").write_bytes(b"old")
    # no manifest lists it: it may be the user's, so it is never replaced, not even with the flag
    err = _refused(capsys, unreadable / "emb", unreadable / "viz", "--overwrite")
    assert re.search(r"holds files that look like `beam-embed pca` outputs but no manifest.json "
                     r"lists them \(projections-00000-of-00001.parquet\)", err)
    (unreadable / "viz" / "manifest.json").write_text(json.dumps(
        {"kind": "pca", "projections": {"files": ["projections-00000-of-00001.parquet"]}}))
    err = _refused(capsys, unreadable / "emb", unreadable / "viz")
    assert re.search(r"holds a previous run .*pass --overwrite", err)


def test_flags_that_disagree_with_a_saved_fit_are_refused(capsys, tmp_path):
    x, table = _table(n=100, seed=6)
    write_embeddings(str(tmp_path / "emb"), table, shards=1)
    _run(tmp_path / "emb", tmp_path / "fit", "--components", "3")
    capsys.readouterr()  # the fit's closing lines
    saved = str(tmp_path / "fit/pca.npz")
    err = _refused(capsys, tmp_path / "emb", tmp_path / "viz", "--fit", saved, "--components", "4")
    assert re.search(r"--components 4 disagrees with --fit .*components=3", err)
    err = _refused(capsys, tmp_path / "emb", tmp_path / "viz", "--fit", saved,
                   "--pooling", "mean_layer_m2")
    assert re.search(r"was made on column 'mean' of width 48; .* has 'mean_layer_m2'", err)


def _with_model(folder, **model) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["model"].update(model)
    path.write_text(json.dumps(manifest))


def test_a_saved_fit_of_vectors_made_otherwise_is_refused(capsys, tmp_path):
    """A fit's axes belong to the vectors it was fitted on: a fit of normalized vectors, of
    another max length or of another model is refused for a run whose manifest says otherwise,
    naming each difference, before any data is read; the same settings are accepted."""
    _, table = _table(n=100, seed=7)
    write_embeddings(str(tmp_path / "fitted"), table, shards=1)
    _with_model(tmp_path / "fitted", max_seq_length=128, precision="fp32")
    _run(tmp_path / "fitted", tmp_path / "fit", "--components", "3")
    saved = str(tmp_path / "fit/pca.npz")
    write_embeddings(str(tmp_path / "normalized"), table, shards=1,
                     normalize={"mean": True, "mean_layer_m2": True})
    _with_model(tmp_path / "normalized", max_seq_length=128, precision="fp32")
    capsys.readouterr()
    err = _refused(capsys, tmp_path / "normalized", tmp_path / "viz", "--fit", saved)
    assert f"--fit {saved} was made on vectors embedded with other settings" in err
    assert f"normalized False, {tmp_path / 'normalized' / 'manifest.json'}'s True" in err
    assert "max length" not in err

    write_embeddings(str(tmp_path / "longer"), table, shards=1)
    _with_model(tmp_path / "longer", max_seq_length=256, precision="fp32", fingerprint="0ther")
    err = _refused(capsys, tmp_path / "longer", tmp_path / "viz", "--fit", saved)
    assert "max length 128, " in err and "'s 256" in err
    assert "model (fingerprint) 'abc123', " in err and "'s '0ther'" in err
    assert "normalized" not in err
    assert not (tmp_path / "viz").exists()

    write_embeddings(str(tmp_path / "same"), table, shards=1)  # the same settings: applied
    _with_model(tmp_path / "same", max_seq_length=128, precision="fp32")
    assert _run(tmp_path / "same", tmp_path / "viz", "--fit", saved)["fit"]["reused"]


def _pca_manifest(projections: list[str]) -> str:
    return json.dumps({"kind": "pca", "fit": {"file": "pca.npz"}, "sample_file": "sample.parquet",
                       "projections": {"files": projections}, "html": "plot.html",
                       "png": "plot.png", "projector": {"tensors": "projector/tensors.tsv"}})


def test_overwrite_removes_the_previous_run_and_nothing_else(tmp_path):
    old = ["pca.npz", "sample.parquet", "projections-00003-of-00004.parquet", "plot.html",
           "plot.png", "projector/tensors.tsv"]
    for name in old + ["notes.txt", "projector/mine.tsv"]:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("old")
    (tmp_path / "manifest.json").write_text(_pca_manifest(["projections-00003-of-00004.parquet"]))
    previous = check_output(str(tmp_path), PCA_OUTPUT, overwrite=True)
    staging = tmp_path / ".beam-embed-staging-new"
    (staging / "projector").mkdir(parents=True)
    new = ["pca.npz", "sample.parquet", "projections-00000-of-00001.parquet", "plot.html",
           "plot.png", "projector/tensors.tsv"]
    for name in new:
        (staging / name).write_text("new")
    (staging / "manifest.json").write_text(_pca_manifest(["projections-00000-of-00001.parquet"]))
    publish(str(staging), str(tmp_path), PCA_OUTPUT, previous)
    assert {str(p.relative_to(tmp_path)): p.read_text() for p in tmp_path.rglob("*")
            if p.is_file() and p.name != "manifest.json"} == {
        **dict.fromkeys(new, "new"), "notes.txt": "old", "projector/mine.tsv": "old"}
