"""One reader per input format: a file object in, Records and DeadLetters out, never a crash.

Every reader yields exactly one item per input record it can see, so the job's counts reconcile:
read = embedded + skipped-empty + dead-lettered.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import io
import itertools
import json
from collections.abc import Callable, Iterator

from beam_embed.pipeline.common.output_formats.tfrecord import DamagedFile, read_records
from beam_embed.pipeline.common.rows.records import INCOMPLETE, DeadLetter, Record

Item = Record | DeadLetter
COMPRESSED = (".gz", ".bz2", ".xz", ".lzma")
EXTENSIONS = {".txt": "text", ".text": "text", ".jsonl": "jsonl", ".ndjson": "jsonl",
              ".json": "jsonl", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet",
              ".tfrecord": "tfrecord", ".tfrecords": "tfrecord"}
LINE_FORMATS = ("text", "jsonl", "csv", "tsv")  # where "line N" locates a record
FIRST_RECORDS = 100  # a JSONL or TFRecord file's fields: those of its first records


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

    def __init__(self, text_field: str, id_field: str | None,
                 metadata_fields: tuple[str, ...] | None, max_text_bytes: int):
        self.text = text_field
        self.id = id_field
        self.meta = tuple(metadata_fields or ())  # None: not decided yet (input_fields.py)
        self.max_bytes = max_text_bytes

    def record(self, path: str, n: int, row: dict) -> Item:
        """A record from a dict-like row (JSON object, CSV row, Parquet row, Example)."""
        default_id = f"{path}:{n}"
        rid = row.get(self.id) if self.id else default_id
        if isinstance(rid, (list, tuple, dict)):  # no one string names the record
            kind = "an object" if isinstance(rid, dict) else f"a list of {len(rid)} values"
            return DeadLetter.of(default_id, path, f"id field {self.id!r} is {kind}, not a "
                                 "single value", metadata_text(rid))
        rid = default_id if rid is None else field_text(rid)
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
        meta = tuple((k, metadata_text(row.get(k))) for k in self.meta)
        return self.checked(rid, path, text, meta)

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

    def absent(self, found: FileFields) -> str | None:
        """What a file lacks of the fields the job reads: "--text_field 'body' is not a column"
        ("... a field" when `found` is a file's first records), or None. A field that only
        some records hold may be missing from the first ones: a metadata field is looked for
        in the schema formats only (and across all the files by input_fields.py)."""
        names, what = set(found.names), "field" if found.sampled else "column"
        if self.text not in names:
            return f"--text_field {self.text!r} is not a {what}"
        if self.id and self.id not in names:
            return f"--id_field {self.id!r} is not a {what}"
        missing = [] if found.sampled else [m for m in self.meta if m not in names]
        if len(missing) == 1:
            return f"--metadata_fields {missing[0]!r} is not a {what}"
        if missing:
            return f"--metadata_fields {', '.join(map(repr, missing))} are not {what}s"
        return None


@dataclasses.dataclass(frozen=True)
class FileFields:
    """The fields of one input file, in order: its schema (a Parquet footer, a CSV header), or
    those of its first `sampled` records (JSONL, TFRecord). `scalar`: those holding single
    values (text, numbers, booleans), the ones a run carries as metadata by default."""

    names: tuple[str, ...]
    scalar: tuple[str, ...]
    sampled: int = 0

    def where(self, path: str) -> str:
        return f"the first {self.sampled} records of {path}" if self.sampled else path


def field_text(value) -> str:
    """A field's value as text, as ids are written (the API's writer too): bytes decoded as
    UTF-8, anything else by str(), so 1 and "1" are one id."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def metadata_text(value) -> str | None:
    """A metadata value as its column holds it (every metadata column is a string column): a
    list or an object, which a field may hold in some records only, as its JSON text. The
    API's writer encodes its Embeddings' fields with it too."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False, default=field_text)
    return field_text(value)


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


def _allow_fields_of(max_bytes: int) -> None:
    """Lets csv read a field as long as the longest text a run embeds (csv's own limit is
    131,072 characters): a longer one is still a dead letter, saying it is over the limit.
    csv's limit is the process's, so it is only ever raised, never lowered: a limit another
    reader in this process set stays in force for what it reads."""
    wanted = max_bytes + 1  # a text of more bytes is read to be said over --max_text_bytes
    if csv.field_size_limit() < wanted:
        csv.field_size_limit(wanted)


def _read_delimited(path: str, f, fields: Fields, delimiter: str) -> Iterator[Item]:
    _allow_fields_of(fields.max_bytes)
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
            why = (f"a field is over --max-text-bytes={fields.max_bytes}" if
                   str(e).startswith("field larger than field limit") else
                   f"malformed CSV row ({e})")
            yield DeadLetter.of(f"{path}:{n}", path, why)
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


def parquet_fields(path: str, f) -> FileFields:
    """From the file's footer: no row is read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.ParquetFile(f).schema_arrow
    single = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer,
              pa.types.is_floating, pa.types.is_boolean, pa.types.is_decimal,
              pa.types.is_temporal)
    return FileFields(tuple(schema.names), tuple(
        field.name for field in schema if any(test(field.type) for test in single)))


def _single(value) -> bool:
    """A value a metadata column holds as it is: not a list or an object, and not bytes that
    are not UTF-8 text (a stored vector, say)."""
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True
    return not isinstance(value, (list, tuple, dict))


def _sampled(rows: list[dict]) -> FileFields | None:
    """The fields of a file's first records, scalar when every record's value is single (null
    is no value); None when no record could be read."""
    if not rows:
        return None
    names = tuple(dict.fromkeys(k for row in rows for k in row))
    plural = {k for row in rows for k, v in row.items() if not _single(v)}
    return FileFields(names, tuple(n for n in names if n not in plural), len(rows))


def jsonl_fields(path: str, f) -> FileFields | None:
    """The fields of the objects among the first records (non-blank lines); malformed ones are
    passed over (the run reports them as dead letters)."""
    rows = []
    lines = (raw for _, raw in _lines(f) if raw.strip())
    for raw in itertools.islice(lines, FIRST_RECORDS):
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(row, dict):
            rows.append(row)
    return _sampled(rows)


def tfrecord_fields(path: str, f) -> FileFields | None:
    """The features of the first Examples (a feature with several values is not scalar)."""
    rows = []
    try:
        for item in itertools.islice(read_tfrecord(path, f, None, raw=True), FIRST_RECORDS):
            if isinstance(item, dict):
                rows.append(item)
    except DamagedFile:
        pass  # what was read before the damage still says which fields there are
    return _sampled(rows)


def read_tfrecord(path: str, f, fields: Fields, raw: bool = False) -> Iterator[Item]:
    """tf.data reads the framing (CRC-checked, gzip by extension, gs:// through TF); a file
    that breaks off ends in one INCOMPLETE dead letter. `raw`: each Example's features as a
    row (a feature's one value, a list of several, None for none), not as a Record."""
    import tensorflow as tf

    n = 0
    try:
        for record in read_records(path):
            n += 1
            try:
                example = tf.train.Example.FromString(record)
            except Exception as e:  # protobuf's DecodeError has no stable import path
                yield DeadLetter.of(f"{path}:{n}", path, f"record is not a tf.train.Example ({e})")
                continue
            row = {}
            for key, feature in sorted(example.features.feature.items()):  # a map: no order
                kind = feature.WhichOneof("kind")
                values = list(getattr(feature, kind).value) if kind else []
                row[key] = values[0] if len(values) == 1 else (values or None)
            yield row if raw else fields.record(path, n, row)
    except DamagedFile as e:
        if raw:
            raise
        yield DeadLetter.of(path, path, f"the file {e.what}; the rest of the file was lost",
                            kind=INCOMPLETE)


def _delimited_fields(delimiter: str):
    def read(path: str, f) -> FileFields | None:
        header = _header(f, delimiter)
        return None if header is None else FileFields(tuple(header), tuple(header))
    return read


# Each format's fields, read before the run (sources.check_columns): the schema of Parquet and
# CSV/TSV files, the first records of JSONL and TFRecord files; None when they cannot be read.
FIELDS: dict[str, Callable[[str, object], FileFields | None]] = {
    "parquet": parquet_fields, "csv": _delimited_fields(","), "tsv": _delimited_fields("\t"),
    "jsonl": jsonl_fields, "tfrecord": tfrecord_fields,
}

READERS: dict[str, Callable[[str, object, Fields], Iterator[Item]]] = {
    "text": read_text, "jsonl": read_jsonl, "csv": read_csv, "tsv": read_tsv,
    "parquet": read_parquet, "tfrecord": read_tfrecord,
}
