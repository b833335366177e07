"""The closing lines of a run: counts, where the output is, why records were dead-lettered and
which file lists them, and the next commands."""

from __future__ import annotations

import json
import re

import pytest

from beam_embed.pipeline.job.command import main
from beam_embed.pipeline.job.summary import next_commands, reason_group
from beam_embed.process import exits
from tests.job_helpers import dead_letters, write_lines


@pytest.mark.parametrize("reason, group", [
    ("malformed JSON (Expecting value: line 1 column 1 (char 0))", "malformed JSON"),
    ("text is 2000000 bytes, over --max-text-bytes=1048576",
     "text is N bytes, over --max-text-bytes=N"),
    ("text contains NUL bytes (binary data?)", "text contains NUL bytes"),
    ("missing text field 'body'", "missing text field 'body'"),
])
def test_alike_reasons_count_together(reason, group):
    assert reason_group(reason) == group


def test_next_commands_colour_by_the_first_metadata_column():
    assert next_commands("output/embeddings", ["topic", "lang"]) == (
        "next: beam-embed pca --input output/embeddings --output output/viz --color-by topic   "
        'or   beam-embed search output/embeddings "your query"')
    assert "--output gs://b/run1-viz   or" in next_commands("gs://b/run1/", [])


@pytest.mark.pipeline
def test_an_all_dead_lettered_run_names_the_reasons_and_the_file(tiny_export, tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "c.jsonl"), [
        "{not json", "{\"text\": ", "[1, 2", json.dumps({"body": "no text field"}),
        json.dumps({"text": ""})])
    out = str(tmp_path / "out")
    assert main(["--input", corpus, "--model", tiny_export, "--output", out,
                 "--progress_every", "0"]) == exits.NOTHING_EMBEDDED
    lines = capsys.readouterr().err.splitlines()
    letters = [d for d in dead_letters(out) if d["kind"] != "empty"]
    assert len(letters) == 4  # the empty text is skipped, not dead-lettered
    reasons = re.search(r"dead-lettered 4: (.*) \(every one", lines[-2]).group(1)
    assert reasons == "3 x malformed JSON; 1 x missing text field 'text'"
    assert lines[-2].endswith(f"in {out}/errors-00000-of-00001.jsonl)")
    assert lines[-1].endswith("nothing was embedded: every record was dead-lettered (reasons "
                              "above)")
