"""Reading one input file: a file cut short or corrupt ends in one dead letter saying where, no
half line is ever a record; byte-order marks and null texts are read for what they are."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import zlib

import pytest

from beam_embed.pipeline.common.rows.records import INCOMPLETE, DeadLetter, Record
from beam_embed.pipeline.job.formats import Fields
from beam_embed.pipeline.job.sources import read_file

FIELDS = Fields("text", None, (), 1 << 20)
LINES = [f"line {i}: the cat sat on the mat {i * 7919 % 1000}" for i in range(2000)]
DATA = ("\n".join(LINES) + "\n").encode()


def _whole_lines_before_the_cut(cut: bytes, wbits: int) -> list[str]:
    """The lines a decompressor can recover from `cut` (zlib directly, not the reader): every
    complete line of the bytes it yields."""
    recovered = zlib.decompressobj(wbits).decompress(cut)
    return recovered.decode().split("\n")[:-1]


@pytest.mark.parametrize("compress, ext", [(gzip.compress, ".gz"), (bz2.compress, ".bz2"),
                                           (lzma.compress, ".xz")])
def test_cut_short_file_ends_in_a_dead_letter_after_its_last_whole_line(tmp_path, compress, ext):
    whole = compress(DATA)
    path = str(tmp_path / f"corpus.txt{ext}")
    with open(path, "wb") as f:
        f.write(whole[: len(whole) // 2])  # a partial download
    items = list(read_file(path, "text", FIELDS))
    records, last = items[:-1], items[-1]
    assert all(isinstance(r, Record) for r in records)
    if ext == ".gz":  # an independent count of what the cut stream holds
        expected = _whole_lines_before_the_cut(whole[: len(whole) // 2], 16 + zlib.MAX_WBITS)
        assert len(expected) > 500 and [r.text for r in records] == expected
    assert [r.text for r in records] == LINES[:len(records)]  # whole lines only, in order
    assert isinstance(last, DeadLetter) and last.kind == INCOMPLETE and last.id == path
    assert last.reason == ("the file is cut short (the compressed stream ends before its "
                           f"end-of-stream marker) after line {len(records)}; the rest of the "
                           "file was lost")


def test_corrupt_and_unreadable_files(tmp_path):
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"not gzip at all")
    [item] = read_file(str(bad), "jsonl", FIELDS)
    assert item.kind == INCOMPLETE and item.reason.startswith("the file is corrupt (")
    assert item.reason.endswith("after line 0; the rest of the file was lost")
    folder = tmp_path / "folder.txt"
    folder.mkdir()
    [item] = read_file(str(folder), "text", FIELDS)
    assert item.kind == INCOMPLETE and "cannot be read (Is a directory)" in item.reason


@pytest.mark.parametrize("fmt, content", [
    ("csv", "text,id\r\nhello there,1\r\n"),
    ("tsv", "text\tid\nhello there\t1\n"),
    ("jsonl", '{"text": "hello there", "id": "1"}\n'),
    ("text", "hello there\n"),
])
def test_byte_order_mark_is_not_part_of_the_first_field(tmp_path, fmt, content):
    path = tmp_path / f"bom.{fmt}"
    path.write_bytes(b"\xef\xbb\xbf" + content.encode())  # what spreadsheet exports write
    [record] = read_file(str(path), fmt, FIELDS)
    assert isinstance(record, Record) and record.text == "hello there"


def test_null_text_is_not_a_missing_field(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ({"text": None}, {"body": "x"})) + "\n")
    null, missing = read_file(str(path), "jsonl", FIELDS)
    assert null.reason == "text field 'text' is null"
    assert missing.reason == "missing text field 'text'"


def test_corrupt_tfrecord_keeps_the_records_before_the_damage(tmp_path):
    import tensorflow as tf

    path = str(tmp_path / "rows.tfrecord")
    offsets = []
    with tf.io.TFRecordWriter(path) as w:
        for i in range(3000):  # more than one read batch
            text = tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"row {i}".encode()]))
            record = tf.train.Example(features=tf.train.Features(feature={"text": text}))
            w.write(record.SerializeToString())
            offsets.append(len(record.SerializeToString()) + 16)
    data = bytearray(open(path, "rb").read())
    data[sum(offsets[:2500]) + 14] ^= 0xFF  # inside record 2501's data: its checksum fails
    open(path, "wb").write(bytes(data))
    items = list(read_file(path, "tfrecord", FIELDS))
    assert [r.text for r in items[:-1]] == [f"row {i}" for i in range(2500)]
    assert items[-1].kind == INCOMPLETE and items[-1].reason == (
        "the file is damaged (a record's checksum does not match: corrupt data) after record "
        "2500; the rest of the file was lost")


def test_text_checks_count_utf8_bytes_and_catch_undecodable_bytes():
    """A text's size is its UTF-8 bytes; undecodable bytes (decoded with surrogateescape, as
    Parquet/TFRecord readers of raw bytes may hand them) make a dead letter; any other text,
    a lone surrogate from JSON's \\ud800 escape included, is a record."""
    fields = Fields("text", None, (), 10)
    assert isinstance(fields.checked("a", "p", "héllo wö"), Record)  # 8 characters, 10 bytes
    wide = "é" * 6  # 6 characters, 12 bytes
    assert fields.checked("a", "p", wide).reason == "text is 12 bytes, over --max-text-bytes=10"
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")
    dead = fields.checked("b", "p", bad)
    assert dead.reason == "text is not valid UTF-8" and dead.excerpt == "caf\ufffd"
    lone = fields.checked("c", "p", "a\ud800b")  # 3 characters, 5 bytes with surrogatepass
    assert isinstance(lone, Record) and lone.text == "a\ud800b"
    assert fields.checked("d", "p", "\ud800" * 4).reason == \
        "text is 12 bytes, over --max-text-bytes=10"
