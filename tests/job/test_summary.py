"""The closing lines of a run: counts, where the output is, why records were dead-lettered and
which file lists them, and the next commands."""

from __future__ import annotations

import json
import os
import re
import shlex

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


def test_next_commands_name_a_folder_that_does_not_exist(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert next_commands("output/embeddings") == (
        "next: beam-embed pca --input output/embeddings --output output/viz   "
        'or   beam-embed search output/embeddings "your query"')
    os.makedirs("output/viz")
    os.makedirs("output/viz-2")
    assert "--output output/viz-3   or" in next_commands("output/embeddings/")


def _hint(err: str) -> str:
    return next(line for line in err.splitlines() if "next: " in line).split("next: ", 1)[1]


@pytest.mark.pipeline
def test_the_hint_colours_by_a_column_of_few_values_and_runs(tiny_export, tmp_path, capsys):
    """3,000 unique titles would colour 9 points and grey the rest: the hint colours by the
    column of few values (topic), by length when there is none, never into an existing folder;
    the pca it suggests runs as printed."""
    rows = [f"d{i},Title number {i},{['law', 'code', 'docs'][i % 3]},text of document {i}"
            for i in range(60)]
    corpus = write_lines(str(tmp_path / "c.csv"), ["doc_id,title,topic,body", *rows])
    out = str(tmp_path / "out")
    base = ["--input", corpus, "--model", tiny_export, "--text_field", "body", "--id_field",
            "doc_id", "--progress_every", "0", "--output", out]
    assert main([*base, "--metadata_fields", "title,topic"]) == exits.OK
    hint = _hint(capsys.readouterr().err)
    assert f"--output {out}-viz --color-by topic   or" in hint
    os.makedirs(f"{out}-viz")  # a folder of the user's
    assert main([*base, "--metadata_fields", "title", "--overwrite"]) == exits.OK
    hint = _hint(capsys.readouterr().err)
    assert f"--output {out}-viz-2 --color-by length   or" in hint  # one input file, 60 titles
    pca = shlex.split(hint.split("   or   ")[0])
    assert pca[:2] == ["beam-embed", "pca"]
    from beam_embed.pipeline.pca.command import main as pca_main

    assert pca_main(pca[2:]) == exits.OK
    assert os.path.exists(f"{out}-viz-2/plot.html")


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
