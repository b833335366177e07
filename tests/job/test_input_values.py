"""Values in the input that a reader could mistake: an `id` that holds a list in a few records
(the field stays the id, those records are dead letters saying why), and a CSV/TSV field longer
than Python's csv allows by default but within --max_text_bytes (read, not "malformed")."""

from __future__ import annotations

import csv
import json

import pytest

from tests.job_helpers import dead_letters, parquet_rows, run_job

pytestmark = pytest.mark.pipeline  # whole runs, end to end

WORDS = ["the cat sat", "a dog ran", "the river bank", "money is big", "a small boat"]


@pytest.mark.parametrize("other_fields", [True, False])
def test_a_list_id_among_the_first_records_keeps_the_id_field(other_fields, tiny_export,
                                                              tmp_path, capsys):
    rows = [{"id": f"doc-{i}", "text": WORDS[i % 5], **({"topic": "t"} if other_fields else {})}
            for i in range(12)]
    rows[2]["id"] = ["doc", 2]
    rows[7]["id"] = {"n": 7}
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", str(corpus), "--model", tiny_export)
    assert "; ids from field 'id'" in capsys.readouterr().err
    good = [r["id"] for i, r in enumerate(rows) if i not in (2, 7)]
    assert sorted(parquet_rows(out)) == sorted(good)  # no record's id became path:line
    assert manifest["counts"]["embedded"] == 10 and manifest["counts"]["dead_lettered"] == 2
    letters = sorted(dead_letters(out), key=lambda d: d["id"])
    assert [(d["id"], d["reason"]) for d in letters] == [
        (f"{corpus}:3", "id field 'id' is a list of 2 values, not a single value"),
        (f"{corpus}:8", "id field 'id' is an object, not a single value")]
    assert json.loads(letters[0]["excerpt"]) == ["doc", 2]


@pytest.fixture
def csv_default_limit():
    """csv's limit as a fresh process has it (a run raises it for the rest of the process)."""
    before = csv.field_size_limit(131_072)  # Python's default, which these fields exceed
    yield
    csv.field_size_limit(before)


@pytest.mark.parametrize("fmt, delimiter", [("csv", ","), ("tsv", "\t")])
def test_a_field_over_csvs_default_limit_but_within_max_text_bytes_is_read(
        fmt, delimiter, tiny_export, tmp_path, csv_default_limit):
    long_text = " ".join(["word"] * 40_000)  # 199,999 characters
    too_long = "x" * 250_010
    corpus = tmp_path / f"c.{fmt}"
    with open(corpus, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter=delimiter)
        w.writerows([["id", "text"], ["short", "a dog ran"], ["long", long_text],
                     ["too-long", too_long], ["after", "the river bank"]])
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", str(corpus), "--model", tiny_export,
                       "--max_text_bytes", "250000")
    rows = parquet_rows(out)
    assert sorted(rows) == ["after", "long", "short"]
    assert rows["long"]["text"] == long_text and rows["long"]["truncated"]
    [letter] = dead_letters(out)
    assert letter["id"] == f"{corpus}:4"
    assert letter["reason"] == "a field is over --max-text-bytes=250000"
    assert manifest["counts"]["dead_lettered"] == 1


def test_ids_of_objects_in_every_record_are_said_and_id_field_empty_numbers_them(
        tiny_export, tmp_path):
    """An `id` that is an object in every record (a database export's {"$oid": ...}): each
    record is a dead letter saying so; `--id_field ''` gives them path:line ids instead."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": {"$oid": f"a{i}"}, "text": WORDS[i]}) + "\n"
                              for i in range(3)), encoding="utf-8")
    from beam_embed.pipeline.job.command import main

    out = tmp_path / "out"
    assert main(["--output", str(out), "--progress_every", "0", "--input", str(corpus),
                 "--model", tiny_export]) == 4  # nothing embedded
    assert {d["reason"] for d in dead_letters(str(out))} == {
        "id field 'id' is an object, not a single value"}
    numbered = str(tmp_path / "numbered")
    run_job(numbered, "--input", str(corpus), "--model", tiny_export, "--id_field", "")
    assert sorted(parquet_rows(numbered)) == [f"{corpus}:{n}" for n in (1, 2, 3)]
