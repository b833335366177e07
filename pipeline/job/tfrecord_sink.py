"""TFRecord shards of `tf.train.Example`s, encoded and written a whole inference batch at a time.

Building one `tf.train.Example` per record through the protobuf API cost ~0.5 ms a record on
the job's host thread (six `Feature` messages, the vector copied into a Python list first), and
each serialized record was its own Beam element. Here the Example wire format is written
directly: a record is a few byte strings joined, its vectors' bytes sliced from the batch's
float32 matrix. Map entries go in key order, which is what
`Example.SerializeToString(deterministic=True)` writes, so each record's bytes can be checked
against protobuf's own. The sink is Beam's TFRecord framing (length, masked CRC32C), framed a
batch at a time, in Beam's file-based sink (shards, temp files), one element per batch.
"""

from __future__ import annotations

import functools
import struct

import numpy as np
from apache_beam.io import filebasedsink
from apache_beam.io.filesystem import CompressionTypes

from beam_embed.process.private_apis import masked_crc32c

# Protobuf tags (field number << 3 | 2, length-delimited) of tensorflow/core/example/*.proto.
_FIELD_1 = b"\x0a"  # Example.features, Features.feature (map entry), MapEntry.key, *List.value
_MAP_VALUE = b"\x12"  # MapEntry.value
_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = b"\x0a", b"\x12", b"\x1a"  # Feature's oneof kind
_LENGTH, _CRC = struct.Struct("<Q"), struct.Struct("<I")  # TFRecord framing


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


def float_features(matrix: np.ndarray) -> list[bytes]:
    """A `Feature` with a FloatList (packed little-endian float32) for each row of `matrix`."""
    rows = np.ascontiguousarray(matrix, "<f4")
    data = rows.shape[1] * 4
    head = _FLOAT_LIST + _varint(len(_FIELD_1) + len(_varint(data)) + data) + _FIELD_1 + \
        _varint(data)
    raw = rows.tobytes()
    return [head + raw[i * data:(i + 1) * data] for i in range(rows.shape[0])]


def raw_features(rows: np.ndarray) -> list[bytes]:
    """A `Feature` with a BytesList of one value, a row's raw bytes, for each row of `rows`."""
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


class TFRecordBatchSink(filebasedsink.FileBasedSink):
    """Each element is a list of serialized records, written in order."""

    def __init__(self, file_path_prefix: str, file_name_suffix: str = "", num_shards: int = 0,
                 shard_name_template: str | None = None):
        super().__init__(file_path_prefix, coder=None, file_name_suffix=file_name_suffix,
                         num_shards=num_shards, shard_name_template=shard_name_template,
                         mime_type="application/octet-stream",
                         compression_type=CompressionTypes.AUTO)

    def write_record(self, file_handle, value: list[bytes]):
        file_handle.write(framed(value))


def framed(records: list[bytes]) -> bytes:
    """The records in TFRecord framing (length, its masked CRC32C, data, the data's), in one
    string: one write a batch instead of Beam's one a record (measured on a 20,000-record job:
    the per-record writes took ~0.4 s of the host thread under the profiler)."""
    crc = masked_crc32c()
    parts = []
    for record in records:
        length = _LENGTH.pack(len(record))
        parts += (length, _CRC.pack(crc(length)), record, _CRC.pack(crc(record)))
    return b"".join(parts)
