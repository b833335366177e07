"""vector_matrix: the right rows from any chunking or slice, a view where Arrow allows, nulls
named or NaN."""

import numpy as np
import pyarrow as pa
import pytest

from beam_embed.pipeline.common.rows.vectors import vector_matrix


def _column(x: np.ndarray) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), x.shape[1])


def test_one_chunk_is_viewed_not_copied():
    x = np.random.default_rng(0).standard_normal((100, 8)).astype(np.float32)
    column = pa.chunked_array([_column(x)])
    m = vector_matrix(column, 8)
    np.testing.assert_array_equal(m, x)
    assert m.ctypes.data == column.chunk(0).values.buffers()[1].address


def test_chunks_and_slices_give_their_own_rows():
    x = np.random.default_rng(1).standard_normal((90, 4)).astype(np.float32)
    chunked = pa.chunked_array([_column(x[:30]), _column(x[30:])])
    np.testing.assert_array_equal(vector_matrix(chunked, 4), x)
    np.testing.assert_array_equal(vector_matrix(_column(x).slice(17, 40), 4), x[17:57])
    np.testing.assert_array_equal(vector_matrix(chunked.slice(25, 10), 4), x[25:35])


def test_null_vectors_are_named_and_null_values_read_as_nan():
    values = pa.array([1.0, None, 3.0, 4.0], pa.float32())
    with_inner_null = pa.FixedSizeListArray.from_arrays(values, 2)
    np.testing.assert_array_equal(vector_matrix(with_inner_null, 2), [[1, np.nan], [3, 4]])
    null_row = pa.array([[1.0, 2.0], None], pa.list_(pa.float32(), 2))
    with pytest.raises(ValueError, match="column 'mean' holds 1 null vectors"):
        vector_matrix(null_row, 2, "mean")
