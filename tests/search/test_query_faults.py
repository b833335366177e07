"""`beam-embed search` on hostile corpus text and on queries it cannot use as given: control
characters never reach the terminal raw, blank queries are refused, long ones are said cut."""

from __future__ import annotations

import json
import re

import pytest

from beam_embed.pipeline.cli import main as cli
from tests.job_helpers import run_job

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

# What a terminal would obey: ESC sequences (colour, clear screen, window title via OSC ended by
# BEL), C1 CSI, bidi overrides and isolates that reorder the rest of the line. (No line
# separators: they are whitespace, which the job stores as spaces.)
RECORDS = [
    {"id": "plain-1", "text": "the cat sat on the mat"},
    {"id": "colour", "text": "the \x1b[31mcat\x1b[0m sat on a mat"},
    {"id": "title", "text": "a cat \x1b]0;pwned\x07 sat on the big mat"},
    {"id": "c1\x9b2J", "text": "the cat \x9b2J was on the river bank"},
    {"id": "bidi", "text": "the cat \u202egnip\u202c sat \u2066x\u2069 on the mat"},
    {"id": "clear\x1b[2J", "text": "a dog sat on the mat\x07"},
    {"id": "plain-2", "text": "money is big"},
]
# Characters no line search prints may hold: every C0 but the newline, DEL, C1, separators and
# bidi controls. The bold highlight's own ESC is taken out before the check.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
BOLD = ("\033[1m", "\033[0m")


@pytest.fixture(scope="module")
def output(tiny_export, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    out = str(folder / "out")
    run_job(out, "--input", str(corpus), "--model", tiny_export, "--id_field", "id",
            "--format", "parquet", "--num_shards", "2")
    return out


def _search(capsys, *argv) -> tuple[int, str, str]:
    code = cli(["search", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("style", ["bold", "markdown", "none"])  # terminal, pipe, plain
def test_corpus_text_and_ids_print_their_control_characters_as_escapes(output, capsys, style):
    code, out, _ = _search(capsys, output, "cat on the mat", "-k", "7", "--highlight", style)
    assert code == 0
    bare = out.replace(BOLD[0], "").replace(BOLD[1], "")
    assert not RAW.search(bare), RAW.findall(bare)
    lines = out.splitlines()
    assert len(lines) == 8  # the query and 7 hits: no text broke its line
    plain = re.sub(r"\*\*|\033\[[01]m", "", out)
    assert r"\x1b[31mcat\x1b[0m" in plain
    assert r"\x1b]0;pwned\x07" in plain
    assert r"\u202egnip\u202c" in plain and r"\u2066x\u2069" in plain
    assert r"dog sat on the mat\x07" in plain
    ids = {line.split()[2] for line in lines[1:]}
    assert {r"c1\x9b2J", r"clear\x1b[2J", "plain-1", "bidi"} <= ids
    starts = {len(re.match(r" *\d+\. \S+  \S+ +", line)[0]) for line in lines[1:]}
    assert len(starts) == 1  # texts line up: ids padded by their shown width


def test_json_keeps_the_exact_text_with_control_characters_escaped(output, capsys):
    code, out, _ = _search(capsys, output, "cat", "-k", "7", "--json")
    assert code == 0 and not RAW.search(out.rstrip("\n")), RAW.findall(out)
    hits = json.loads(out)[0]["hits"]
    assert {h["id"]: h["text"] for h in hits} == {r["id"]: r["text"] for r in RECORDS}
    assert "\\u009b2J" in out and "\\u202egnip" in out


@pytest.mark.parametrize("queries, message", [
    ([""], "query 1 is empty"),
    (["cat", "  \t\n"], "query 2 is blank (only whitespace or control characters)"),
    (["\u200b\x1b"], "query 1 is blank (only whitespace or control characters)"),
])
def test_blank_queries_are_refused_before_anything_is_read(tmp_path, capsys, queries, message):
    code, out, err = _search(capsys, str(tmp_path / "no-such-run"), *queries)
    assert code == 2 and out == ""
    assert err == f"beam-embed search: {message}; expected some text to search for\n"


def test_a_long_query_is_said_cut_and_echoed_shortened(output, capsys):
    query = "the cat sat on the mat " * 4348  # 100,004 characters, 26,090 wordpieces
    code, out, err = _search(capsys, output, query, "cat", "-k", "1")
    assert code == 0
    cut = [line for line in err.splitlines() if "tokens long" in line]
    assert len(cut) == 1 and cut[0].endswith(
        "query 1 is 26,090 tokens long; only its first 64 were used (the model's "
        "max_seq_length), the rest was ignored")
    echoed = [line for line in out.splitlines() if line.startswith("query: ")]
    assert echoed[0] == "query: " + query[:199] + "…"
    assert echoed[1] == "query: cat"
