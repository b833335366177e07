"""The token-granularity schema: per record, its tokens, character offsets and token vectors.

Parquet: `tokens list<string>`, `token_start`/`token_end list<int32>` (character offsets into
`text`), `vectors list<fixed_size_list<float32|float16>[width]>`. TFRecord (flattened
`tf.train.Example`, float32 whatever `--token_dtype`): `tokens` bytes list, `token_start` and
`token_end` int64 lists, `vectors` a float list of tokens x width, `vector_width`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from beam_embed.pipeline.common.records import EmbeddedBatch
from beam_embed.pipeline.job.sinks import OutputSchema, _bytes_list, _ints

ARROW_DTYPES = {"float32": pa.float32(), "float16": pa.float16()}


@dataclasses.dataclass(frozen=True)
class TokenSchema(OutputSchema):
    dtype: str = "float32"

    @property
    def width(self) -> int:
        return dict(self.widths)["vectors"]

    def vector_fields(self) -> list[pa.Field]:
        vector = pa.list_(ARROW_DTYPES[self.dtype], self.width)
        return [pa.field("tokens", pa.list_(pa.string())),
                pa.field("token_start", pa.list_(pa.int32())),
                pa.field("token_end", pa.list_(pa.int32())),
                pa.field("vectors", pa.list_(vector))]

    def vector_columns(self, batch: EmbeddedBatch) -> list[pa.Array]:
        t = batch.tokens
        counts = np.array([len(v) for v in t.vectors], np.int32)
        offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
        flat = (np.concatenate(t.vectors) if counts.sum() else
                np.zeros((0, self.width), self.dtype)).astype(self.dtype)
        vectors = pa.FixedSizeListArray.from_arrays(
            pa.array(flat.reshape(-1), ARROW_DTYPES[self.dtype]), self.width)
        return [pa.array(t.tokens, pa.list_(pa.string())),
                pa.array([s.tolist() for s in t.starts], pa.list_(pa.int32())),
                pa.array([e.tolist() for e in t.ends], pa.list_(pa.int32())),
                pa.ListArray.from_arrays(offsets, vectors)]

    def serialized(self, batch: EmbeddedBatch) -> list[bytes]:
        return list(self.examples(batch))  # ragged per record: the protobuf route

    def vector_rows(self, batch: EmbeddedBatch):
        return batch

    def vector_features(self, batch: EmbeddedBatch, i: int) -> dict:
        import tensorflow as tf

        t = batch.tokens
        return {"tokens": _bytes_list(t.tokens[i]), "token_start": _ints(t.starts[i]),
                "token_end": _ints(t.ends[i]), "vector_width": _ints([self.width]),
                "vectors": tf.train.Feature(float_list=tf.train.FloatList(
                    value=np.asarray(t.vectors[i], np.float32).reshape(-1).tolist()))}
