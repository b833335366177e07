"""Faults in `run`'s inputs said up front or in the closing lines: a folder given as --input, the
folders and broken symlinks a glob matches, columns a Parquet/CSV file lacks, duplicate ids."""

from __future__ import annotations

import json
import os

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_embed.pipeline.common.rows.records import INCOMPLETE, DeadLetter
from beam_embed.pipeline.job import sources
from beam_embed.pipeline.job.command import main
from beam_embed.pipeline.job.formats import Fields
from beam_embed.pipeline.job.sources import (
    FindDuplicateIds,
    ReadCorpus,
    check_columns,
    expand_inputs,
    read_file,
)
from tests.job_helpers import parquet_rows, run_job, write_lines


def _refused(capsys, out, *args) -> str:
    """The run's one error line; the run exited 2 and left no output folder behind."""
    code = main(["--output", str(out), "--progress_every", "0", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert not out.exists()
    lines = [line for line in err.splitlines() if line.startswith("beam-embed run: ")]
    assert len(lines) == 1, err
    return lines[0].removeprefix("beam-embed run: ")


@pytest.fixture
def no_probe(monkeypatch):
    """A refused run never reaches the launcher's model probe (it fails the test if it does)."""
    from beam_embed.pipeline.job import build

    def probe(cfg):
        raise AssertionError("the model was probed before the input was checked")

    monkeypatch.setattr(build, "probe_widths", probe)


@pytest.fixture
def folder(tmp_path):
    """A folder with one text file, a sub-folder, a dangling symlink and a symlink loop."""
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    write_lines(str(d / "a.txt"), ["the cat sat", "a dog"])
    write_lines(str(d / "sub" / "b.txt"), ["the mat"])
    os.symlink("gone.txt", d / "dangling.txt")
    os.symlink("loop2", d / "loop1")
    os.symlink("loop1", d / "loop2")
    return d


# --- a folder given as --input, and what a glob matches but cannot read -----------------------

@pytest.mark.pipeline
def test_a_folder_as_input_is_refused_with_the_glob_to_use(folder, tiny_export, tmp_path, capsys,
                                                           no_probe):
    line = _refused(capsys, tmp_path / "out", "--input", str(folder), "--model", tiny_export)
    assert line == f"--input '{folder}' is a directory; did you mean '{folder}/*'?"


def test_a_folder_among_other_inputs_is_refused_before_any_is_listed(folder, tmp_path):
    with pytest.raises(ValueError, match="is a directory; did you mean"):
        expand_inputs([str(folder / "a.txt"), str(folder / "sub")])


def test_a_glob_skips_folders_and_broken_symlinks_one_line_per_kind(folder, capsys):
    files = expand_inputs([str(folder / "*")])
    assert files == [(str(folder / "a.txt"), len("the cat sat\na dog\n"))]
    err = capsys.readouterr().err
    assert f"--input: skipped 1 folder, e.g. '{folder}/sub' (a folder is not read; " \
           f"'{folder}/sub/*' reads its files)" in err
    assert f"--input: skipped 1 dangling symlink, e.g. '{folder}/dangling.txt' -> 'gone.txt' " \
           "(its target does not exist)" in err
    assert f"--input: skipped 2 symlink loops, e.g. '{folder}/loop1' (it leads back to itself)" \
           in err
    assert err.count("--input: skipped") == 3


def test_a_double_star_glob_reads_inside_the_folders_it_matches(folder, capsys):
    files = [path for path, _ in expand_inputs([str(folder / "**.txt")])]
    assert files == [str(folder / "a.txt"), str(folder / "sub" / "b.txt")]
    err = capsys.readouterr().err
    assert "skipped 1 dangling symlink" in err and err.count("--input: skipped") == 1


def test_the_same_skipped_path_matched_twice_is_counted_once(folder, capsys):
    expand_inputs([str(folder / "*"), str(folder / "*.txt")])
    assert "skipped 1 dangling symlink," in capsys.readouterr().err


def test_a_relative_glob_matches_in_the_current_folder(folder, monkeypatch):
    monkeypatch.chdir(folder)
    assert [path for path, _ in expand_inputs(["*.txt"])] == ["a.txt"]


@pytest.mark.pipeline
def test_a_glob_that_matches_nothing_readable_is_refused(folder, tiny_export, tmp_path, capsys,
                                                         no_probe):
    line = _refused(capsys, tmp_path / "out", "--input", str(folder / "*"), "--input",
                    str(folder / "[dl]*"), "--model", tiny_export)
    assert line == (f"--input '{folder}/[dl]*' matches no file, only 1 dangling symlink "
                    f"('{folder}/dangling.txt' -> 'gone.txt') and 2 symlink loops (e.g. "
                    f"'{folder}/loop1'); check the path or pattern")


def test_a_dangling_symlink_named_alone_says_where_it_points(folder):
    with pytest.raises(ValueError) as e:
        expand_inputs([str(folder / "dangling.txt")])
    assert str(e.value) == (f"--input '{folder}/dangling.txt' matches no file, only 1 dangling "
                            f"symlink ('{folder}/dangling.txt' -> 'gone.txt'); check the path "
                            "or pattern")


@pytest.mark.pipeline
def test_a_glob_with_skipped_entries_runs_on_its_files(folder, tiny_export, tmp_path, capsys):
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", str(folder / "*"), "--model", tiny_export)
    assert manifest["counts"]["embedded"] == 2 and manifest["inputs"]["files"] == 1
    assert manifest["counts"]["files_incomplete"] == 0
    assert {r["text"] for r in parquet_rows(out).values()} == {"the cat sat", "a dog"}
    assert "skipped 1 folder" in capsys.readouterr().err


# --- the columns a Parquet (CSV, TSV) file lacks -----------------------------------------------

def _parquet(path, **columns) -> str:
    pq.write_table(pa.table(columns), path)
    return str(path)


@pytest.mark.pipeline
@pytest.mark.parametrize("args, message", [
    ([], "--text_field 'text' is not a column of {f}; its columns: id, body, lang"),
    (["--text_field", "body", "--id_field", "doc_id"],
     "--id_field 'doc_id' is not a column of {f}; its columns: id, body, lang"),
    (["--text_field", "body", "--metadata_fields", "lang,title"],
     "--metadata_fields 'title' is not a column of {f}; its columns: id, body, lang"),
    (["--text_field", "body", "--metadata_fields", "topic,lang,title"],
     "--metadata_fields 'topic', 'title' are not columns of {f}; its columns: id, body, lang"),
])
def test_a_parquet_file_without_a_column_is_refused_from_its_schema(
        tiny_export, tmp_path, capsys, no_probe, args, message):
    f = _parquet(tmp_path / "rows.parquet", id=["1"], body=["the cat"], lang=["en"])
    line = _refused(capsys, tmp_path / "out", "--input", f, "--model", tiny_export, *args)
    assert line == message.format(f=f)


def test_every_parquet_file_is_checked_and_the_one_lacking_the_column_named(tmp_path):
    good = _parquet(tmp_path / "a.parquet", text=["the cat"])
    bad = _parquet(tmp_path / "b.parquet", body=["a dog"])
    files = expand_inputs([str(tmp_path / "*.parquet")])
    with pytest.raises(ValueError) as e:
        check_columns(files, None, Fields("text", None, (), 1 << 20))
    assert str(e.value) == f"--text_field 'text' is not a column of {bad}; its columns: body"
    check_columns([(good, 0)], None, Fields("text", None, (), 1 << 20))  # has it: no error


def test_a_csv_or_tsv_header_without_the_text_column_is_refused(tmp_path):
    csv = write_lines(str(tmp_path / "rows.csv"), ["\ufeffid,body", "1,the cat"])
    tsv = write_lines(str(tmp_path / "rows.tsv"), ["id\ttext", "1\tthe cat"])
    with pytest.raises(ValueError, match=r"--text_field 'text' is not a column of .*rows\.csv; "
                                         r"its columns: id, body$"):
        check_columns([(csv, 0), (tsv, 0)], None, Fields("text", None, (), 1 << 20))
    check_columns([(tsv, 0)], None, Fields("text", "id", (), 1 << 20))
    # --input_format applies to every file, whatever its extension
    with pytest.raises(ValueError, match="its columns: id, body"):
        check_columns([(csv, 0)], "csv", Fields("text", None, (), 1 << 20))


def test_an_unreadable_schema_is_left_to_the_run(tmp_path):
    """A corrupt Parquet file is no configuration error: the schema check passes it by (and
    goes on to the files after it), and the run's reading of it gives one dead letter of kind
    'incomplete' saying why (exit 3 unless accepted)."""
    broken = str(tmp_path / "broken.parquet")
    (tmp_path / "broken.parquet").write_bytes(b"not parquet at all")
    lacking = _parquet(tmp_path / "lacking.parquet", body=["a dog"])
    fields = Fields("text", None, (), 1 << 20)
    check_columns([(broken, 18)], None, fields)  # no error
    with pytest.raises(ValueError) as e:
        check_columns([(broken, 18), (lacking, 0)], None, fields)
    assert str(e.value) == f"--text_field 'text' is not a column of {lacking}; its columns: body"
    [dead] = read_file(broken, "parquet", fields)
    assert isinstance(dead, DeadLetter) and (dead.kind, dead.source) == (INCOMPLETE, broken)
    assert dead.reason.startswith("the file cannot be read (ArrowInvalid: ") and \
        dead.reason.endswith("; the rest of the file was lost")


def test_the_wide_table_lists_its_first_columns(tmp_path):
    f = _parquet(tmp_path / "wide.parquet", **{f"c{i}": [i] for i in range(40)})
    with pytest.raises(ValueError) as e:
        check_columns([(f, 0)], None, Fields("text", None, (), 1 << 20))
    assert str(e.value).endswith("c28, c29 (10 more)")


# --- duplicate ids -----------------------------------------------------------------------------

def test_duplicate_ids_are_counted_across_files_and_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "ID_CHUNK", 2)  # a reader hands its ids on every 2 records
    a = write_lines(str(tmp_path / "a.jsonl"), [json.dumps({"id": i, "text": "t"})
                                                for i in ["b", "a", "b", "c"]])
    b = write_lines(str(tmp_path / "b.jsonl"), [json.dumps({"id": i, "text": "t"})
                                                for i in ["b", "a", "d"]] + ["{broken"])
    with beam.Pipeline() as p:
        corpus = p | ReadCorpus([(a, 0), (b, 0)], None, Fields("text", "id", (), 1 << 20),
                                spread=False, ids=True)
        assert_that(corpus["ids"] | FindDuplicateIds(), equal_to([(2, "a")]))  # a: 2, b: 3


def test_unique_ids_count_zero_and_give_no_example(tmp_path):
    a = write_lines(str(tmp_path / "a.jsonl"), [json.dumps({"id": i, "text": "t"})
                                                for i in ["a", "b", "c"]])
    with beam.Pipeline() as p:
        corpus = p | ReadCorpus([(a, 0)], None, Fields("text", "id", (), 1 << 20), ids=True)
        assert_that(corpus["ids"] | FindDuplicateIds(), equal_to([(0, None)]))


@pytest.mark.pipeline
def test_duplicate_ids_are_embedded_counted_and_warned_about(tiny_export, tmp_path, capsys):
    rows = [{"id": "x", "text": "the cat"}, {"id": "y", "text": "a dog"},
            {"id": "x", "text": "the mat"}, {"id": "w", "text": "the bank"},
            {"id": "w", "text": "run play"}, {"id": "x", "text": "a cat sat"}]
    corpus = write_lines(str(tmp_path / "c.jsonl"), [json.dumps(r) for r in rows])
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", tiny_export, "--id_field", "id")
    c = manifest["counts"]
    assert c["embedded"] == 6 and c["dead_lettered"] == 0  # all embedded, none dead-lettered
    assert c["duplicate_ids"] == 2 and manifest["duplicate_id_example"] == "w"
    assert "warning: 2 ids appear more than once, e.g. 'w'; join on id with care" in \
        capsys.readouterr().err


@pytest.mark.pipeline
def test_unique_ids_say_nothing(tiny_export, tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "c.jsonl"), [json.dumps({"id": "a", "text": "the cat"}),
                                                     json.dumps({"id": "b", "text": "a dog"})])
    manifest = run_job(str(tmp_path / "out"), "--input", corpus, "--model", tiny_export,
                       "--id_field", "id")
    assert manifest["counts"]["duplicate_ids"] == 0 and "duplicate_id_example" not in manifest
    assert "more than once" not in capsys.readouterr().err
