"""Runs whose input is cut short, or yields nothing, finish with every record accounted for and
a non-zero exit code; bad limits are refused before any data is read."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import re
import zlib

import pytest

from beam_embed.pipeline.common.run_folder.manifest.entries import Counts
from beam_embed.pipeline.job.command import main
from beam_embed.pipeline.job.summary import exit_code
from beam_embed.process import exits
from tests.job_helpers import dead_letters, parquet_rows, write_lines

LINES = [f"line {i}: the cat sat on the mat {i * 7919 % 1000}" for i in range(2000)]


def _cut(path, compress) -> bytes:
    whole = compress(("\n".join(LINES) + "\n").encode())
    with open(path, "wb") as f:
        f.write(whole[: len(whole) // 2])
    return whole[: len(whole) // 2]


def _run(output, *args) -> tuple[int, dict | None]:
    code = main(["--output", str(output), "--progress_every", "0", *args])
    path = os.path.join(output, "manifest.json")
    return code, json.load(open(path)) if os.path.exists(path) else None


def test_exit_code_of_a_finished_run():
    assert exit_code(Counts(embedded=5, files_incomplete=0), False) == exits.OK
    assert exit_code(Counts(embedded=5, files_incomplete=1), False) == exits.INCOMPLETE_INPUT
    assert exit_code(Counts(embedded=5, files_incomplete=1), True) == exits.OK
    assert exit_code(Counts(embedded=0, files_incomplete=0), False) == exits.NOTHING_EMBEDDED
    assert exit_code(Counts(embedded=0, files_incomplete=1), True) == exits.NOTHING_EMBEDDED


@pytest.mark.pipeline
def test_cut_short_inputs_are_accounted_for_and_the_run_exits_incomplete(tiny_export, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    cut_gz = _cut(d / "part.txt.gz", gzip.compress)
    _cut(d / "part.txt.bz2", bz2.compress)  # half a 900k bzip2 block: not one whole line
    (d / "sheet.csv").write_bytes(b"\xef\xbb\xbfid,text\r\ns1,a spreadsheet row\r\n")
    write_lines(str(d / "good.txt"), ["the dog ran"])
    out = tmp_path / "out"
    code, manifest = _run(out, "--input", str(d / "*"), "--model", tiny_export,
                          "--id_field", "id")
    assert code == exits.INCOMPLETE_INPUT
    c = manifest["counts"]
    recovered = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut_gz).decode()
    whole_lines = recovered.split("\n")[:-1]  # an independent reading of the cut stream
    rows = parquet_rows(str(out))
    assert sorted(r["text"] for r in rows.values()) == sorted(
        whole_lines + ["a spreadsheet row", "the dog ran"])
    assert rows["s1"]["text"] == "a spreadsheet row"  # the BOM did not hide the header's "id"
    assert c["files_incomplete"] == 2 and c["embedded"] == len(rows)
    assert c["read"] == c["embedded"] + c["skipped_empty"] + c["dead_lettered"]
    lost = {x["source"]: x["reason"] for x in dead_letters(str(out)) if x["kind"] == "incomplete"}
    assert lost == {
        f"{d}/part.txt.gz": "the file is cut short (the compressed stream ends before its "
                            f"end-of-stream marker) after line {len(whole_lines)}; the rest of the "
                            "file was lost",
        f"{d}/part.txt.bz2": "the file is cut short (the compressed stream ends before "
                             "its end-of-stream marker) after line 0; the rest of the file was "
                             "lost"}
    assert not [p for p in os.listdir(out) if p.startswith((".beam-embed", "beam-temp"))]


@pytest.mark.pipeline
def test_a_run_that_embeds_nothing_exits_nothing_embedded(tiny_export, tmp_path, capsys):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"text": ""}\n{broken\n{"text": null}\n')
    code, manifest = _run(tmp_path / "out", "--input", str(corpus), "--model", tiny_export)
    assert code == exits.NOTHING_EMBEDDED
    assert manifest["counts"]["embedded"] == 0 and manifest["counts"]["read"] == 3
    assert "nothing was embedded" in capsys.readouterr().err


@pytest.mark.pipeline
@pytest.mark.parametrize("flags, message", [
    (["--num_shards", "-1"], "--num_shards must be 0 (the runner decides) or a positive number "
                             "of shards, got -1"),
    (["--batch_tokens", "1"], "--batch_tokens 1 cannot hold one full-length text "
                              "(--max_seq_length 64 tokens); expected at least 64"),
    (["--max_seq_length", "100000"], "--max_seq_length 100000 is more than the 64 token "
                                     "positions of tiny-bert; expected at most 64"),
    (["--input", "NOWHERE/*.txt"], "--input 'NOWHERE/*.txt' matches no file; check the path or "
                                   "pattern"),
])
def test_bad_limits_are_one_line_before_any_data_is_read(tiny_export, tmp_path, capsys, flags,
                                                         message):
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat"])
    flags = [f.replace("NOWHERE", str(tmp_path / "nowhere")) for f in flags]
    message = message.replace("NOWHERE", str(tmp_path / "nowhere"))
    code, manifest = _run(tmp_path / "out", "--input", corpus, "--model", tiny_export, *flags)
    err = capsys.readouterr().err
    assert code == exits.BAD_CONFIG and manifest is None
    assert err.splitlines()[-1] == f"beam-embed run: {message}"
    assert "Traceback" not in err


def test_unusable_output_and_config_are_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    (tmp_path / "bad.yaml").write_text("input: [a\n")
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat"])
    cases = [
        (["--input", corpus, "--output", str(tmp_path / "file" / "out")],
         f"--output '{tmp_path}/file/out' cannot be created (Not a directory: "
         f"{tmp_path}/file/out)"),
        (["--config", str(tmp_path / "missing.yaml")],
         f"--config {tmp_path}/missing.yaml: No such file or directory: {tmp_path}/missing.yaml"),
        (["--config", str(tmp_path / "bad.yaml")], f"--config {tmp_path}/bad.yaml: ParserError: "),
    ]
    for flags, message in cases:
        assert main(flags) == exits.BAD_CONFIG
        # the default model's one-time export says so when this test is the first to use it
        err = "".join(line for line in capsys.readouterr().err.splitlines(keepends=True)
                      if not re.match(r"\[beam-embed [\d:]+\] export(ing|ed) ", line))
        assert err.count("\n") == 1 and err.startswith(f"beam-embed run: {message}")
