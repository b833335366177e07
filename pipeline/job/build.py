"""The embedding job's graph: read -> embed -> write every format + dead letters -> manifest.

`build_pipeline` is the same for a real run and a dry run (beam_embed.pipeline.job.dry_run); what it needs
from the model (each pooling's width) is learned before, by `probe_widths`, on the launcher.
"""

from __future__ import annotations

import dataclasses
import platform
import time

import apache_beam as beam

from beam_embed.pipeline.common.output_formats import output_format
from beam_embed.pipeline.common.output_formats.schema import OutputSchema, TokenSchema
from beam_embed.pipeline.common.rows.records import EMPTY, INCOMPLETE
from beam_embed.pipeline.common.run_folder.committed_shards import ShardSets
from beam_embed.pipeline.common.run_folder.manifest.entries import (
    InputsEntry,
    ModelEntry,
    PoolingEntry,
    TokensEntry,
)
from beam_embed.pipeline.common.run_folder.manifest.job import DUPLICATE_EXAMPLE, JobManifest
from beam_embed.pipeline.job.chunking import chunking
from beam_embed.pipeline.job.embed import EmbedRecords
from beam_embed.pipeline.job.incremental import EmbedDistinct, count_names
from beam_embed.pipeline.job.sinks import WriteDeadLetters, WriteManifest, count
from beam_embed.pipeline.job.sources import FindDuplicateIds, ReadCorpus
from beam_embed.process.versions import installed_version

# The manifest's counts, 0 when nothing was counted (split_records too, when records are split).
# duplicate_ids: how many --id_field values appear on more than one record read (0 without
# --id_field: path:line ids are unique).
COUNTS = ("read", "embedded", "skipped_empty", "dead_lettered", "truncated", "tokens",
          "files_incomplete", "duplicate_ids")


def read_dead_counts(dead) -> list[tuple[str, int]]:
    """What a dead letter of the files' reading adds to the counts: one record read, and a
    file that broke off one incomplete file (its dead letter, for the lost rest of the file,
    is counted in dead_lettered by dead_counts)."""
    return [("read", 1)] + ([("files_incomplete", 1)] if dead.kind == INCOMPLETE else [])


def dead_counts(dead) -> list[tuple[str, int]]:
    """What every dead letter (read, prepared or embedded) adds to the counts: an empty text
    is skipped_empty, any other dead_lettered."""
    return [("skipped_empty" if dead.kind == EMPTY else "dead_lettered", 1)]


def count_duplicate_ids(ids):
    """(the duplicate_ids count, the manifest's duplicate_id_example) of `ids`, (shard, ids)
    lists (sources.shard_ids): the run's and the API writer's one counting, of ids as text."""
    found = ids | "FindDuplicateIds" >> FindDuplicateIds()
    return (found | "CountDuplicateIds" >> beam.Map(lambda d: ("duplicate_ids", d[0])),
            found | "DuplicateIdExample" >> beam.FlatMap(
                lambda d: [(DUPLICATE_EXAMPLE, d[1])] if d[0] else []))


def probe_widths(run, on_host: bool = False) -> tuple[tuple[str, int], ...]:
    """Loads the model on the launcher: an unreadable handle or a bad layer fails here, before
    any data is read, and the output schema learns each pooling's width. `on_host`: the
    workers hold the accelerator, so the launcher runs its code path on its own CPU."""
    spec = dataclasses.replace(run.encoder, on_host=True) if on_host else run.encoder
    embedder = spec.build()
    if run.encoder.granularity == "token":
        return (("vectors", int(embedder.width)),)
    vectors = embedder.embed(["probe"]).vectors
    return tuple((column, int(vectors[column].shape[1])) for column in embedder.columns)


def unprobed_widths(run) -> tuple[tuple[str, int], ...]:
    """Each pooling's column with an unknown (0) width: for a model that is not loaded."""
    return tuple((p.column, 0) for p in run.encoder.parsed_poolings())


def manifest_base(run) -> JobManifest:
    """The manifest's fields known before the run (a ResolvedRun's); counts and files are added
    at its end. Each pooling's storage (beam_embed.pipeline.job.calibration) puts int8's ranges in
    its entry."""
    import tensorflow as tf

    from beam_embed.models.encoders import encoder_kind

    spec, s, files = run.encoder, run.settings, run.files
    kind = encoder_kind(spec.kind)
    width = dict(run.widths)
    token_level = spec.granularity == "token"
    poolings = [] if token_level else spec.parsed_poolings()
    ranges = {column: (st.scale or None, st.offset or None)
              for (column, _), st in zip(run.widths, run.stored)}
    return JobManifest(
        granularity=spec.granularity,
        tokens=TokensEntry(
            layer=spec.token_layer or kind.default_token_layer,
            unit=spec.token_unit if spec.token_unit in kind.token_units else kind.token_units[0],
            dtype=spec.token_dtype, width=width["vectors"]) if token_level else None,
        model=ModelEntry(name=spec.name, kind=spec.kind, encoder=spec.encoder,
                         preprocessor=spec.preprocessor, fingerprint=spec.fingerprint(),
                         max_seq_length=spec.max_seq_length, long_text=spec.long_text,
                         precision=spec.precision, truncate_dim=spec.truncate_dim,
                         prompt=spec.prompt or None, prompt_name=spec.prompt_name,
                         hub=spec.hub),
        poolings=tuple(PoolingEntry(p.spec, p.column, width[p.column], spec.normalize,
                                    *ranges.get(p.column, (None, None))) for p in poolings),
        vector_dtype=s.vector_dtype,
        formats=list(s.format),
        text_column=s.include_text,
        metadata_columns=[column for _, column in output_schema(run).metadata()],
        inputs=InputsEntry(patterns=tuple(s.input), files=len(files),
                           bytes=sum(size for _, size in files), split=s.split),
        versions={"beam": beam.__version__, "tensorflow": tf.__version__,
                  "tensorflow_text": installed_version("tensorflow-text"),
                  "python": platform.python_version()},
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        started_unix=time.time(),
        reused_from=run.previous.reused_from if run.previous is not None else None,
        resumed=run.resumed.entry() if run.resumed is not None else None,
    )


def output_schema(run) -> OutputSchema:
    """The schema every format of the run writes its rows under (`run`: a ResolvedRun with its
    widths and each pooling's storage)."""
    s = run.settings
    if run.encoder.granularity == "token":
        return TokenSchema(run.widths, s.metadata_fields, s.include_text,
                           dtype=run.encoder.token_dtype)
    return OutputSchema(run.widths, s.metadata_fields, s.include_text, tuple(run.stored),
                        chunks=s.split == "chunks")


def build_pipeline(p: beam.Pipeline, run, workers: int = 1, spread: bool = True,
                   expected: float = 0.0) -> None:
    """`spread=False` (one in-process worker) drops the reshuffle that spreads each file's
    records over the workers: with one worker it only costs (measured ~10% of a 20,000-sentence
    run). It also writes each output file in the bundle that makes its rows, without Beam's
    sink steps around it (beam_embed.pipeline.common.run_folder.bundle_write): the manifest names
    the shards. `run` (a ResolvedRun): its settings, encoder, files, widths, each pooling's storage
    (beam_embed.pipeline.job.calibration; (): float32) and --reuse's previous run. `expected`:
    the records the input is expected to hold, for the progress lines (0: unknown)."""
    s, files = run.settings, run.files
    corpus = p | "ReadCorpus" >> ReadCorpus(list(files), s.input_format, run.fields(), s.clean,
                                            s.split, spread, ids=bool(s.id_field),
                                            chunks=run.chunks or chunking(s, run.encoder))
    records = corpus["records"]
    if run.resumed is not None and run.resumed.records_kept:  # what committed sets hold
        from beam_embed.pipeline.job.resume import SkipKept

        records = records | "SkipKept" >> beam.ParDo(SkipKept(run.resumed.keys_path))
    embed = EmbedRecords(run.encoder, s.batch_tokens, s.max_batch_size, s.progress_every,
                         share=expected / max(workers, 1), fingerprint=run.encoder.fingerprint())
    incremental = count_names(s.dedupe, run.previous)
    if incremental:  # --dedupe, --reuse: grouped by text around the encoder
        embed = EmbedDistinct(embed, s.dedupe, run.previous)
    embedded = records | "EmbedRecords" >> embed
    schema = output_schema(run)
    sets = shard_sets(run, schema)
    commits = None if sets is None else (
        embedded["batches"] | "WriteShards" >> sets.write(s.output))
    by_sets = () if sets is None else {f.name for f in sets.formats}
    written = [embedded["batches"] | f"Write{fmt.title()}" >> output_format(fmt).write(
        s.output, schema, s.num_shards, in_bundles=not spread)
        for fmt in s.format if fmt not in by_sets]
    if s.store:  # a BigQuery table: written by the job's own step
        from beam_embed.pipeline.job.job_stores import write_steps

        write_steps(embedded["batches"], run, schema)
    dead = (corpus["dead"], embedded["dead"]) | "AllDeadLetters" >> beam.Flatten()
    written.append(dead | "WriteDeadLetters" >> WriteDeadLetters(
        s.output, not spread, s.shard_bytes))
    counts = [count(corpus["read_records"], "Read", lambda r: [("read", 1)]),
              count(corpus["read_dead"], "ReadDead", read_dead_counts),
              count(embedded["batches"], "Embedded", lambda b: [
                  ("embedded", len(b)), ("truncated", int(b.truncated.sum())),
                  ("tokens", int(b.num_tokens.sum()))]),
              count(dead, "Dead", dead_counts)]
    names, extras = COUNTS + incremental, None
    if incremental:
        counts.append(embedded["counts"])
    if s.split != "none":
        counts.append(count(corpus["records"], "Split", lambda r: [("split_records", 1)]))
        names += ("split_records",)
    if s.id_field:  # without it, ids are path:line: unique
        duplicates, extras = count_duplicate_ids(corpus["ids"])
        counts.append(duplicates)
    if run.resumed is not None and run.resumed.records_kept:  # the kept sets' rows
        counts.append(p | "CountKept" >> beam.Create(sorted(run.resumed.counts.items())))
    p | "WriteManifest" >> WriteManifest(
        s.output, manifest_base(run), counts, written, names, extras, commits, sets)


def shard_sets(run, schema):
    """How the run writes its shards in committed sets (run_folder/committed_shards.py): the
    formats that can be, but shards when --num_shards fixes their count (Beam's sink writes them,
    at the end); a dataset format (Lance) always; None when no format is written so."""
    s = run.settings
    formats = tuple(f for f in (output_format(name) for name in s.format)
                    if f.open_part is not None or (f.open_batches is not None
                                                   and not s.num_shards))
    if not formats:
        return None
    kept = run.resumed.commits if run.resumed is not None else ()
    finish = (("index", True),) if s.lance_index else ()
    return ShardSets(formats, schema, s.shard_bytes, kept, finish)
