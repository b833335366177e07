"""WriteEmbeddings: EmbedTexts' output written as `beam-embed run` writes a run, so `pca`,
`search`, `eval`, `--reuse` and `read_embeddings` read it: the format modules' shards with the
run's schema, the errors files, the manifest (the model and settings of the EmbedTexts upstream),
the same claim, staging folder and publish swap.

The run holds its output folder's claim from before its first write to its swap. Inside a user's
pipeline the same span is two steps: the first (on one worker) takes the claim, checks the
folder and clears what killed runs left, and every write waits for it (a side input); the last
publishes the staging folder and releases the claim (pipeline.common.run_folder.staged_run, as `run`
does in one block). A pipeline that fails in between leaves its claim and staging folder as a
killed run does: `overwrite=True` takes them over, including a claim this very process took for
a write that did not finish. Two writes of one folder in one pipeline are refused when it is
built: each would claim the folder while the other writes it.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
import weakref
from collections.abc import Sequence

import apache_beam as beam

from beam_embed.api.elements import Embedding
from beam_embed.api.keywords import explicit_keywords, renamed_keyword, run_settings
from beam_embed.api.quiet import LOGGER
from beam_embed.pipeline.common.rows.records import EMPTY, DeadLetter, EmbeddedBatch, Record

__all__ = ["WriteEmbeddings"]

ACCEPTED = ("format", "vector_dtype", "num_shards", "include_text", "metadata_fields",
            "overwrite", "store", "store_table", "store_sync")
BATCH = 512  # rows converted and written together, as an inference batch's most
COMMAND = "WriteEmbeddings"
# Writes of this process that claimed their folder and have not published: folder -> its
# StagedRun. One whose pipeline failed holds its claim as a killed run would, but its process
# lives on: the next write to that folder with overwrite=True releases it and removes its
# staging folder. A write of the same pipeline is never one of them: two writers of one folder
# in one pipeline are refused when it is built.
_UNFINISHED: dict = {}
# Per pipeline being built, the folders its WriteEmbeddings write: folder -> the writer's label.
_WRITERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _folder_key(output: str) -> str:
    """One spelling of a folder: "out", "./out" and "out/" are the same one."""
    from beam_embed.models.hub_loader import is_remote

    return output.rstrip("/") if is_remote(output) else os.path.abspath(output)


def _check_one_writer(pipeline, output: str, label: str) -> None:
    """A ValueError when another WriteEmbeddings of `pipeline` writes `output`: both would
    claim it while the pipeline runs, and a folder holds one run."""
    other = _WRITERS.get(pipeline, {}).get(_folder_key(output))
    if other is not None:
        raise ValueError(f"WriteEmbeddings {label!r} and {other!r} both write into {output} in "
                         "one pipeline; a folder holds one run, and one of them would fail or "
                         "replace the other: give each its own output folder")


class _Claim(beam.DoFn):
    """Takes the folder's claim, checks the folder under it, clears what killed runs left,
    makes the write's staging folder; yields the StagedRun the last step publishes."""

    def __init__(self, output: str, run_id: str, overwrite: bool):
        self._output, self._run_id, self._overwrite = output, run_id, overwrite

    def process(self, _):
        from beam_embed.pipeline.common.run_folder.manifest.folder import make_folder
        from beam_embed.pipeline.common.run_folder.manifest.job import JOB
        from beam_embed.pipeline.common.run_folder.staged_run import StagedRun
        from beam_embed.pipeline.common.run_folder.staging import discard, staging_folder

        try:
            make_folder(self._output)
            taken_over = self._release_unfinished()
            run = StagedRun.open(self._output, JOB, self._overwrite, [COMMAND, self._output],
                                 run_id=self._run_id, resumable=False)
        except BaseException:  # refused: the write steps may have made this write's staging
            discard(staging_folder(self._output, self._run_id))  # folder (its id is its own)
            raise
        try:
            run.stage(taken_over, say=LOGGER.warning)
        except BaseException:
            run.abandon()
            run.release()
            raise
        _UNFINISHED[_folder_key(self._output)] = run
        yield run

    def _release_unfinished(self) -> str | None:
        """Releases the claim of an earlier write of this process that did not finish, with
        overwrite; returns its run id (its staging folder is a leftover to remove)."""
        from beam_embed.pipeline.common.run_folder.claim import OutputBusy

        stale = _UNFINISHED.get(_folder_key(self._output))
        if stale is None:
            return None
        if not self._overwrite:
            raise OutputBusy(f"{self._output} is claimed by an earlier WriteEmbeddings of this "
                             "process that did not finish (its pipeline failed); pass "
                             "overwrite=True to take the claim over")
        LOGGER.warning("took over the claim on %s of an earlier write of this process that did "
                       "not finish", self._output)
        stale.release()
        del _UNFINISHED[_folder_key(self._output)]
        return stale.holder.run_id


class _Publish(beam.DoFn):
    """Swaps the complete write in and releases its claim; yields the folder."""

    def __init__(self, output: str):
        self._output = output

    def process(self, _, run):
        key = _folder_key(self._output)
        if getattr(_UNFINISHED.get(key), "holder", None) == run.holder:
            del _UNFINISHED[key]
        try:
            replaced = run.publish()
        finally:
            run.release()
        if replaced:
            LOGGER.info("replaced the previous run in %s (%d files)", self._output,
                        len(replaced))
        yield self._output


def _batch(embeddings: list[Embedding], metadata_fields: tuple[str, ...]) -> EmbeddedBatch:
    """Embeddings as the job's inference batch, the sinks' input; ids and metadata as text, as
    the run writes them (a list or an object as its JSON)."""
    import numpy as np

    from beam_embed.pipeline.job.formats import field_text, metadata_text

    records = []
    for e in embeddings:
        if e.id is None:
            raise ValueError(f"WriteEmbeddings writes an id for every row, and the Embedding of "
                             f"{e.text[:80]!r} has none: give EmbedTexts (id, text) pairs or "
                             "dicts with an id")
        meta = tuple((k, metadata_text(e.fields.get(k))) for k in metadata_fields)
        records.append(Record(field_text(e.id), e.text, "", meta))
    columns = embeddings[0].vectors
    return EmbeddedBatch(
        records=tuple(records),
        vectors={c: np.stack([e.vectors[c] for e in embeddings]) for c in columns},
        num_tokens=np.array([e.num_tokens for e in embeddings], np.int32),
        truncated=np.array([e.truncated for e in embeddings], bool))


def _errors_line(dead: DeadLetter) -> DeadLetter:
    """A dead letter as the run's errors files hold it: its id as text."""
    from beam_embed.pipeline.job.formats import field_text

    return dead if dead.id is None else dataclasses.replace(dead, id=field_text(dead.id))


def _batch_ids(batch: EmbeddedBatch):
    from beam_embed.pipeline.job.sources import shard_ids

    return shard_ids([r.id for r in batch.records])


def _dead_ids(dead: DeadLetter):
    from beam_embed.pipeline.job.sources import shard_ids

    return shard_ids([] if dead.id is None else [dead.id])


def upstream_embed_texts(*pcolls):
    """The EmbedTexts that made `pcolls` (searched through the transforms between), whose
    model and settings the manifest records; a ValueError when there is none, or several that
    differ."""
    from beam_embed.api.embed_texts import EmbedTexts

    found, seen, queue = {}, set(), list(pcolls)
    while queue:
        applied = getattr(queue.pop(), "producer", None)
        if applied is None or id(applied) in seen:
            continue
        seen.add(id(applied))
        node = applied
        while node is not None and not isinstance(node.transform, EmbedTexts):
            node = node.parent
        if node is not None:
            found[(node.transform.spec, node.transform.settings)] = node.transform
        else:
            queue += [p for p in applied.inputs if isinstance(p, beam.PCollection)]
    if len(found) != 1:
        what = "no EmbedTexts" if not found else f"{len(found)} EmbedTexts of other settings"
        raise ValueError(f"WriteEmbeddings writes what one EmbedTexts made (its model and "
                         f"settings go into the manifest), and found {what} upstream")
    return next(iter(found.values()))


class WriteEmbeddings(beam.PTransform):
    """Writes EmbedTexts' Embeddings (and, given `(embeddings, dead_letters)` as
    `.with_exception_handling()` returns them, its dead letters) into the folder `output`
    (local or gs://) as `beam-embed run` writes a run: Parquet and TFRecord shards, errors
    files and manifest.json, so `beam-embed pca`, `search`, `eval`, `run --reuse` and
    `read_embeddings` read it.

    Keywords, as the run's flags: `format` (one or a list, as --format; ["parquet",
    "tfrecord"]; the earlier keyword `formats` still works, with a DeprecationWarning),
    `vector_dtype` ("float32", "float16", "int8" or "binary"), `num_shards` (0: the runner
    decides), `include_text` (True), `metadata_fields` (the Embeddings' fields written as
    string columns; none by default; one named like a column the run writes, `source` say, as
    `meta_source`), `overwrite` (replace a previous run in `output`; also take over the claim
    of a write that did not finish), `store` (one store URI or a list, as --store; `stores`
    works too, with a DeprecationWarning: once published, the run's rows are upserted into
    each, keyed by id, as `beam-embed run --store` upserts them; each store is reached and its
    table made or checked when the pipeline is built, before any data is read; a BigQuery
    table is written by a step of the pipeline), `store_table` ("embeddings"), `store_sync`
    (also remove the ids a store holds that the run does not). int8 calibrates each
    dimension's range before writing, on `calibration_texts` (up to 1,000 texts, embedded
    here), which it then needs. Every Embedding needs an id (EmbedTexts gives a plain text
    none).

    The output folder is checked here, before the pipeline runs; the run is written to a
    staging folder inside it under the folder's claim and swapped in when complete (a failed
    pipeline leaves the previous run untouched). Returns a PCollection holding `output` once
    published."""

    @explicit_keywords
    def __init__(self, output: str, format: str | Sequence[str] | None = None, *,  # noqa: A002
                 vector_dtype: str | None = None,
                 calibration_texts: Sequence[str] | None = None, num_shards: int | None = None,
                 include_text: bool | None = None,
                 metadata_fields: Sequence[str] | None = None, overwrite: bool | None = None,
                 store: str | Sequence[str] | None = None, store_table: str | None = None,
                 store_sync: bool | None = None,
                 formats: Sequence[str] | None = None, stores: Sequence[str] | None = None):
        from beam_embed.pipeline.common.run_folder.manifest.job import JOB
        from beam_embed.pipeline.common.run_folder.staging import check_output

        super().__init__()
        if output.startswith("gs://"):
            from beam_embed.process.gcs_auth import install_now

            install_now()  # credentials found in one look, as the commands find them
        given = {k: v for k, v in locals().items() if k in ACCEPTED}
        given["format"] = renamed_keyword(COMMAND, "formats", "format", formats, format)
        if metadata_fields is not None:
            given["metadata_fields"] = tuple(metadata_fields)
        store = renamed_keyword(COMMAND, "stores", "store", stores, store)
        if store is not None:  # checked as --store: each URI parsed here
            given["store"] = (store,) if isinstance(store, str) else tuple(store)
        self.settings = run_settings(COMMAND, given, ACCEPTED, output=output)
        if self.settings.metadata_fields is None:  # the run's None means "from the input"
            self.settings = dataclasses.replace(self.settings, metadata_fields=())
        self._calibration = calibration_texts
        if self.settings.vector_dtype == "int8" and not calibration_texts:
            raise ValueError("vector_dtype='int8' stores each dimension in a range calibrated "
                             "before writing: pass calibration_texts=[...] (a sample of the "
                             "texts, up to 1,000 of them)")
        check_output(self.settings.output, JOB, self.settings.overwrite)

    def _run(self, embed):
        """The ResolvedRun the manifest is made from: EmbedTexts' settings and model with this
        transform's output settings, each pooling's width and storage (the model is loaded
        here, as the run's launcher loads it)."""
        from beam_embed.pipeline.job.build import probe_widths
        from beam_embed.pipeline.job.calibration import vector_storage
        from beam_embed.pipeline.job.cleaning import clean_text
        from beam_embed.pipeline.job.resolved import ResolvedRun

        s = self.settings
        settings = dataclasses.replace(
            embed.settings, output=s.output, format=s.format, vector_dtype=s.vector_dtype,
            num_shards=s.num_shards, include_text=s.include_text,
            metadata_fields=s.metadata_fields, overwrite=s.overwrite, store=s.store,
            store_table=s.store_table, store_sync=s.store_sync)
        run = ResolvedRun(settings, embed.spec)
        run = dataclasses.replace(run, widths=probe_widths(run))
        texts = [clean_text(t) if settings.clean else t for t in self._calibration or ()]
        return dataclasses.replace(run, stored=vector_storage(run, texts=texts))

    def expand(self, pvalue):
        from beam_embed.pipeline.common.output_formats import output_format
        from beam_embed.pipeline.common.run_folder.staging import staging_folder
        from beam_embed.pipeline.job.build import (
            COUNTS,
            count_duplicate_ids,
            manifest_base,
            output_schema,
            shard_sets,
        )
        from beam_embed.pipeline.job.sinks import WriteDeadLetters, WriteManifest, count

        embeddings, dead = pvalue if isinstance(pvalue, tuple) else (pvalue, None)
        p = embeddings.pipeline
        _check_one_writer(p, self.settings.output, self.label)  # before the model loads
        run = self._run(upstream_embed_texts(embeddings, *([dead] if dead else [])))
        s, output = run.settings, run.output
        schema = output_schema(run)
        schema.metadata("metadata_fields")  # fields that would share a column: refused here
        run_id = uuid.uuid4().hex[:12]
        staging = staging_folder(output, run_id)
        claimed = beam.pvalue.AsSingleton(
            p | "Start" >> beam.Create([None]) | "Claim" >> beam.ParDo(
                _Claim(output, run_id, s.overwrite)))
        if dead is None:
            dead = p | "NoDeadLetters" >> beam.Create([]).with_output_types(DeadLetter)
        batches = (embeddings
                   | "AfterClaim" >> beam.Map(lambda e, _: e, claimed)
                   | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=BATCH)
                   | "ToBatches" >> beam.Map(_batch, s.metadata_fields))
        dead = (dead | "DeadAfterClaim" >> beam.Map(lambda d, _: _errors_line(d), claimed))
        sets = shard_sets(run, schema)  # shards of at most 128 MiB, as the run's
        commits = None if sets is None else batches | "WriteShards" >> sets.write(staging)
        by_sets = () if sets is None else {f.name for f in sets.formats}
        written = [batches | f"Write{fmt.title()}" >> output_format(fmt).write(
            staging, schema, s.num_shards) for fmt in s.format if fmt not in by_sets]
        written.append(dead | "WriteDeadLetters" >> WriteDeadLetters(staging))
        # every row counted read has its id, as the run counts its records' (text, 1 is "1")
        ids = ((batches | "BatchIds" >> beam.FlatMap(_batch_ids),
                dead | "DeadIds" >> beam.FlatMap(_dead_ids)) | "AllIds" >> beam.Flatten())
        duplicates, example = count_duplicate_ids(ids)
        counts = [count(batches, "Embedded", lambda b: [
                      ("read", len(b)), ("embedded", len(b)),
                      ("truncated", int(b.truncated.sum())), ("tokens", int(b.num_tokens.sum()))]),
                  count(dead, "Dead", lambda d: [
                      ("read", 1), ("skipped_empty" if d.kind == EMPTY else "dead_lettered", 1)]),
                  duplicates]
        manifest = p | "WriteManifest" >> WriteManifest(
            staging, manifest_base(run), counts, written, COUNTS, example, commits, sets)
        published = manifest | "Publish" >> beam.ParDo(_Publish(output), claimed)
        _WRITERS.setdefault(p, {})[_folder_key(output)] = self.label
        if s.store:
            from beam_embed.api.write_stores import with_stores

            return with_stores(published, batches, run, schema, p.options)
        return published
