"""TFRecord: the job's batches encoded as `tf.train.Example`s under the run's schema (schema.py:
one feature per column; at token granularity the `tokens` bytes list, `token_start`/`token_end`
int64 lists, `vectors` a float list of tokens x width (float32 whatever --token_dtype) and
`vector_width`), its shards of them, written a whole inference batch at a time, and every reader
of them: the row count, pca's blocks of whole records, --reuse's
previous rows (search reads no TFRecord: it scans one column, which only a columnar format
allows).

Writing: building one `tf.train.Example` per record through the protobuf API cost ~0.5 ms a
record on the job's host thread (six `Feature` messages, the vector copied into a Python list
first), and each serialized record was its own Beam element. Here the Example wire format is
written directly: a record is a few byte strings joined, its vectors' bytes sliced from the
batch's float32 matrix. Map entries go in key order, which is what
`Example.SerializeToString(deterministic=True)` writes, so each record's bytes can be checked
against protobuf's own. The shards are Beam's TFRecord framing (length, masked CRC32C), framed a
batch at a time, in Beam's file-based sink (shards, temp files), one element per batch.

Reading: every record's CRC is checked (tf.data), and a shard that breaks off or holds another
number of records than the manifest counts is an IncompleteInput naming the file. Beam, numpy and
TensorFlow are imported inside the functions: the registry lists this format without them.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator

from beam_embed.pipeline.common.output_formats.schema import CHUNK_COLUMNS, chunk_values
from beam_embed.pipeline.common.settings.errors import IncompleteInput

SUFFIX = ".tfrecord"

# Protobuf tags (field number << 3 | 2, length-delimited) of tensorflow/core/example/*.proto.
_FIELD_1 = b"\x0a"  # Example.features, Features.feature (map entry), MapEntry.key, *List.value
_MAP_VALUE = b"\x12"  # MapEntry.value
_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = b"\x0a", b"\x12", b"\x1a"  # Feature's oneof kind
_LENGTH, _CRC = struct.Struct("<Q"), struct.Struct("<I")  # TFRecord framing
# A record's framing around its data: length (8 bytes), its CRC (4), the data's CRC (4).
FRAMING = 16
READ_BATCH = 1024  # records tf.data reads a Python step
BLOCK_RECORDS = 4096  # records in one of pca's blocks


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS = tuple(_encode_varint(n) for n in range(1 << 14))  # lengths up to 16 KiB


def _varint(n: int) -> bytes:
    return _SMALL_VARINTS[n] if n < 16384 else _encode_varint(n)


def _delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def bytes_feature(values: list[bytes]) -> bytes:
    """A `Feature` with a BytesList (an empty string is still one value)."""
    return _delimited(_BYTES_LIST, b"".join(_delimited(_FIELD_1, v) for v in values))


def int64_feature(values) -> bytes:
    """A `Feature` with an Int64List (packed; negative values take ten bytes, as in protobuf)."""
    packed = b"".join(_varint(int(v) & 0xFFFFFFFFFFFFFFFF) for v in values)
    return _delimited(_INT64_LIST, _delimited(_FIELD_1, packed))


def float_features(matrix) -> list[bytes]:
    """A `Feature` with a FloatList (packed little-endian float32) for each row of `matrix`."""
    import numpy as np

    rows = np.ascontiguousarray(matrix, "<f4")
    data = rows.shape[1] * 4
    head = _FLOAT_LIST + _varint(len(_FIELD_1) + len(_varint(data)) + data) + _FIELD_1 + \
        _varint(data)
    raw = rows.tobytes()
    return [head + raw[i * data:(i + 1) * data] for i in range(rows.shape[0])]


def raw_features(rows) -> list[bytes]:
    """A `Feature` with a BytesList of one value, a row's raw bytes, for each row of `rows`."""
    import numpy as np

    rows = np.ascontiguousarray(rows)
    size = rows.nbytes // max(len(rows), 1)
    raw = rows.tobytes()
    return [bytes_feature([raw[i * size:(i + 1) * size]]) for i in range(len(rows))]


@functools.lru_cache(maxsize=256)
def _entry_key(key: str) -> bytes:
    return _delimited(_FIELD_1, key.encode("utf-8")) + _MAP_VALUE


def examples_of(columns: dict[str, list[bytes | None]]) -> list[bytes]:
    """Serialized `tf.train.Example`s, one per record, from each feature's encoded `Feature` for
    every record (None: the record has none). Map entries go in key order (code-point order of
    str keys is their UTF-8 byte order, protobuf's); built a column at a time, each record's
    entries then joined once."""
    entries = []
    for key in sorted(columns):
        head = _entry_key(key)
        column = []
        for feature in columns[key]:
            if feature is None:
                column.append(b"")
                continue
            entry = head + _varint(len(feature)) + feature
            column.append(_FIELD_1 + _varint(len(entry)) + entry)
        entries.append(column)
    return [_delimited(_FIELD_1, b"".join(parts)) for parts in zip(*entries)]


def serialized(schema, batch) -> list[bytes]:
    """One EmbeddedBatch's records as serialized `tf.train.Example`s (`schema`: an
    OutputSchema), encoded a column at a time on the wire (`examples_of`); token-level rows,
    which are ragged, through protobuf's API (`examples`)."""
    if schema.granularity == "token":
        return list(examples(schema, batch))
    columns = _feature_columns(schema, batch, _wire_text, int64_feature)
    columns.update({col: float_features(batch.vectors[col]) if s.dtype == "float32"
                    else raw_features(s.encode(batch.vectors[col]))
                    for col, s in schema.storage()})
    return examples_of(columns)


def examples(schema, batch):
    """The same records built through protobuf's API, serialized one by one (the same bytes
    as `serialized` gives for a sentence-level batch)."""
    import tensorflow as tf

    columns = _feature_columns(schema, batch, _bytes, _ints)
    vectors = (_token_features if schema.granularity == "token" else _vector_features)(
        schema, batch)
    for i in range(len(batch.records)):
        f = {k: values[i] for k, values in columns.items() if values[i] is not None}
        f.update(vectors(i))
        # deterministic: map entries in key order, as the wire route writes them; protobuf's
        # default order follows Python's string hashing, so a token run's shards differed
        # from process to process
        yield tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString(
            deterministic=True)


def _feature_columns(schema, batch, text, ints) -> dict[str, list]:
    """Each feature other than the vectors, for every record (None where a record has no
    value), the one list both routes write: `text` encodes a str, `ints` a list of integers. A
    batch's sources and token counts repeat: each value is encoded once."""
    records = batch.records
    source, tokens, truncated = _once(text), _once(lambda n: ints([n])), \
        _once(lambda t: ints([t]))
    columns = {"id": [text(r.id) for r in records],
               "source": [source(r.source) for r in records],
               "num_tokens": [tokens(n) for n in batch.num_tokens.tolist()],
               "truncated": [truncated(t) for t in batch.truncated.tolist()]}
    if schema.include_text:
        columns["text"] = [text(r.text) for r in records]
    if schema.chunks:
        chunks = chunk_values(records)
        columns["parent_id"] = [text(v) for v in chunks["parent_id"]]
        columns.update({c: [ints([v]) for v in chunks[c]] for c in CHUNK_COLUMNS[1:]})
    metadata = schema.metadata()
    if metadata:
        metas = [dict(r.meta) for r in records]
        for k, column in metadata:
            columns[column] = [None if m.get(k) is None else text(m[k]) for m in metas]
    return columns


def _vector_features(schema, batch):
    """The protobuf route's vector features of record i: the batch's vectors converted to
    Python lists once per batch (FloatList reads a list of floats ~4x faster than a numpy row:
    measured 23 vs 89 us per 384-wide vector)."""
    import numpy as np
    import tensorflow as tf

    storage = schema.storage()
    rows = {col: np.asarray(batch.vectors[col], np.float32).tolist() if s.dtype == "float32"
            else list(s.encode(batch.vectors[col])) for col, s in storage}

    def features(i: int) -> dict:
        return {col: tf.train.Feature(float_list=tf.train.FloatList(value=rows[col][i]))
                if s.dtype == "float32" else
                tf.train.Feature(bytes_list=tf.train.BytesList(value=[rows[col][i].tobytes()]))
                for col, s in storage}
    return features


def _token_features(schema, batch):
    """The token features of record i: ragged, each record's built on its own."""
    import numpy as np
    import tensorflow as tf

    t = batch.tokens

    def features(i: int) -> dict:
        return {"tokens": _bytes_list(t.tokens[i]), "token_start": _ints(t.starts[i]),
                "token_end": _ints(t.ends[i]), "vector_width": _ints([schema.width]),
                "vectors": tf.train.Feature(float_list=tf.train.FloatList(
                    value=np.asarray(t.vectors[i], np.float32).reshape(-1).tolist()))}
    return features


def _once(encode):
    """`encode`, computing each distinct value's result once."""
    done = {}

    def encoded(value):
        found = done.get(value)
        if found is None:
            found = done[value] = encode(value)
        return found
    return encoded


def _wire_text(value: str) -> bytes:
    return bytes_feature([value.encode("utf-8")])


def _ints(values):
    import tensorflow as tf

    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def _bytes(value: str):
    return _bytes_list([value])


def _bytes_list(values: list[str]):
    import tensorflow as tf

    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode("utf-8") for v in values]))


def framed(serialized: list[bytes]) -> bytes:
    """The records in TFRecord framing (length, its masked CRC32C, data, the data's), in one
    string: one write a batch instead of Beam's one a record (measured on a 20,000-record job:
    the per-record writes took ~0.4 s of the host thread under the profiler)."""
    from beam_embed.process.private_apis.beam import masked_crc32c

    crc = masked_crc32c()
    parts = []
    for record in serialized:
        length = _LENGTH.pack(len(record))
        parts += (length, _CRC.pack(crc(length)), record, _CRC.pack(crc(record)))
    return b"".join(parts)


class RecordsFile:
    """One open TFRecord file that lists of serialized records are written into, in order."""

    def __init__(self, handle):
        self._handle = handle

    def write(self, records: list[bytes]) -> None:
        self._handle.write(framed(records))

    def close(self) -> None:
        """The sink closes the file itself."""


class ExampleBatches:
    """The job's batches written into one open TFRecord shard (`open_batches`), framed a batch
    at a time."""

    def __init__(self, handle, schema):
        self._handle, self._schema = handle, schema

    def encode(self, batch) -> bytes:
        """The batch's records, framed."""
        return framed(serialized(self._schema, batch))

    def write(self, encoded: bytes) -> None:
        self._handle.write(encoded)

    def pending_bytes(self) -> int:
        return 0

    def close(self) -> None:
        """The shard's writer closes the file itself."""


def open_batches(handle, schema, shard_bytes: int) -> ExampleBatches:
    """A shard of the job's rows being written (run_folder/committed_shards.py)."""
    return ExampleBatches(handle, schema)


def sink(prefix: str, suffix: str = SUFFIX, num_shards: int = 0, template: str | None = None,
         digests: bool = False):
    """Beam's file-based sink of lists of serialized records into TFRecord shards named prefix
    + template + suffix (`digests`: each shard's hash for the job's manifest, sink.FormatSink)."""
    from beam_embed.pipeline.common.output_formats.sink import FormatSink

    return FormatSink(prefix, suffix, num_shards, template, RecordsFile,
                      "application/octet-stream", digests=digests)


def write(output: str, schema, num_shards: int, in_bundles: bool = False):
    """The job's TFRecord shards in `output`: each batch's records as serialized Examples
    (`serialized`), framed a batch at a time, the paths written out."""
    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems

    from beam_embed.pipeline.common.run_folder.bundle_write import write_shards
    from beam_embed.pipeline.common.run_folder.manifest.folder import PREFIX, SHARD_TEMPLATE

    shards = sink(FileSystems.join(output, PREFIX), SUFFIX, num_shards, SHARD_TEMPLATE,
                  digests=True)
    return ("ToExamples" >> beam.Map(functools.partial(serialized, schema))
            | "WriteShards" >> write_shards(shards, in_bundles))


class DamagedFile(IncompleteInput):
    """A file that breaks off: `what` happened to it, without its path (dead letters name the
    file in their own fields)."""

    def __init__(self, path: str, what: str):
        super().__init__(f"{path} {what}")
        self.path, self.what = path, what


def read_records(path: str, expected: int | None = None) -> Iterator[bytes]:
    """A TFRecord file's records (CRC-checked by tf.data); IncompleteInput naming the file when
    it is damaged, cut short, or holds another number of records than `expected`.

    Read in batches (one Python step per record was ~100x slower); when a batch breaks off, its
    whole records are read again one by one, so "after record N" is exact. tf.data reads a file
    cut inside a record's 12-byte header as if it ended there, so the records' framed sizes are
    added up and compared with the file's size (uncompressed files)."""
    import tensorflow as tf

    compressed = path.lower().endswith(".gz")
    dataset = tf.data.TFRecordDataset(path, compression_type="GZIP" if compressed else "")
    n = framed_size = 0
    try:
        try:
            for batch in dataset.batch(READ_BATCH).as_numpy_iterator():
                for record in batch:
                    n += 1
                    framed_size += len(record) + FRAMING
                    yield record
        except tf.errors.OpError:  # the damage is somewhere in this batch: find where
            for record in dataset.skip(n).as_numpy_iterator():
                n += 1
                framed_size += len(record) + FRAMING
                yield record
            raise
    except tf.errors.OpError as e:
        raise DamagedFile(path, f"is damaged ({cause_of(e)}) after record {n}") from e
    size = None if compressed else _size(path)
    if size is not None and framed_size != size:
        raise DamagedFile(path, f"is damaged (it ends with {size - framed_size} bytes that are "
                                f"not a whole record: cut short) after record {n}")
    if expected is not None and n != expected:
        raise IncompleteInput(f"{path} holds {n} records, but the manifest counts {expected} in "
                              "it; it was replaced or cut at a record boundary: restore it or "
                              "rerun the job")


def _size(path: str) -> int | None:
    from beam_embed.pipeline.common.run_folder.literal_paths import size

    return size(path)  # a folder named "exp[1]" is no pattern here


def cause_of(error) -> str:
    """TensorFlow's reason for a bad TFRecord file, in words."""
    message = (getattr(error, "message", "") or str(error)).strip()
    if "truncated record" in message or "Read less bytes" in message:
        return "the file ends in the middle of a record: cut short"
    if "corrupted record" in message or "checksum" in message.lower():
        return "a record's checksum does not match: corrupt data"
    return message.splitlines()[0] if message else type(error).__name__


def framed_records(path: str, size: int) -> int:
    """Records in an uncompressed TFRecord file of `size` bytes, from its framing alone: each
    record's length and the CRC of that length are read and checked, its data skipped, and the
    records must end exactly at the end of the file. The job counts the shards it just wrote
    this way: reading every record back through tf.data (data CRCs, one Python step a record)
    was ~0.2 s of a 20,000-sentence job's finish, all of it after the last batch; readers still
    check every record's CRC (`read_records`)."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    from beam_embed.process.private_apis.beam import masked_crc32c

    crc = masked_crc32c()
    n = offset = 0
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        while offset < size:
            f.seek(offset)
            header = f.read(12)
            if len(header) < 12:
                raise DamagedFile(path, f"is damaged (it ends inside a record's header: cut "
                                        f"short) after record {n}")
            length, length_crc = struct.unpack("<QI", header)
            if crc(header[:8]) != length_crc:
                raise DamagedFile(path, f"is damaged (a record's length fails its checksum: "
                                        f"corrupt data) after record {n}")
            offset += length + FRAMING
            n += 1
    if offset != size:
        raise DamagedFile(path, f"is damaged (its last record runs {offset - size} bytes past "
                                f"the end: cut short) after record {n - 1}")
    return n


def count_rows(path: str) -> int:
    """Records in one TFRecord shard: from its framing when uncompressed, else read back."""
    size = None if path.lower().endswith(".gz") else _size(path)
    if size is None:  # compressed (its framing is inside), or missing (tf.data says so)
        return sum(1 for _ in read_records(path))
    return framed_records(path, size)


def _spec(columns: tuple[str, ...], pooling):
    import tensorflow as tf

    spec = {}
    for c in columns:
        if c in ("num_tokens", "truncated", *CHUNK_COLUMNS[1:]):
            spec[c] = tf.io.FixedLenFeature([], tf.int64)
        elif c in ("id", "source", "parent_id"):
            spec[c] = tf.io.FixedLenFeature([], tf.string)
        else:  # text and metadata may be missing from a record
            spec[c] = tf.io.FixedLenFeature([], tf.string, default_value="")
    spec[pooling.column] = (tf.io.FixedLenFeature([pooling.width], tf.float32)
                            if pooling.dtype == "float32" else  # a vector's bytes
                            tf.io.FixedLenFeature([], tf.string))
    return spec


def parse_examples(serialized: list[bytes], columns: tuple[str, ...], pooling):
    """A batch of serialized tf.train.Examples -> the block Parquet would have given: `columns`
    and the pooling's column as Parquet stores it (pooling.stored())."""
    import numpy as np
    import pyarrow as pa
    import tensorflow as tf

    try:
        parsed = tf.io.parse_example(tf.constant(serialized), _spec(columns, pooling))
    except tf.errors.InvalidArgumentError:
        _check_vector_width(serialized, pooling)
        raise
    arrays = {}
    for c in columns:
        values = parsed[c].numpy()
        if c in ("num_tokens", "truncated"):
            arrays[c] = pa.array(values.astype(np.int32) if c == "num_tokens" else values != 0)
        elif c in CHUNK_COLUMNS[1:]:
            arrays[c] = pa.array(values, pa.int64())
        else:
            arrays[c] = pa.array(values, pa.binary()).cast(pa.string())
    vectors, stored = parsed[pooling.column].numpy(), pooling.stored()
    arrays[pooling.column] = stored.arrow_of_stored(
        vectors if pooling.dtype == "float32" else stored.stored_of_bytes(list(vectors)))
    return pa.table(arrays)


def _check_vector_width(serialized: list[bytes], pooling) -> None:
    """When a batch did not parse: an IncompleteInput if its float vectors are not the width
    the manifest gives (parsed again at any length to say which width they are)."""
    import tensorflow as tf

    if pooling.dtype != "float32":  # stored as bytes: their size is checked as they decode
        return
    found = tf.io.parse_example(tf.constant(serialized), {
        pooling.column: tf.io.VarLenFeature(tf.float32)})[pooling.column]
    widths = set(tf.math.bincount(tf.cast(found.indices[:, 0], tf.int32),
                                  minlength=len(serialized)).numpy().tolist())
    if widths != {pooling.width}:
        raise IncompleteInput(f"column {pooling.column!r} holds vectors of width "
                              f"{sorted(widths)}, but its run's manifest gives float32 vectors "
                              f"of width {pooling.width}: the manifest does not describe these "
                              "shards; rerun the job")


def _shard_records(path: str, rows: dict):
    return read_records(path, rows.get(path.rsplit("/", 1)[-1]))


def read_blocks(files, columns: tuple[str, ...], pooling, rows: dict):
    """pca: shard paths -> blocks of BLOCK_RECORDS parsed records. Shards are read whole, one
    per worker, each checked against the row count the manifest has for it (`rows`: shard name
    -> rows) as it is read: a damaged or swapped shard fails the job naming the file instead of
    leaving its records out."""
    import apache_beam as beam
    import pyarrow as pa

    return (files
            | "SpreadShards" >> beam.Reshuffle()
            | "ReadTFRecord" >> beam.FlatMap(_shard_records, rows)
            | "BatchExamples" >> beam.BatchElements(min_batch_size=BLOCK_RECORDS,
                                                    max_batch_size=BLOCK_RECORDS)
            | "ParseExamples" >> beam.Map(parse_examples, columns, pooling
                                          ).with_output_types(pa.Table))


def read_table(path: str, columns: tuple[str, ...], pooling, rows: dict):
    """read_embeddings: the shard parsed as pca's blocks are (`parse_examples`), BLOCK_RECORDS
    at a time, checked against the row count the manifest has for it (`rows`)."""
    import itertools

    import pyarrow as pa

    records = _shard_records(path, rows)
    blocks = [parse_examples(chunk, columns, pooling)
              for chunk in iter(lambda: list(itertools.islice(records, BLOCK_RECORDS)), [])]
    if blocks:
        return pa.concat_tables(blocks)
    types = {"num_tokens": pa.int32(), "truncated": pa.bool_(),  # as parse_examples gives them
             **{c: pa.int64() for c in CHUNK_COLUMNS[1:]}}
    return pa.table({**{c: pa.array([], types.get(c, pa.string())) for c in columns},
                     pooling.column: pa.array([], pooling.stored().arrow_type())})


def read_previous(path: str, columns: tuple[tuple[str, int], ...], stored=None):
    """--reuse: (text, float32 vectors per (column, width), num_tokens, truncated) per record,
    each record's CRC checked. `stored`: how the run stored each column (StoredVectors, in
    `columns`' order; None: float32); an int8 run's codes read back as values its ranges
    encode to the same codes."""
    import tensorflow as tf

    stored = stored or (None,) * len(columns)
    for record in read_records(path):
        f = tf.train.Example.FromString(record).features.feature
        vectors = tuple(_previous_vector(f[c], st) for (c, _), st in zip(columns, stored))
        yield (f["text"].bytes_list.value[0].decode("utf-8"),
               vectors, int(f["num_tokens"].int64_list.value[0]),
               bool(f["truncated"].int64_list.value[0]))


def _previous_vector(feature, stored):
    """One record's vector feature as float32: a float list as is, a stored dtype's bytes
    decoded (StoredVectors.recodable)."""
    import numpy as np

    if stored is None or stored.dtype == "float32":
        return np.array(feature.float_list.value, np.float32)
    return stored.recodable(stored.stored_of_bytes(list(feature.bytes_list.value)))[0]
