"""--dedupe and --reuse: records grouped by their text before the encoder, so each distinct text
is encoded once (--dedupe) and a text a previous run embedded is copied from it (--reuse).

records -> (text key, record) -> GroupByKey, or CoGroupByKey with the previous run's rows ->
per text: the previous row copied to each of its records, or one DistinctText for the encoder
(--dedupe), or each record for the encoder -> EmbedRecords (which gives every record of a
DistinctText its row) -> the encoded batches and batches of copied rows, to the same sinks.

One shuffle on 16-byte keys and no state outside Beam's, so it is the same on the DirectRunner's
workers and on Dataflow. Without either flag the job's graph does not have it.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from beam_embed.pipeline.common.records import DistinctText, EmbeddedBatch
from beam_embed.pipeline.job.reuse import PreviousRun, ReadPreviousRows, text_key

NEW, PREVIOUS, REUSED, COUNTS = "new", "previous", "reused", "counts"
REUSED_BATCH = 512  # copied rows per batch handed to the sinks, as an inference batch's most


def count_names(dedupe: bool, previous: PreviousRun | None) -> tuple[str, ...]:
    """The manifest's counts this step adds: distinct_texts (the texts among the records
    embedded), encoded (the texts the encoder was given: with --dedupe, each distinct text
    once) and, with --reuse, reused (the records whose vectors were copied)."""
    if not dedupe and previous is None:
        return ()
    return ("distinct_texts", "encoded") + (("reused",) if previous is not None else ())


class _Route(beam.DoFn):
    """One text's records (and the previous run's row for it, if any) -> copied rows
    (`reused`), or what the encoder gets; its counts (`counts`)."""

    def __init__(self, dedupe: bool):
        self._dedupe = dedupe

    def process(self, item):
        _, groups = item
        records = list(groups[NEW])
        if not records:  # a text only the previous run had
            return
        previous = next(iter(groups.get(PREVIOUS, ())), None)
        yield beam.pvalue.TaggedOutput(COUNTS, ("distinct_texts", 1))
        if previous is not None:
            yield beam.pvalue.TaggedOutput(COUNTS, ("reused", len(records)))
            for record in records:
                yield beam.pvalue.TaggedOutput(REUSED, (record, previous))
        elif self._dedupe and len(records) > 1:
            yield beam.pvalue.TaggedOutput(COUNTS, ("encoded", 1))
            first, *rest = records
            yield DistinctText(first.id, first.text, first.source, first.meta, tuple(rest))
        else:
            yield beam.pvalue.TaggedOutput(COUNTS, ("encoded", len(records)))
            yield from records


def reused_batch(pairs, columns: tuple[tuple[str, int], ...]) -> EmbeddedBatch:
    """(record, previous row) pairs -> one batch of rows, the vectors as the previous run
    stored them."""
    stored = [p for _, p in pairs]
    return EmbeddedBatch(
        records=tuple(r for r, _ in pairs),
        vectors={c: np.stack([p[0][i] for p in stored]).astype(np.float32, copy=False)
                 for i, (c, _) in enumerate(columns)},
        num_tokens=np.array([p[1] for p in stored], np.int32),
        truncated=np.array([p[2] for p in stored], bool))


class EmbedDistinct(beam.PTransform):
    """`embed` (EmbedRecords) behind the grouping by text. Outputs `batches`, `dead` and
    `counts` ((name, n) pairs, see count_names)."""

    def __init__(self, embed: beam.PTransform, dedupe: bool, previous: PreviousRun | None):
        super().__init__()
        self._embed, self._dedupe, self._previous = embed, dedupe, previous

    def expand(self, records):
        keyed = records | "KeyByText" >> beam.Map(lambda r: (text_key(r.text), r))
        previous = self._previous
        if previous is None:
            grouped = (keyed | "GroupTexts" >> beam.GroupByKey()
                       | "AsGroups" >> beam.MapTuple(lambda k, rs: (k, {NEW: rs})))
        else:
            read = ReadPreviousRows(previous.columns, previous.format)
            rows = (records.pipeline
                    | "ListPrevious" >> beam.Create(previous.shards)
                    | "SpreadPrevious" >> beam.Reshuffle()
                    | "ReadPrevious" >> beam.ParDo(read))
            grouped = {NEW: keyed, PREVIOUS: rows} | "MatchTexts" >> beam.CoGroupByKey()
        routed = grouped | "Route" >> beam.ParDo(_Route(self._dedupe)).with_outputs(
            REUSED, COUNTS, main="encode")
        embedded = routed.encode | "Encode" >> self._embed
        batches = embedded["batches"]
        if previous is not None:
            columns = previous.columns
            copied = (routed[REUSED]
                      | "BatchReused" >> beam.BatchElements(min_batch_size=REUSED_BATCH,
                                                            max_batch_size=REUSED_BATCH)
                      | "ReusedRows" >> beam.Map(reused_batch, columns))
            batches = (batches, copied) | "AllBatches" >> beam.Flatten()
        return {"batches": batches, "dead": embedded["dead"], "counts": routed[COUNTS]}
