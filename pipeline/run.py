"""The embedding job: `beam-embed run` / `python -m pipeline.run`.

main(argv) -> parse + validate (no data read) -> build_pipeline(p, cfg) -> run -> summary.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions

from pipeline import config as job_config
from pipeline.embed import EmbedRecords
from pipeline.formats import Fields
from pipeline.options import EmbedOptions, parse
from pipeline.runners import runner_for
from pipeline.sample_corpus import write_sample
from pipeline.sinks import (OutputSchema, WriteDeadLetters, WriteManifest, WriteParquet,
                            WriteTFRecord, count)
from pipeline.sources import ReadCorpus, expand_inputs, log
from pipeline.token_sinks import TokenSchema

SAMPLE_CORPUS = os.path.join("output", "sample", "corpus.jsonl")
OUTPUT_GLOBS = ("manifest.json", "embeddings-*", "errors-*")
WRITERS = {"parquet": WriteParquet, "tfrecord": WriteTFRecord}


def fingerprint(*handles: str | None) -> str:
    """sha256 over each handle's saved_model.pb (or the handle itself when remote/unreadable)."""
    import tensorflow as tf

    digest = hashlib.sha256()
    for handle in filter(None, handles):
        pb = f"{handle.rstrip('/')}/saved_model.pb"
        if "://" not in handle and tf.io.gfile.exists(pb):
            with tf.io.gfile.GFile(pb, "rb") as f:
                digest.update(f.read())
        else:
            digest.update(handle.encode())
    return digest.hexdigest()[:16]


def _existing_outputs(output: str) -> list[str]:
    patterns = [FileSystems.join(output, g) for g in OUTPUT_GLOBS]
    return [m.path for r in FileSystems.match(patterns) for m in r.metadata_list]


def prepare_output(cfg) -> None:
    existing = _existing_outputs(cfg.output)
    if existing and not cfg.overwrite:
        raise ValueError(f"output {cfg.output!r} already holds a run ({len(existing)} files, e.g. "
                         f"{existing[0]}); pass --overwrite to replace it or choose another --output")
    if existing:
        FileSystems.delete(existing)
    if not FileSystems.exists(cfg.output):
        FileSystems.mkdirs(cfg.output)


def probe_widths(cfg) -> tuple[tuple[str, int], ...]:
    """Loads the model on the launcher: an unreadable handle or a bad layer fails here, before
    any data is read, and the output schema learns each pooling's width."""
    embedder = cfg.encoder.build()
    if cfg.encoder.granularity == "token":
        return (("vectors", int(embedder.width)),)
    vectors = embedder.embed(["probe"]).vectors
    return tuple((column, int(vectors[column].shape[1])) for column in embedder.columns)


def manifest_base(cfg, widths, files) -> dict:
    import tensorflow as tf
    import tensorflow_text

    from models.pooling import parse_poolings
    from models.encoders import encoder_class

    poolings = parse_poolings(list(cfg.encoder.poolings),
                              *encoder_class(cfg.model.kind).pooling_registry())
    width = dict(widths)
    if cfg.encoder.granularity == "token":
        poolings = []
    return {
        "granularity": cfg.encoder.granularity,
        **({"tokens": {"layer": cfg.encoder.token_layer or ("elmo" if cfg.model.kind == "elmo"
                                                           else "-1"),
                       "unit": "word" if cfg.model.kind == "elmo" else cfg.encoder.token_unit,
                       "dtype": cfg.encoder.token_dtype, "width": width["vectors"]}}
           if cfg.encoder.granularity == "token" else {}),
        "format_version": 1,
        "model": {"name": cfg.model.name, "kind": cfg.model.kind, "encoder": cfg.model.encoder,
                  "preprocessor": cfg.model.preprocessor,
                  "fingerprint": fingerprint(cfg.model.encoder, cfg.model.preprocessor),
                  "max_seq_length": cfg.encoder.max_seq_length,
                  "long_text": cfg.encoder.long_text},
        "poolings": [{"name": p.spec, "column": p.column, "width": width[p.column],
                      "normalize": cfg.encoder.normalize} for p in poolings],
        "formats": list(cfg.formats),
        "text_column": cfg.include_text,
        "metadata_columns": list(cfg.metadata_fields),
        "inputs": {"patterns": list(cfg.inputs), "files": len(files),
                   "bytes": sum(size for _, size in files), "split": cfg.split},
        "versions": {"beam": beam.__version__, "tensorflow": tf.__version__,
                     "tensorflow_text": getattr(tensorflow_text, "__version__", "unknown"),
                     "python": platform.python_version()},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "started_unix": time.time(),
    }


def build_pipeline(p: beam.Pipeline, cfg, files, widths, workers: int = 1,
                   spread: bool = True) -> None:
    """`spread=False` (one in-process worker) drops the reshuffle that spreads each file's
    records over the workers: with one worker it only costs (measured ~10% of a 20,000-sentence
    run)."""
    fields = Fields(cfg.text_field, cfg.id_field, cfg.metadata_fields, cfg.max_text_bytes)
    corpus = p | "ReadCorpus" >> ReadCorpus(files, cfg.input_format, fields, cfg.clean, cfg.split,
                                            spread)
    embedded = corpus["records"] | "EmbedRecords" >> EmbedRecords(
        cfg.encoder, cfg.batch_tokens, cfg.max_batch_size, cfg.progress_every,
        share_bytes=sum(size for _, size in files) / max(workers, 1))
    if cfg.encoder.granularity == "token":
        schema = TokenSchema(widths, cfg.metadata_fields, cfg.include_text, cfg.encoder.token_dtype)
    else:
        schema = OutputSchema(widths, cfg.metadata_fields, cfg.include_text)
    written = [embedded["batches"] | f"Write{fmt.title()}" >> WRITERS[fmt](
        cfg.output, schema, cfg.num_shards) for fmt in cfg.formats]
    dead = (corpus["dead"], embedded["dead"]) | "AllDeadLetters" >> beam.Flatten()
    written.append(dead | "WriteDeadLetters" >> WriteDeadLetters(cfg.output))
    empty = dead | "OnlyEmpty" >> beam.Filter(lambda d: d.kind == "empty")
    errors = dead | "OnlyErrors" >> beam.Filter(lambda d: d.kind != "empty")
    # counted apart (the manifest adds counts of one name): a Flatten here made the FnApiRunner
    # materialize every record read for a later stage (+160 MB at 200,000 sentences)
    counts = [("read", count(corpus["read_records"], "Read")),
              ("read", count(corpus["read_dead"], "ReadDead")),
              ("embedded", count(embedded["batches"], "Embedded")),
              ("skipped_empty", count(empty, "Empty")), ("dead_lettered", count(errors, "Dead")),
              ("truncated", count(embedded["batches"], "Truncated", lambda b: int(b.truncated.sum()))),
              ("tokens", count(embedded["batches"], "Tokens", lambda b: int(b.num_tokens.sum())))]
    if cfg.split != "none":
        counts.append(("split_records", count(corpus["records"], "Split")))
    p | "WriteManifest" >> WriteManifest(
        cfg.output, manifest_base(cfg, widths, files), counts, written)


def configure(argv: list[str]):
    """Parses and validates everything that needs no data: flags, model, inputs, output."""
    options = parse(argv)
    opts = options.view_as(EmbedOptions)
    default_inputs = ()
    if not opts.input:
        default_inputs = (write_sample(SAMPLE_CORPUS),)
        opts.id_field = opts.id_field or "id"
        opts.metadata_fields = opts.metadata_fields or "topic"
        opts.input_format = opts.input_format or "jsonl"
    cfg = job_config.from_options(opts, default_inputs)
    return options, cfg


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print(EmbedOptions.__doc__ or "", file=sys.stderr)
        parser = __import__("argparse").ArgumentParser(prog="beam-embed run")
        EmbedOptions._add_argparse_args(parser)
        from pipeline.dataflow_options import DryRunOptions
        DryRunOptions._add_argparse_args(parser)
        parser.print_help()
        return 0
    try:
        from pipeline.dataflow_options import wants_dry_run
        if wants_dry_run(argv):  # --dry-run: build and describe the job, run and contact nothing
            from pipeline.dataflow import dry_run
            return dry_run(argv)
        options, cfg = configure(argv)
        files = expand_inputs(list(cfg.inputs))
        if not files:
            log(f"warning: {list(cfg.inputs)} matched no files; the job writes an empty output")
        widths = probe_widths(cfg)
        prepare_output(cfg)
    except ValueError as e:  # bad configuration: one line, before any data is read
        print(f"beam-embed run: {e}", file=sys.stderr)
        return 2
    log(f"embedding {len(files)} file(s) with {cfg.model.name} "
        f"(poolings {', '.join(cfg.encoder.poolings)}) into {cfg.output}")
    direct = options.view_as(DirectOptions)
    workers = direct.direct_num_workers or 1
    runner = runner_for(options)  # None: the --runner named (Dataflow, ...), which spreads work
    one_worker = runner is not None and direct.direct_running_mode == "in_memory" and workers == 1
    with beam.Pipeline(runner=runner, options=options) as p:
        build_pipeline(p, cfg, files, widths, workers, spread=not one_worker)
    return summarize(cfg.output)


def summarize(output: str) -> int:
    with FileSystems.open(FileSystems.join(output, "manifest.json")) as f:
        manifest = json.load(f)
    c = manifest["counts"]
    log(f"done: read {c['read']}, embedded {c['embedded']} ({c['truncated']} truncated), skipped "
        f"empty {c['skipped_empty']}, dead-lettered {c['dead_lettered']}, {c['tokens']} tokens in "
        f"{manifest['wall_time_s']:.1f}s -> {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
