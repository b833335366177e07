"""--dedupe and --reuse: records grouped by their text before the encoder, so each distinct text
is encoded once (--dedupe) and a text a previous run embedded is copied from it (--reuse).

records -> (text key, record) -> per text, one DistinctText (CombinePerKey: the first record
whole, of the others only their id, source and metadata), matched with the previous run's rows
by CoGroupByKey under --reuse -> per text: the previous row copied to each of its records, or
the DistinctText for the encoder (--dedupe), or each record for the encoder -> EmbedRecords ->
each DistinctText's rows, REUSED_BATCH at a time (CopyRows) -> the encoded batches and batches of
copied rows, to the same sinks.

A text held by many records costs what their rows need, never their text again: a combine,
which Beam runs partly before the shuffle, gathers each text's records instead of a GroupByKey
listing them whole, and the rows of a frequent text leave in batches of REUSED_BATCH, not as one
batch as long as its records (400,000 copies of one line were one batch of 400,000 rows). One
shuffle on 16-byte keys and no state outside Beam's, so it is the same on the DirectRunner's
workers and on Dataflow. Without either flag the job's graph does not have it.
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam
import numpy as np

from beam_embed.pipeline.common.rows.records import DistinctText, EmbeddedBatch, Record
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


class _GatherText(beam.CombineFn):
    """One text's records -> a DistinctText: the first record whole, the others' (id, source,
    meta). The accumulator: [the first Record or None, [(id, source, meta), ...]]."""

    def create_accumulator(self):
        return [None, []]

    def add_input(self, accumulator, record):
        if accumulator[0] is None:
            accumulator[0] = record
        else:
            accumulator[1].append((record.id, record.source, record.meta))
        return accumulator

    def merge_accumulators(self, accumulators):
        first, copies = None, []
        for record, more in accumulators:
            if record is not None:
                if first is None:
                    first = record
                else:
                    copies.append((record.id, record.source, record.meta))
            copies += more
        return [first, copies]

    def extract_output(self, accumulator):
        first, copies = accumulator
        return DistinctText(first.id, first.text, first.source, first.meta, tuple(copies))


class _Route(beam.DoFn):
    """One text's DistinctText (and the previous run's row for it, if any) -> copied rows
    (`reused`), or what the encoder gets; its counts (`counts`)."""

    def __init__(self, dedupe: bool):
        self._dedupe = dedupe

    def process(self, item):
        _, groups = item
        text = next(iter(groups[NEW]), None)
        if text is None:  # a text only the previous run had
            return
        previous = next(iter(groups.get(PREVIOUS, ())), None)
        n = text.row_count()
        yield beam.pvalue.TaggedOutput(COUNTS, ("distinct_texts", 1))
        if previous is not None:
            yield beam.pvalue.TaggedOutput(COUNTS, ("reused", n))
            for record in text.rows():
                yield beam.pvalue.TaggedOutput(REUSED, (record, previous))
        elif self._dedupe and n > 1:
            yield beam.pvalue.TaggedOutput(COUNTS, ("encoded", 1))
            yield text
        else:
            yield beam.pvalue.TaggedOutput(COUNTS, ("encoded", n))
            yield from text.rows()


def copied_rows(batch: EmbeddedBatch, most: int = REUSED_BATCH):
    """An encoded batch -> its rows, each DistinctText's records given its row: the batch with
    the first record of each, then its other records' rows, `most` a batch."""
    records = batch.records
    if not any(isinstance(r, DistinctText) for r in records):
        yield batch
        return
    yield dataclasses.replace(batch, records=tuple(
        r.first() if isinstance(r, DistinctText) else r for r in records))
    for i, text in enumerate(records):
        copies = text.copies if isinstance(text, DistinctText) else ()
        for start in range(0, len(copies), most):
            chunk = copies[start:start + most]
            n = len(chunk)
            yield EmbeddedBatch(
                records=tuple(Record(rid, text.text, source, meta) for rid, source, meta in chunk),
                vectors={c: np.repeat(v[i:i + 1], n, axis=0) for c, v in batch.vectors.items()},
                num_tokens=np.repeat(batch.num_tokens[i:i + 1], n),
                truncated=np.repeat(batch.truncated[i:i + 1], n))


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
        keyed = (records | "KeyByText" >> beam.Map(lambda r: (text_key(r.text), r))
                 | "GatherTexts" >> beam.CombinePerKey(_GatherText()))
        previous = self._previous
        if previous is None:
            grouped = keyed | "AsGroups" >> beam.MapTuple(lambda k, text: (k, {NEW: [text]}))
        else:
            read = ReadPreviousRows(previous.columns, previous.format, previous.stored)
            rows = (records.pipeline
                    | "ListPrevious" >> beam.Create(previous.shards)
                    | "SpreadPrevious" >> beam.Reshuffle()
                    | "ReadPrevious" >> beam.ParDo(read))
            grouped = {NEW: keyed, PREVIOUS: rows} | "MatchTexts" >> beam.CoGroupByKey()
        routed = grouped | "Route" >> beam.ParDo(_Route(self._dedupe)).with_outputs(
            REUSED, COUNTS, main="encode")
        embedded = routed.encode | "Encode" >> self._embed
        batches = embedded["batches"]
        if self._dedupe:
            batches = batches | "CopyRows" >> beam.FlatMap(copied_rows)
        if previous is not None:
            columns = previous.columns
            copied = (routed[REUSED]
                      | "BatchReused" >> beam.BatchElements(min_batch_size=REUSED_BATCH,
                                                            max_batch_size=REUSED_BATCH)
                      | "ReusedRows" >> beam.Map(reused_batch, columns))
            batches = (batches, copied) | "AllBatches" >> beam.Flatten()
        return {"batches": batches, "dead": embedded["dead"], "counts": routed[COUNTS]}
