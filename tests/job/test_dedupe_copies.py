"""--dedupe on a text held by many records: the text crosses the grouping once (each other record
only with what its row needs), and its rows leave in batches of bounded size, so memory follows
the distinct texts, not the duplicates."""

from __future__ import annotations

import pickle

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that

from beam_embed.models.spec import encoder_spec
from beam_embed.pipeline.common.rows.records import EmbeddedBatch, Record
from beam_embed.pipeline.job.embed import EmbedRecords
from beam_embed.pipeline.job.incremental import REUSED_BATCH, EmbedDistinct

pytestmark = pytest.mark.pipeline  # a real encoder in a Beam pipeline

COPIES = 1_500
FREQUENT = " ".join(["the cat sat on the mat"] * 200)  # 4,599 characters
OTHERS = ["a dog", "the river bank", "money is big"]


class _Measured(beam.PTransform):
    """The real encoder step, with the pickled size of every element handed to it recorded (a
    Beam distribution): what --dedupe's grouping gives the encoder for a text."""

    def __init__(self, embed):
        super().__init__()
        self._embed = embed

    def expand(self, records):
        size = beam.metrics.Metrics.distribution("test", "element_bytes")

        def measured(record):
            size.update(len(pickle.dumps(record)))
            return record

        return records | "Measure" >> beam.Map(measured) | "Embed" >> self._embed


def _records() -> list[Record]:
    copies = [Record(f"f:{i}", FREQUENT, "f", (("n", str(i)),)) for i in range(COPIES)]
    return copies + [Record(f"o:{i}", t, "o") for i, t in enumerate(OTHERS)]


def _check_rows(batches) -> None:
    """Every record one row, in batches of at most REUSED_BATCH rows: each copy of the frequent
    text with its own id and metadata and the text's one vector."""
    assert all(isinstance(b, EmbeddedBatch) for b in batches)
    assert max(len(b) for b in batches) <= REUSED_BATCH, [len(b) for b in batches]
    rows = {r.id: (r, b.vectors["mean"][i], (b.num_tokens[i], b.truncated[i]))
            for b in batches for i, r in enumerate(b.records)}
    assert len(rows) == sum(len(b) for b in batches) == COPIES + len(OTHERS)
    for i in range(COPIES):
        record, vector, tokens = rows[f"f:{i}"]
        assert (record.text, record.source, record.meta) == (FREQUENT, "f", (("n", str(i)),))
        np.testing.assert_array_equal(vector, rows["f:0"][1])
        assert tokens == rows["f:0"][2] and tokens[1]  # counted whole, cut to 16: truncated
    assert {rows[f"o:{i}"][0].text for i in range(len(OTHERS))} == set(OTHERS)


def test_a_frequent_text_crosses_once_and_its_rows_leave_in_bounded_batches(tiny_export):
    spec = encoder_spec(tiny_export, poolings=("mean",), max_seq_length=16)
    p = beam.Pipeline(options=PipelineOptions(["--direct_num_workers=1"]))
    embed = _Measured(EmbedRecords(spec, progress_every_s=0))
    out = (p | beam.Create(_records())
           | EmbedDistinct(embed, dedupe=True, previous=None))
    assert_that(out["batches"], _check_rows)
    result = p.run()
    result.wait_until_finish()

    sizes = result.metrics().query(MetricsFilter().with_name("element_bytes"))["distributions"]
    largest = sizes[0].committed.max
    # the frequent text once, and per other record its id and metadata: far below the text's
    # size a copy (the records themselves pickle to ~7 MB)
    assert largest < len(FREQUENT) * 2 + COPIES * 100, largest
