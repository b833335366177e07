"""One reader per input format: a file object in, Records and DeadLetters out, never a crash.

Every reader yields exactly one item per input record it can see, so the job's counts reconcile:
read = embedded + skipped-empty + dead-lettered.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from collections.abc import Callable, Iterator

from beam_embed.pipeline.common.output_formats.tfrecord import DamagedFile, read_records
from beam_embed.pipeline.common.records import INCOMPLETE, DeadLetter, Record

Item = Record | DeadLetter
COMPRESSED = (".gz", ".bz2", ".xz", ".lzma")
EXTENSIONS = {".txt": "text", ".text": "text", ".jsonl": "jsonl", ".ndjson": "jsonl",
              ".json": "jsonl", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet",
              ".tfrecord": "tfrecord", ".tfrecords": "tfrecord"}
LINE_FORMATS = ("text", "jsonl", "csv", "tsv")  # where "line N" locates a record


def detect_format(path: str) -> str:
    name = path.lower()
    for ext in COMPRESSED:
        name = name[: -len(ext)] if name.endswith(ext) else name
    for ext, fmt in EXTENSIONS.items():
        if name.endswith(ext):
            return fmt
    return "text"


class Fields:
    """Which fields hold the text, the id and the carried metadata; and the size limit."""

    def __init__(self, text_field: str, id_field: str | None, metadata_fields: tuple[str, ...],
                 max_text_bytes: int):
        self.text = text_field
        self.id = id_field
        self.meta = metadata_fields
        self.max_bytes = max_text_bytes

    def record(self, path: str, n: int, row: dict) -> Item:
        """A record from a dict-like row (JSON object, CSV row, Parquet row, Example)."""
        default_id = f"{path}:{n}"
        rid = row.get(self.id) if self.id else default_id
        rid = default_id if rid is None else _str(rid)
        text = row.get(self.text)
        if text is None:
            what = (f"text field {self.text!r} is null" if self.text in row else
                    f"missing text field {self.text!r}")
            return DeadLetter.of(rid, path, what, json.dumps(row, default=str, ensure_ascii=False))
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as e:
                return DeadLetter.of(rid, path, f"text is not UTF-8 ({e.reason} at byte {e.start})",
                                     text.decode("utf-8", "replace"))
        if not isinstance(text, str):
            return DeadLetter.of(rid, path, f"text field {self.text!r} is {type(text).__name__}, "
                                 "not a string", str(text))
        return self.checked(rid, path, text, tuple(
            (k, None if row.get(k) is None else _str(row.get(k))) for k in self.meta))

    def checked(self, rid: str, path: str, text: str, meta=()) -> Item:
        try:  # a text without surrogates encodes strictly: no character needs scanning
            size, surrogates = len(text.encode("utf-8")), False
        except UnicodeEncodeError:
            size, surrogates = len(text.encode("utf-8", "surrogatepass")), True
        if size > self.max_bytes:
            return DeadLetter.of(rid, path, f"text is {size} bytes, over --max-text-bytes="
                                 f"{self.max_bytes}", text)
        if "\x00" in text:
            return DeadLetter.of(rid, path, "text contains NUL bytes (binary data?)",
                                 text.replace("\x00", "\\0"))
        if surrogates and any("\udc80" <= c <= "\udcff" for c in text):
            return DeadLetter.of(rid, path, "text is not valid UTF-8",
                                 text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
        return Record(id=rid, text=text, source=path, meta=meta)

    def absent(self, columns: list[str]) -> str | None:
        """What a file with these columns lacks: "--text_field 'body' is not a column", or
        None when it has every column the job reads."""
        names = set(columns)
        if self.text not in names:
            return f"--text_field {self.text!r} is not a column"
        if self.id and self.id not in names:
            return f"--id_field {self.id!r} is not a column"
        missing = [m for m in self.meta if m not in names]
        if len(missing) == 1:
            return f"--metadata_fields {missing[0]!r} is not a column"
        if missing:
            return f"--metadata_fields {', '.join(map(repr, missing))} are not columns"
        return None


def _str(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _lines(f) -> Iterator[tuple[int, bytes]]:
    """(line number, line) without its line break; a UTF-8 byte-order mark (what spreadsheet
    exports and some editors write first) is not part of the first line."""
    for n, line in enumerate(iter(f.readline, b""), start=1):
        if n == 1 and line.startswith(codecs.BOM_UTF8):
            line = line[len(codecs.BOM_UTF8):]
        yield n, line.rstrip(b"\r\n")


def read_text(path: str, f, fields: Fields) -> Iterator[Item]:
    for n, raw in _lines(f):
        rid = f"{path}:{n}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield DeadLetter.of(rid, path, f"line is not UTF-8 ({e.reason} at byte {e.start})",
                                raw[:400].decode("utf-8", "replace"))
            continue
        yield fields.checked(rid, path, text)


def read_jsonl(path: str, f, fields: Fields) -> Iterator[Item]:
    for n, raw in _lines(f):
        if not raw.strip():
            continue  # blank separator lines are not records
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            yield DeadLetter.of(f"{path}:{n}", path, f"malformed JSON ({e})",
                                raw[:400].decode("utf-8", "replace"))
            continue
        if not isinstance(row, dict):
            yield DeadLetter.of(f"{path}:{n}", path, f"JSON line is a {type(row).__name__}, "
                                "not an object", raw[:400].decode("utf-8", "replace"))
            continue
        yield fields.record(path, n, row)


def _header(f, delimiter: str) -> list[str] | None:
    """The header row as the reader sees it (a byte-order mark is not part of it)."""
    text = io.TextIOWrapper(f, encoding="utf-8-sig", errors="surrogateescape", newline="")
    try:
        return next(csv.reader(text, delimiter=delimiter))
    except (StopIteration, csv.Error):
        return None  # an empty file has no records to check
    finally:
        text.detach()  # the caller closes the file


def _read_delimited(path: str, f, fields: Fields, delimiter: str) -> Iterator[Item]:
    # utf-8-sig: a byte-order mark would otherwise become part of the first header name
    text = io.TextIOWrapper(f, encoding="utf-8-sig", errors="surrogateescape", newline="")
    reader = csv.reader(text, delimiter=delimiter)
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        return
    n = 1
    while True:
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            n = reader.line_num
            yield DeadLetter.of(f"{path}:{n}", path, f"malformed CSV row ({e})")
            continue
        n = reader.line_num
        if len(values) != len(header):
            yield DeadLetter.of(f"{path}:{n}", path, f"row has {len(values)} fields, header has "
                                f"{len(header)}", delimiter.join(values))
            continue
        yield fields.record(path, n, dict(zip(header, values)))


def read_csv(path: str, f, fields: Fields) -> Iterator[Item]:
    return _read_delimited(path, f, fields, ",")


def read_tsv(path: str, f, fields: Fields) -> Iterator[Item]:
    return _read_delimited(path, f, fields, "\t")


def read_parquet(path: str, f, fields: Fields) -> Iterator[Item]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(f)
    names = set(pf.schema_arrow.names)
    wanted = [c for c in {fields.text, fields.id, *fields.meta} if c and c in names]
    n = 0
    for batch in pf.iter_batches(columns=wanted):
        for row in batch.to_pylist():
            n += 1
            yield fields.record(path, n, row)


def parquet_columns(f) -> list[str]:
    """From the file's footer: no row is read."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(f).schema_arrow.names


def read_tfrecord(path: str, f, fields: Fields) -> Iterator[Item]:
    """tf.data reads the framing (CRC-checked, gzip by extension, gs:// through TF); a file
    that breaks off ends in one INCOMPLETE dead letter."""
    import tensorflow as tf

    n = 0
    try:
        for raw in read_records(path):
            n += 1
            try:
                example = tf.train.Example.FromString(raw)
            except Exception as e:  # protobuf's DecodeError has no stable import path
                yield DeadLetter.of(f"{path}:{n}", path, f"record is not a tf.train.Example ({e})")
                continue
            row = {}
            for key, feature in example.features.feature.items():
                kind = feature.WhichOneof("kind")
                values = list(getattr(feature, kind).value) if kind else []
                row[key] = values[0] if len(values) == 1 else (values or None)
            yield fields.record(path, n, row)
    except DamagedFile as e:
        yield DeadLetter.of(path, path, f"the file {e.what}; the rest of the file was lost",
                            kind=INCOMPLETE)


# The formats whose columns are known before any record is read (sources.check_columns).
COLUMNS: dict[str, Callable[[object], list[str] | None]] = {
    "parquet": parquet_columns, "csv": lambda f: _header(f, ","), "tsv": lambda f: _header(f, "\t"),
}

READERS: dict[str, Callable[[str, object, Fields], Iterator[Item]]] = {
    "text": read_text, "jsonl": read_jsonl, "csv": read_csv, "tsv": read_tsv,
    "parquet": read_parquet, "tfrecord": read_tfrecord,
}
