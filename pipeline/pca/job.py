"""The follow-up job: exact PCA of the embedding job's output, projections, exports for people.

    beam-embed pca --input EMBEDDINGS_DIR --output VIZ_DIR [options] [Beam options]

One Beam pipeline reads the shards twice: a first pass fits (FitPca), a second projects every
record (ProjectEmbeddings -> WriteProjections) and keeps a deterministic sample (SampleRows);
then the launcher draws the sample. VIZ_DIR gets:

    pca.npz                              the fit (reuse it with --fit)
    projections-SSSSS-of-NNNNN.parquet   id, pc_1..pc_K, --columns
    sample.parquet                       the sample behind the exports (its provenance inside)
    projector/                           TensorBoard projector bundle
    plot.html, plot.png                  interactive scatter, static image
    manifest.json                        written last: its presence means the run finished

Every option is checked before any data is read; unknown options go to Beam.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.common.manifest import (
    MANIFEST,
    EmbeddingSet,
    load_embedding_set,
    prepare_output,
    write_manifest,
)
from pipeline.common.runners import runner_for
from pipeline.pca.exports import ExportSpec, export_sample
from pipeline.pca.fit import FitPca, FitSpec, PcaFit, load_fit, save_fit
from pipeline.pca.inputs import ReadEmbeddings
from pipeline.pca.maps import check_method, check_plot_packages
from pipeline.pca.project import PROJECTIONS, ProjectEmbeddings, WriteProjections, projection_schema
from pipeline.pca.projector import PROJECTOR_LIMIT
from pipeline.pca.sample import SampleRows, write_sample

FIT_FILE, SAMPLE_FILE = "pca.npz", "sample.parquet"
OUTPUTS = (MANIFEST, FIT_FILE, SAMPLE_FILE, f"{PROJECTIONS}-*-of-*.parquet", "plot.html",
           "plot.png", "projector/*")  # what --overwrite replaces; the manifest goes first
DEFAULT_COMPONENTS, DEFAULT_SAMPLE = 50, 10_000


def parse_args(argv=None) -> tuple[argparse.Namespace, list[str]]:
    """(the job's options, the rest for Beam)."""
    p = argparse.ArgumentParser(prog="beam-embed pca", description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="the embedding job's output folder")
    p.add_argument("--output", required=True, help="folder for the fit, projections, exports")
    p.add_argument("--pooling", help="pooling name or column (default: the manifest's first)")
    p.add_argument("--components", type=int,
                   help=f"K, the number of components (default {DEFAULT_COMPONENTS} or the width)")
    p.add_argument("--format", help="parquet or tfrecord (default: parquet when listed)")
    p.add_argument("--center", action=argparse.BooleanOptionalAction,
                   help="subtract the mean before the fit (default: yes)")
    p.add_argument("--whiten", action=argparse.BooleanOptionalAction,
                   help="scale each coordinate to unit variance (default: no)")
    p.add_argument("--fit", help="a saved pca.npz to apply instead of fitting")
    p.add_argument("--columns", help="comma-separated columns to keep beside id and the PCs "
                                     "(default: all; 'length' means num_tokens)")
    p.add_argument("--color-by", default="source", help="a column, or 'length' (tokens)")
    p.add_argument("--dims", type=int, choices=(2, 3), default=2, help="plot dimensions")
    p.add_argument("--method", default="pca", help="plot map: pca, tsne or umap")
    p.add_argument("--sample", type=int, default=DEFAULT_SAMPLE,
                   help=f"points in the projector and plots (at most {PROJECTOR_LIMIT:,})")
    p.add_argument("--seed", type=int, default=0, help="sample and t-SNE/UMAP seed")
    p.add_argument("--overwrite", action="store_true", help="replace a previous run's outputs")
    return p.parse_known_args(argv)


@dataclass(frozen=True)
class Plan:
    """Everything the run needs, checked."""
    embeddings: EmbeddingSet
    fmt: str
    shards: tuple[str, ...]
    spec: FitSpec
    saved_fit: PcaFit | None
    columns: tuple[str, ...]
    output: str
    exports: ExportSpec
    sample: int
    seed: int


def _fit_spec(args, es: EmbeddingSet) -> tuple[FitSpec, PcaFit | None]:
    """The spec from the flags, or the saved fit's (with which no flag may disagree)."""
    source = es.manifest_path
    if args.fit is None:
        pooling = es.pooling(args.pooling)
        k = min(DEFAULT_COMPONENTS, pooling.width) if args.components is None else args.components
        if not 1 <= k <= pooling.width:
            raise ValueError(f"--components {k} is out of range for column {pooling.column!r} "
                             f"of width {pooling.width}; expected 1..{pooling.width}")
        return FitSpec(pooling, k, args.center is not False, bool(args.whiten), source,
                       es.model), None
    fit = load_fit(args.fit)
    saved = fit.spec
    pooling = es.pooling(args.pooling or saved.pooling.column)
    if pooling.column != saved.pooling.column or pooling.width != saved.pooling.width:
        raise ValueError(f"--fit {args.fit} was made on column {saved.pooling.column!r} of "
                         f"width {saved.pooling.width}; {source} has {pooling.column!r} of "
                         f"width {pooling.width}")
    for flag, given, kept in (("components", args.components, saved.components),
                              ("center", args.center, saved.center),
                              ("whiten", args.whiten, saved.whiten)):
        if given is not None and given != kept:
            raise ValueError(f"--{flag} {given} disagrees with --fit {args.fit} ({flag}={kept});"
                             " drop the flag or fit again")
    return saved, fit


def _columns(args, es: EmbeddingSet) -> tuple[str, ...]:
    if args.columns is None:
        return es.columns
    choices = sorted(set(es.columns) | {"length"})
    wanted = ["id"]
    for name in filter(None, (c.strip() for c in args.columns.split(","))):
        if name not in choices:
            raise ValueError(f"unknown column {name!r} in --columns; expected some of {choices}")
        wanted.append("num_tokens" if name == "length" else name)
    return tuple(dict.fromkeys(wanted))


def make_plan(args) -> Plan:
    """Checks every option against the manifest and the saved fit."""
    es = load_embedding_set(args.input)
    fmt, shards = es.shards(args.format)
    spec, saved_fit = _fit_spec(args, es)
    color_choices = sorted((set(es.columns) - {"id", "text"}) | {"length"})
    if args.color_by not in color_choices:
        raise ValueError(f"unknown --color-by {args.color_by!r}; expected one of {color_choices}")
    check_method(args.method, spec.components, args.dims)
    check_plot_packages()
    if not 1 <= args.sample <= PROJECTOR_LIMIT:
        raise ValueError(f"--sample {args.sample} is out of range; expected 1..{PROJECTOR_LIMIT} "
                         "(the TensorBoard projector's limit)")
    if args.seed < 0:
        raise ValueError(f"--seed {args.seed} is negative; expected 0 or more")
    if args.output.rstrip("/") == args.input.rstrip("/"):
        raise ValueError(f"--output {args.output!r} is the input folder; expected another one")
    model = es.model.get("name") or es.model.get("handle") or "unknown model"
    exports = ExportSpec(args.output, spec.components, model, spec.pooling.name, args.method,
                         args.dims, args.color_by, args.seed)
    return Plan(es, fmt, shards, spec, saved_fit, _columns(args, es), args.output, exports,
                args.sample, args.seed)


def build_pipeline(p: beam.Pipeline, plan: Plan) -> None:
    """Fit (or the saved fit) -> save it; project every record -> Parquet + a sample."""
    es, spec, out = plan.embeddings, plan.spec, plan.output
    if plan.saved_fit is None:
        fit = (p
               | "ReadForFit" >> ReadEmbeddings(plan.shards, plan.fmt, (), spec.pooling)
               | "FitPca" >> FitPca(spec))
    else:
        fit = p | "UseSavedFit" >> beam.Create([plan.saved_fit])
    _ = fit | "SaveFit" >> beam.Map(save_fit, FileSystems.join(out, FIT_FILE))

    every = projection_schema(spec.components, {c: es.column_type(c) for c in es.columns})
    kept = projection_schema(spec.components, {c: es.column_type(c) for c in plan.columns})
    rows = (p
            | "ReadForProjection" >> ReadEmbeddings(plan.shards, plan.fmt, es.columns,
                                                    spec.pooling)
            | "ProjectEmbeddings" >> ProjectEmbeddings(beam.pvalue.AsSingleton(fit), every))
    _ = rows | "WriteProjections" >> WriteProjections(out, kept)
    _ = (rows
         | "SampleRows" >> SampleRows(plan.sample, plan.seed, every)
         | "WriteSample" >> beam.Map(write_sample, FileSystems.join(out, SAMPLE_FILE),
                                     plan.seed))


def _manifest(plan: Plan, exports: dict) -> dict:
    fit = load_fit(FileSystems.join(plan.output, FIT_FILE))
    pattern = FileSystems.join(plan.output, f"{PROJECTIONS}-*-of-*.parquet")
    shards = sorted(m.path.rsplit("/", 1)[-1]
                    for m in FileSystems.match([pattern])[0].metadata_list)
    return {"format_version": 1, "kind": "pca",
            "input": {"folder": plan.embeddings.folder, "format": plan.fmt,
                      "model": plan.embeddings.model},
            "fit": {"file": FIT_FILE, "reused": plan.saved_fit is not None, **fit.summary()},
            "projections": {"files": shards, "rows": exports["sample"]["of"],
                            "columns": ["id", f"pc_1..pc_{fit.spec.components}",
                                        *plan.columns[1:]]},
            "sample_file": SAMPLE_FILE, **exports}


def main(argv=None) -> int:
    """Runs the job; 2 on bad configuration (one line on stderr, before any data is read)."""
    args, beam_args = parse_args(argv)
    try:
        plan = make_plan(args)
        prepare_output(plan.output, OUTPUTS, args.overwrite)
    except (ValueError, FileNotFoundError) as e:  # FileNotFoundError: a missing --fit file
        print(f"beam-embed pca: {e}", file=sys.stderr)
        return 2
    options = PipelineOptions(beam_args)
    with beam.Pipeline(runner=runner_for(options), options=options) as p:
        build_pipeline(p, plan)
    exports = export_sample(FileSystems.join(plan.output, SAMPLE_FILE), plan.exports)
    manifest = _manifest(plan, exports)
    write_manifest(plan.output, manifest)
    logging.info("PCA of %s written to %s", plan.embeddings.folder, plan.output)
    return 0

