"""The embedding job's graph: read -> embed -> write every format + dead letters -> manifest.

`build_pipeline` is the same for a real run and a dry run (beam_embed.pipeline.job.dry_run); what it needs
from the model (each pooling's width) is learned before, by `probe_widths`, on the launcher.
"""

from __future__ import annotations

import dataclasses
import platform
import time

import apache_beam as beam

from beam_embed.pipeline.common.manifest import DUPLICATE_EXAMPLE, JobManifest
from beam_embed.pipeline.common.output_formats import output_format
from beam_embed.pipeline.common.records import EMPTY, INCOMPLETE
from beam_embed.pipeline.common.versions import installed_version
from beam_embed.pipeline.job.embed import EmbedRecords
from beam_embed.pipeline.job.incremental import EmbedDistinct, count_names
from beam_embed.pipeline.job.sinks import OutputSchema, WriteDeadLetters, WriteManifest, count
from beam_embed.pipeline.job.sources import FindDuplicateIds, ReadCorpus
from beam_embed.pipeline.job.token_sinks import TokenSchema

# The manifest's counts, 0 when nothing was counted (split_records too, when records are split).
# duplicate_ids: how many --id_field values appear on more than one record read (0 without
# --id_field: path:line ids are unique).
COUNTS = ("read", "embedded", "skipped_empty", "dead_lettered", "truncated", "tokens",
          "files_incomplete", "duplicate_ids")


def probe_widths(cfg, on_host: bool = False) -> tuple[tuple[str, int], ...]:
    """Loads the model on the launcher: an unreadable handle or a bad layer fails here, before
    any data is read, and the output schema learns each pooling's width. `on_host`: the
    workers hold the accelerator, so the launcher runs its code path on its own CPU."""
    spec = dataclasses.replace(cfg.encoder, on_host=True) if on_host else cfg.encoder
    embedder = spec.build()
    if cfg.encoder.granularity == "token":
        return (("vectors", int(embedder.width)),)
    vectors = embedder.embed(["probe"]).vectors
    return tuple((column, int(vectors[column].shape[1])) for column in embedder.columns)


def unprobed_widths(cfg) -> tuple[tuple[str, int], ...]:
    """Each pooling's column with an unknown (0) width: for a model that is not loaded."""
    return tuple((p.column, 0) for p in cfg.encoder.parsed_poolings())


def manifest_base(cfg, widths, files, stored=()) -> JobManifest:
    """The manifest's fields known before the run; counts and files are added at its end.
    `stored`: each pooling's storage (beam_embed.pipeline.job.calibration), int8's ranges in its entry."""
    import tensorflow as tf

    from beam_embed.models.encoders import encoder_kind

    spec = cfg.encoder
    kind = encoder_kind(spec.kind)
    width = dict(widths)
    token_level = spec.granularity == "token"
    poolings = [] if token_level else spec.parsed_poolings()
    ranges = {column: s.manifest() for (column, _), s in zip(widths, stored)}
    return JobManifest(
        granularity=spec.granularity,
        tokens={"layer": spec.token_layer or kind.default_token_layer,
                "unit": spec.token_unit if spec.token_unit in kind.token_units
                else kind.token_units[0],
                "dtype": spec.token_dtype, "width": width["vectors"]} if token_level else None,
        model={"name": spec.name, "kind": spec.kind, "encoder": spec.encoder,
               "preprocessor": spec.preprocessor,
               "fingerprint": spec.fingerprint(),
               "max_seq_length": spec.max_seq_length,
               "long_text": spec.long_text, "precision": spec.precision},
        poolings=[{"name": p.spec, "column": p.column, "width": width[p.column],
                   "normalize": spec.normalize, **ranges.get(p.column, {})} for p in poolings],
        vector_dtype=cfg.vector_dtype,
        formats=list(cfg.formats),
        text_column=cfg.include_text,
        metadata_columns=list(cfg.metadata_fields),
        inputs={"patterns": list(cfg.inputs), "files": len(files),
                "bytes": sum(size for _, size in files), "split": cfg.split},
        versions={"beam": beam.__version__, "tensorflow": tf.__version__,
                  "tensorflow_text": installed_version("tensorflow-text"),
                  "python": platform.python_version()},
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        started_unix=time.time(),
        reused_from=cfg.previous.reused_from if cfg.previous is not None else None,
    )


def build_pipeline(p: beam.Pipeline, cfg, files, widths, workers: int = 1,
                   spread: bool = True, stored=(), expected: float = 0.0) -> None:
    """`spread=False` (one in-process worker) drops the reshuffle that spreads each file's
    records over the workers: with one worker it only costs (measured ~10% of a 20,000-sentence
    run). It also writes each output file in the bundle that makes its rows, without Beam's
    sink steps around it (beam_embed.pipeline.common.bundle_write): the manifest names the shards.
    `stored`: how each pooling's vectors are stored (beam_embed.pipeline.job.calibration); (): float32.
    `expected`: the records the input is expected to hold, for the progress lines (0: unknown)."""
    corpus = p | "ReadCorpus" >> ReadCorpus(files, cfg.input_format, cfg.fields(), cfg.clean,
                                            cfg.split, spread, ids=bool(cfg.id_field))
    embed = EmbedRecords(cfg.encoder, cfg.batch_tokens, cfg.max_batch_size, cfg.progress_every,
                         share=expected / max(workers, 1))
    incremental = count_names(cfg.dedupe, cfg.previous)
    if incremental:  # --dedupe, --reuse: grouped by text around the encoder
        embed = EmbedDistinct(embed, cfg.dedupe, cfg.previous)
    embedded = corpus["records"] | "EmbedRecords" >> embed
    if cfg.encoder.granularity == "token":
        schema = TokenSchema(widths, cfg.metadata_fields, cfg.include_text,
                             dtype=cfg.encoder.token_dtype)
    else:
        schema = OutputSchema(widths, cfg.metadata_fields, cfg.include_text, tuple(stored))
    written = [embedded["batches"] | f"Write{fmt.title()}" >> output_format(fmt).writer_class()(
        cfg.output, schema, cfg.num_shards, in_bundles=not spread) for fmt in cfg.formats]
    dead = (corpus["dead"], embedded["dead"]) | "AllDeadLetters" >> beam.Flatten()
    written.append(dead | "WriteDeadLetters" >> WriteDeadLetters(cfg.output, not spread))
    # a file that broke off is one dead letter (counted in dead_lettered) for its lost rest
    counts = [count(corpus["read_records"], "Read", lambda r: [("read", 1)]),
              count(corpus["read_dead"], "ReadDead", lambda d: [("read", 1)] + (
                  [("files_incomplete", 1)] if d.kind == INCOMPLETE else [])),
              count(embedded["batches"], "Embedded", lambda b: [
                  ("embedded", len(b)), ("truncated", int(b.truncated.sum())),
                  ("tokens", int(b.num_tokens.sum()))]),
              count(dead, "Dead", lambda d: [
                  ("skipped_empty" if d.kind == EMPTY else "dead_lettered", 1)])]
    names, extras = COUNTS + incremental, None
    if incremental:
        counts.append(embedded["counts"])
    if cfg.split != "none":
        counts.append(count(corpus["records"], "Split", lambda r: [("split_records", 1)]))
        names += ("split_records",)
    if cfg.id_field:  # without it, ids are path:line: unique
        found = corpus["ids"] | "FindDuplicateIds" >> FindDuplicateIds()
        counts.append(found | "CountDuplicateIds" >> beam.Map(lambda d: ("duplicate_ids", d[0])))
        extras = found | "DuplicateIdExample" >> beam.FlatMap(
            lambda d: [(DUPLICATE_EXAMPLE, d[1])] if d[0] else [])
    p | "WriteManifest" >> WriteManifest(
        cfg.output, manifest_base(cfg, widths, files, stored), counts, written, names, extras)
