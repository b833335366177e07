"""Each --vector_dtype written and read back without a Beam job (the job's runs of every dtype are
tests/job/test_vector_dtypes.py): the stored values through a Parquet file and as TFRecord bytes,
against numpy's own quantisation computed here."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_embed.pipeline.common.rows.vector_dtypes import read_back, stored_as

WIDTH = 12


def _vectors(rows: int = 300, seed: int = 0) -> np.ndarray:
    """Dimensions of different spreads and centres, none centred on 0 (an offset's sign matters)."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(rows, WIDTH)) * rng.uniform(0.01, 3, WIDTH)
            + rng.uniform(-5, 5, WIDTH)).astype(np.float32)


def _through_parquet(stored, vectors: np.ndarray) -> np.ndarray:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"v": stored.arrow(vectors)}), buffer, row_group_size=97)
    return read_back(pq.read_table(io.BytesIO(buffer.getvalue())).column("v"), stored, "v")


def _through_tfrecord_bytes(stored, vectors: np.ndarray) -> np.ndarray:
    return stored.decode(stored.stored_of_bytes([row.tobytes() for row in stored.encode(vectors)]))


def test_int8_codes_are_each_dimensions_min_max_quantisation():
    x = _vectors()
    stored = stored_as("int8", x)
    low, high = x.min(axis=0).astype(np.float64), x.max(axis=0).astype(np.float64)
    scale = (high - low) / 255
    np.testing.assert_allclose(stored.scale, scale, rtol=1e-6)
    np.testing.assert_allclose(stored.offset, low + 128 * scale, rtol=1e-6, atol=1e-6)
    codes = stored.encode(x)
    assert codes.dtype == np.int8
    np.testing.assert_array_equal(codes.min(axis=0), -128)  # each dimension's min and max
    np.testing.assert_array_equal(codes.max(axis=0), 127)  # are the ends of the code range
    want = np.clip(np.rint((x - (low + 128 * scale)) / scale), -128, 127)
    assert np.abs(codes - want).max() <= 1  # float32 rounding may move a tie by one level
    assert np.mean(codes == want) > 0.99


@pytest.mark.parametrize("path", [_through_parquet, _through_tfrecord_bytes])
def test_int8_reads_back_within_half_a_level_of_each_value(path):
    x = _vectors(seed=1)
    stored = stored_as("int8", x)
    back = path(stored, x)
    half = np.asarray(stored.scale, np.float64) / 2
    error = np.abs(back.astype(np.float64) - x)
    assert back.dtype == np.float32 and back.shape == x.shape
    assert (error <= half * 1.001 + 1e-6).all(), error.max(axis=0) / half


def test_int8_clips_values_beyond_the_calibrated_range_to_its_ends():
    x = _vectors(seed=2)
    stored = stored_as("int8", x)
    beyond = np.stack([x.min(axis=0) - 10, x.max(axis=0) + 10])
    back = _through_parquet(stored, beyond)
    top = np.float32(stored.offset) + 127 * np.float32(stored.scale)
    np.testing.assert_allclose(back[0], x.min(axis=0), atol=float(np.max(stored.scale)))
    np.testing.assert_allclose(back[1], top, rtol=1e-6)


EXPECTED = {
    "float32": lambda x: x,
    "float16": lambda x: x.astype(np.float16).astype(np.float32),
    "binary": lambda x: np.where(x > 0, 1, -1).astype(np.float32),
}


# float32 is a float list feature in TFRecord, not bytes: Parquet only
@pytest.mark.parametrize("dtype, path", [("float32", _through_parquet),
                                         ("float16", _through_parquet),
                                         ("float16", _through_tfrecord_bytes),
                                         ("binary", _through_parquet),
                                         ("binary", _through_tfrecord_bytes)])
def test_the_other_dtypes_read_back_as_numpy_stores_them(dtype, path):
    x = _vectors(seed=3) - 2  # values of both signs
    back = path(stored_as(dtype, x), x)
    np.testing.assert_array_equal(back, EXPECTED[dtype](x))
