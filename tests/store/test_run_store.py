"""`run --store`: the run's rows upserted once it publishes; a store that cannot be reached is
one line before any data is read, and nothing is published."""

from __future__ import annotations

import os

import pytest

from beam_embed.pipeline.job.command import main
from tests.job_helpers import parquet_rows, write_lines

pytestmark = pytest.mark.pipeline


def test_a_run_loads_its_rows_into_the_store_as_it_publishes(tiny_export, tmp_path, capsys):
    import lancedb
    import numpy as np

    corpus = write_lines(str(tmp_path / "c.txt"), [f"text number {i} of the run" for i in range(9)])
    out, db = str(tmp_path / "out"), str(tmp_path / "db")
    args = ["--input", corpus, "--model", tiny_export, "--output", out, "--progress_every", "0",
            "--pooling", "mean,cls", "--store", f"lancedb:{db}", "--store_table", "docs"]
    assert main(args) == 0
    assert "9 rows upserted" in capsys.readouterr().err
    table = lancedb.connect(db).open_table("docs").to_arrow().to_pylist()
    rows = parquet_rows(out)
    assert {r["id"] for r in table} == set(rows)
    for r in table:  # the first pooling's vectors, exactly as the run stored them
        np.testing.assert_array_equal(np.asarray(r["vector"], np.float32),
                                      np.asarray(rows[r["id"]]["mean"], np.float32))
    assert main(args + ["--overwrite"]) == 0  # again: one point per id
    assert len(lancedb.connect(db).open_table("docs").to_arrow()) == 9


def test_an_unreachable_store_refuses_the_run_before_any_data(tiny_export, tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "c.txt"), ["one text"])
    out = str(tmp_path / "out")
    code = main(["--input", corpus, "--model", tiny_export, "--output", out,
                 "--store", "qdrant://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2 and "qdrant://127.0.0.1:9: cannot open the store" in err
    assert not os.path.exists(os.path.join(out, "manifest.json"))


def test_a_bad_store_uri_is_refused_with_the_flags(tiny_export, tmp_path, capsys):
    code = main(["--input", "x", "--model", tiny_export, "--output", str(tmp_path / "o"),
                 "--store", "redis://x"])
    assert code == 2 and "unknown store; expected a URI starting with one of" in \
        capsys.readouterr().err
