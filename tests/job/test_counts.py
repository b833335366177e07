"""The manifest's counts of records read, skipped and dead-lettered, made without a Beam job: the
files are read and prepared by the job's own reader and DoFn, and every element is counted by the
rules the job's Count steps apply (beam_embed.pipeline.job.build)."""

from __future__ import annotations

import collections
import gzip
import json

from beam_embed.pipeline.common.rows.records import DeadLetter, Record
from beam_embed.pipeline.job.build import dead_counts, read_dead_counts
from beam_embed.pipeline.job.formats import Fields
from beam_embed.pipeline.job.sources import PrepareTexts, read_file

FIELDS = Fields("text", None, (), 1 << 20)


def _read_and_prepare(paths: list[tuple[str, str]]):
    """(records read, dead letters of the reading, records prepared, every dead letter), as
    ReadCorpus splits them."""
    read, read_dead, prepared, dead = [], [], [], []
    prepare = PrepareTexts(clean=True, split="none")
    for path, fmt in paths:
        for item in read_file(path, fmt, FIELDS):
            (read_dead if isinstance(item, DeadLetter) else read).append(item)
    for record in read:
        for out in prepare.process(record):
            (prepared if isinstance(out, Record) else dead).append(getattr(out, "value", out))
    return read, read_dead, prepared, read_dead + dead


def test_every_dead_letter_is_counted_once_and_every_record_read_is_accounted_for(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join([
        json.dumps({"text": "the cat sat"}), "{not json", json.dumps({"text": ""}),
        json.dumps({"text": "a dog"}), "[1, 2]", json.dumps({"text": " \t "}),
        json.dumps({"text": "the mat"}), json.dumps({"body": "no text field"})]) + "\n")
    whole = gzip.compress("".join(f"line {i} of a long file\n" for i in range(3000)).encode())
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(whole[:len(whole) // 2])  # a partial download: one incomplete dead letter
    read, read_dead, prepared, dead = _read_and_prepare([(str(rows), "jsonl"),
                                                         (str(cut), "text")])
    counts = collections.Counter()
    for name, n in ([("read", 1) for _ in read] + [c for d in read_dead for c in read_dead_counts(d)]
                    + [c for d in dead for c in dead_counts(d)]):
        counts[name] += n
    # rows.jsonl: 3 texts, 2 empty, 3 broken lines; cut.txt.gz: its whole lines, then the rest lost
    recovered = len(read) - 5
    assert recovered > 1000 and [d.id for d in read_dead][-1].startswith(str(cut))
    assert counts == {"read": 8 + recovered + 1, "skipped_empty": 2, "dead_lettered": 4,
                      "files_incomplete": 1}
    # what the encoder gets, plus what was set aside, is everything read
    assert len(prepared) == 3 + recovered
    assert counts["read"] == len(prepared) + counts["skipped_empty"] + counts["dead_lettered"]
