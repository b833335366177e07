"""`run`'s inputs as they are named: a file named several ways is read once, a file whose name is
not UTF-8 is refused up front, naming it."""

from __future__ import annotations

import json
import os

import pytest

from beam_embed.pipeline.job.command import main
from beam_embed.pipeline.job.sources import expand_inputs
from tests.job_helpers import parquet_rows, run_job, write_lines


def _corpus(folder) -> None:
    """d/a.jsonl (100 records), d/b.jsonl (50) and d/link.jsonl, a link to a.jsonl."""
    d = folder / "d"
    d.mkdir()
    write_lines(str(d / "a.jsonl"), [json.dumps({"text": f"the cat {i}"}) for i in range(100)])
    write_lines(str(d / "b.jsonl"), [json.dumps({"text": f"a dog {i}"}) for i in range(50)])
    os.symlink("a.jsonl", d / "link.jsonl")


def test_every_name_of_one_file_gives_it_once_under_its_own_name(tmp_path, monkeypatch, capsys):
    _corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    files = expand_inputs(["d/*.jsonl", "./d/a.jsonl", "d/link.jsonl", "d/../d/b.jsonl"])
    assert [path for path, _ in files] == ["d/a.jsonl", "d/b.jsonl"]
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "named more than once" in line]
    assert len(lines) == 1
    assert lines[0].endswith("--input: 2 files named more than once (3 more names, e.g. "
                             "'d/link.jsonl' is 'd/a.jsonl'); each file is read once")


def test_a_link_named_first_gives_way_to_the_file_it_names(tmp_path, monkeypatch):
    _corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert [p for p, _ in expand_inputs(["d/link.jsonl", "d/a.jsonl"])] == ["d/a.jsonl"]
    assert [p for p, _ in expand_inputs(["d/link.jsonl"])] == ["d/link.jsonl"]  # its only name


def test_files_named_once_say_nothing(tmp_path, monkeypatch, capsys):
    _corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert [p for p, _ in expand_inputs(["d/a.jsonl", "d/b.jsonl"])] == ["d/a.jsonl", "d/b.jsonl"]
    assert "named more than once" not in capsys.readouterr().err


@pytest.mark.pipeline
def test_a_file_named_three_ways_is_embedded_once(tiny_export, tmp_path, monkeypatch, capsys):
    _corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    manifest = run_job(str(tmp_path / "out"), "--input", "d/*.jsonl", "--input", "./d/a.jsonl",
                       "--model", tiny_export)
    c = manifest["counts"]
    assert (c["read"], c["embedded"], manifest["inputs"]["files"]) == (150, 150, 2)
    rows = parquet_rows(str(tmp_path / "out"))
    assert sorted({r["source"] for r in rows.values()}) == ["d/a.jsonl", "d/b.jsonl"]
    assert "each file is read once" in capsys.readouterr().err


def _undecodable(folder) -> str:
    """A file whose name holds the byte 0xff (not UTF-8), beside a good one: its path as Python
    names it (the byte as a surrogate escape)."""
    d = folder / "in"
    d.mkdir()
    write_lines(str(d / "good.txt"), ["the cat", "a dog"])
    name = os.path.join(os.fsencode(d), b"bad\xffname.txt")
    with open(name, "wb") as f:
        f.write(b"the mat\nrun play\n")
    return os.fsdecode(name)


@pytest.mark.pipeline
def test_a_file_name_that_is_not_utf8_is_refused_up_front(tiny_export, tmp_path, capsys):
    _undecodable(tmp_path)
    out = tmp_path / "out"
    code = main(["--input", str(tmp_path / "in" / "*"), "--model", tiny_export, "--output",
                 str(out), "--progress_every", "0"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not out.exists()  # before any output folder
    assert err.strip().splitlines()[-1] == (
        f"beam-embed run: --input '{tmp_path}/in/*' matches a file whose name is not UTF-8: "
        f"'{tmp_path}/in/bad\\xffname.txt'; the output holds file names as UTF-8 text (ids, "
        "the source column): rename it or leave it out of --input")


def test_a_file_named_alone_with_an_undecodable_name_is_refused(tmp_path):
    path = _undecodable(tmp_path)
    with pytest.raises(ValueError, match=r"^--input '.*bad\\xffname\.txt' matches a file whose "
                                         r"name is not UTF-8: '.*/in/bad\\xffname\.txt';"):
        expand_inputs([str(tmp_path / "in" / "good.txt"), path])
