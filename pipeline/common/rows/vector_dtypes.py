"""How sentence vectors are stored (`--vector_dtype`), written and read back as float32.

| dtype   | Parquet column                      | TFRecord feature            | bytes a vector |
| float32 | fixed_size_list<float>[width]       | float list                  | 4 x width      |
| float16 | fixed_size_list<halffloat>[width]   | bytes: little-endian float16 | 2 x width     |
| int8    | fixed_size_binary[width]            | bytes: int8 codes           | width          |
| binary  | fixed_size_binary[ceil(width / 8)]  | bytes: np.packbits' bits    | width / 8      |

int8 codes are per dimension: value = code * scale + offset, the scale and offset calibrated on a
sample of the run's own vectors (each dimension's min and max map to -128 and 127; values beyond
are clipped) and written to the manifest's pooling entry. Parquet has no 8-bit physical type: a
list<int8> column is stored as INT32, four bytes a value, so the codes are one fixed-size binary
value. binary keeps each dimension's sign bit (1: > 0), first dimension in the highest bit of
the first byte (np.packbits' order); it reads back as +1/-1, so the cosine of a float query with
it is the asymmetric score, and of two read-back vectors 1 - 2 * Hamming distance / width.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from beam_embed.pipeline.common.rows.vector_dtype_names import VECTOR_DTYPES
from beam_embed.pipeline.common.rows.vectors import vector_matrix
from beam_embed.pipeline.common.settings.errors import IncompleteInput

INT8_LEVELS = 255  # codes -128..127
CALIBRATION_ROWS = 1000  # vectors the int8 ranges are calibrated on
RECODE_STEPS = 64  # float32 steps StoredVectors.recodable moves a value at most


def _short(values: np.ndarray) -> tuple[float, ...]:
    """float32 values as the shortest decimals that read back to the same float32 (the
    manifest's JSON stays short: 0.0123457, not 0.012345679104328156)."""
    return tuple(float(str(v)) for v in np.asarray(values, np.float32))


def int8_ranges(sample: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(scale, offset) per dimension from a sample of vectors: min -> -128, max -> 127."""
    sample = np.asarray(sample, np.float32)
    low, high = sample.min(axis=0), sample.max(axis=0)
    scale = np.maximum(high - low, 1e-12) / INT8_LEVELS  # a constant dimension still decodes
    return _short(scale), _short(low + 128 * scale)


def calibration_sample(vectors: np.ndarray, rows: int = CALIBRATION_ROWS) -> np.ndarray:
    """Up to `rows` of `vectors`, evenly spaced (all of them when there are no more)."""
    if len(vectors) <= rows:
        return vectors
    return vectors[np.linspace(0, len(vectors) - 1, rows).round().astype(np.int64)]


def stored_as(dtype: str, vectors: np.ndarray) -> StoredVectors:
    """How `vectors` would be stored as `dtype`, int8 calibrated on a sample of them."""
    ranges = int8_ranges(calibration_sample(vectors)) if dtype == "int8" else ((), ())
    return StoredVectors(dtype, vectors.shape[1], *ranges)


@dataclasses.dataclass(frozen=True)
class StoredVectors:
    """One vector column's storage: its dtype, width and, for int8, its ranges."""

    dtype: str
    width: int
    scale: tuple[float, ...] = ()  # int8: value = code * scale + offset, per dimension
    offset: tuple[float, ...] = ()

    def __post_init__(self):
        if self.dtype not in VECTOR_DTYPES:
            raise ValueError(f"unknown vector dtype {self.dtype!r}; expected one of "
                             f"{list(VECTOR_DTYPES)}")

    @property
    def byte_width(self) -> int:
        """Bytes of one stored vector (the fixed-size binary types' size)."""
        return {"float32": 4 * self.width, "float16": 2 * self.width, "int8": self.width,
                "binary": -(-self.width // 8)}[self.dtype]

    def arrow_type(self) -> pa.DataType:
        if self.dtype == "float32":
            return pa.list_(pa.float32(), self.width)
        if self.dtype == "float16":
            return pa.list_(pa.float16(), self.width)
        return pa.binary(self.byte_width)

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """float [rows, width] -> the stored values, [rows, width] (or [rows, bytes] for
        binary), C-contiguous little-endian."""
        vectors = np.asarray(vectors, np.float32)
        if self.dtype == "float32":
            return np.ascontiguousarray(vectors, "<f4")
        if self.dtype == "float16":
            return np.ascontiguousarray(vectors, "<f2")
        if self.dtype == "binary":
            return np.packbits(vectors > 0, axis=1)
        if not self.scale:
            raise ValueError("int8 vectors need their calibrated ranges")
        codes = np.rint((vectors - np.float32(self.offset)) / np.float32(self.scale))
        return np.clip(codes, -128, 127).astype(np.int8)

    def decode(self, stored: np.ndarray) -> np.ndarray:
        """The stored values -> float32 [rows, width]."""
        if self.dtype == "binary":
            bits = np.unpackbits(np.asarray(stored, np.uint8), axis=1, count=self.width)
            return bits.astype(np.float32) * 2 - 1
        if self.dtype == "int8":
            return stored.astype(np.float32) * np.float32(self.scale) + np.float32(self.offset)
        return np.asarray(stored, np.float32)

    def recodable(self, stored: np.ndarray) -> np.ndarray:
        """The stored values -> float32 [rows, width] that `encode` maps back to exactly these
        values. int8: each decoded value, moved a float32 step at a time (at most RECODE_STEPS)
        where rounding made it encode to a neighbouring code, as it does where a dimension's
        scale nears float32's resolution at its offset (values within ~1e-4 of 10: ~1% of
        codes). --reuse of an int8 run passes its rows through the new run's writer,
        which encodes them again on the same ranges: they keep the codes stored. A code that
        `encode` never writes (one no float32 value rounds to) keeps its decoded value."""
        values = self.decode(stored)
        if self.dtype != "int8":
            return values
        codes = np.asarray(stored, np.int8).astype(np.int16)
        for _ in range(RECODE_STEPS):
            off = self.encode(values).astype(np.int16) - codes
            if not off.any():
                break
            toward = np.where(off > 0, np.float32(-np.inf), np.float32(np.inf))
            values = np.where(off == 0, values, np.nextafter(values, toward)).astype(np.float32)
        return values

    def arrow(self, vectors: np.ndarray) -> pa.Array:
        """float vectors -> the Parquet column's Arrow array."""
        return self.arrow_of_stored(self.encode(vectors))

    def arrow_of_stored(self, stored: np.ndarray) -> pa.Array:
        if self.dtype in ("float32", "float16"):
            return pa.FixedSizeListArray.from_arrays(pa.array(stored.reshape(-1)), self.width)
        data = pa.py_buffer(np.ascontiguousarray(stored).tobytes())
        return pa.Array.from_buffers(self.arrow_type(), len(stored), [None, data])

    def stored_of_bytes(self, values: list[bytes]) -> np.ndarray:
        """TFRecord bytes features (one per vector) -> the stored values."""
        numpy = {"float16": "<f2", "int8": np.int8, "binary": np.uint8}[self.dtype]
        wrong = next((len(v) for v in values if len(v) != self.byte_width), None)
        if wrong is not None:
            raise IncompleteInput(f"a stored {self.dtype} vector holds {wrong} bytes, but its "
                                  f"run's manifest gives width {self.width} ({self.byte_width} "
                                  "bytes): the manifest does not describe these shards")
        rows = np.frombuffer(b"".join(values), numpy)
        return rows.reshape(len(values), -1)


def read_back(column: pa.Array | pa.ChunkedArray, stored: StoredVectors,
              name: str = "vector", recodable: bool = False) -> np.ndarray:
    """A stored vector column as float32 [rows, width]: float32 viewed in Arrow's buffer
    (beam_embed.pipeline.common.rows.vectors), the other dtypes decoded. A column whose vectors
    are not `stored`'s type and width (a manifest that does not describe its shards) is an
    IncompleteInput: read at another width, its values would be split into more (or fewer)
    vectors than there are records. `recodable`: int8 decoded to values that encode back to
    the same codes (StoredVectors.recodable)."""
    _check_width(column.type, stored, name)
    if stored.dtype in ("float32", "float16"):
        return stored.decode(vector_matrix(column, stored.width, name))
    if isinstance(column, pa.ChunkedArray):
        column = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if column.null_count:
        raise ValueError(f"column {name!r} holds {column.null_count} null vectors")
    size = stored.byte_width
    raw = np.frombuffer(column.buffers()[1], np.uint8, count=len(column) * size,
                        offset=column.offset * size).reshape(len(column), size)
    values = raw.view(np.int8) if stored.dtype == "int8" else raw
    return stored.recodable(values) if recodable else stored.decode(values)


def _check_width(found: pa.DataType, stored: StoredVectors, name: str) -> None:
    expected = stored.arrow_type()
    if pa.types.is_fixed_size_list(found) and pa.types.is_fixed_size_list(expected):
        same = found.list_size == expected.list_size and found.value_type == expected.value_type
    else:
        same = found == expected
    if not same:
        raise IncompleteInput(f"column {name!r} holds {found} vectors, but its run's manifest "
                              f"gives {stored.dtype} vectors of width {stored.width} ({expected}):"
                              " the manifest does not describe these shards; rerun the job")
