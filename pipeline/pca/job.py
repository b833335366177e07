"""The PCA job behind `beam-embed pca` (command.py parses its flags): every option checked
against the manifest and the saved fit (make_plan), then one Beam pipeline that reads the shards
twice: a first pass fits (FitPca), a second projects every record (ProjectEmbeddings ->
WriteProjections) and keeps a deterministic sample (SampleRows); then the launcher draws the
sample (exports.py) and writes the manifest last. Everything is written into the run's staging
folder inside the output folder and swapped in whole at the end
(beam_embed.pipeline.common.run_folder.staging), so the previous run stays as it was until this one
is complete."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from beam_embed.models.tf_import import import_tensorflow
from beam_embed.pipeline.common.finished_run.embedding_set import (
    BASE_TYPES,
    EmbeddingSet,
    load_embedding_set,
)
from beam_embed.pipeline.common.finished_run.shards import (
    CheckedShards,
    check_shards,
    check_unchanged,
    unverified,
)
from beam_embed.pipeline.common.output_formats import output_format
from beam_embed.pipeline.common.output_formats.schema import (
    META_PREFIX,
    metadata_field,
    own_columns,
)
from beam_embed.pipeline.common.run_folder.literal_paths import matching
from beam_embed.pipeline.common.run_folder.manifest.entries import ModelEntry, model_differences
from beam_embed.pipeline.common.run_folder.manifest.folder import MANIFEST, OutputKind, make_folder
from beam_embed.pipeline.common.run_folder.manifest.pca import (
    PcaFitEntry,
    PcaInput,
    PcaManifest,
    PcaProjections,
)
from beam_embed.pipeline.common.run_folder.staged_run import staged_run
from beam_embed.pipeline.common.run_folder.staging import check_output, naming_file
from beam_embed.pipeline.common.runners.choice import runner_for
from beam_embed.pipeline.common.settings.errors import IncompleteInput
from beam_embed.pipeline.pca.exports import (
    HTML_FILE,
    PNG_FILE,
    PROJECTOR_DIR,
    ExportSpec,
    export_sample,
    start_warm_up,
)
from beam_embed.pipeline.pca.fit import FitPca, FitSpec, PcaFit, load_fit, save_fit
from beam_embed.pipeline.pca.inputs import ReadEmbeddings
from beam_embed.pipeline.pca.limits import (
    check_components,
    check_dims,
    check_map_points,
    check_records,
    check_sample,
    default_components,
)
from beam_embed.pipeline.pca.maps import check_method, check_plot_packages
from beam_embed.pipeline.pca.project import (
    PROJECTIONS,
    ProjectEmbeddings,
    WriteProjections,
    projection_schema,
)
from beam_embed.pipeline.pca.projector import CONFIG, METADATA, TENSORS
from beam_embed.pipeline.pca.sample import SampleRows, write_sample
from beam_embed.process.log import log

FIT_FILE, SAMPLE_FILE = "pca.npz", "sample.parquet"
OUTPUTS = (MANIFEST, FIT_FILE, SAMPLE_FILE, f"{PROJECTIONS}-*-of-*.parquet", HTML_FILE,
           PNG_FILE, f"{PROJECTOR_DIR}/*")  # names that look like this job's outputs


PCA_OUTPUT = OutputKind(
    "beam-embed pca", OUTPUTS,
    re.compile("|".join([re.escape(n) for n in (FIT_FILE, SAMPLE_FILE, HTML_FILE, PNG_FILE)]
                        + [re.escape(f"{PROJECTOR_DIR}/{n}") for n in (TENSORS, METADATA, CONFIG)]
                        + [rf"{PROJECTIONS}-[0-9]+-of-[0-9]+\.parquet"])),
    PcaManifest.listed_in, PcaManifest.recognizes)


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
    overwrite: bool = False
    checked: CheckedShards | None = None  # the input's shards as checked, re-checked once read


def _fit_spec(args, es: EmbeddingSet, records: int | None) -> tuple[FitSpec, PcaFit | None]:
    """The spec from the flags, or the saved fit's (with which no flag may disagree). K is at
    most the width and the record count (`records`, the manifest's; None when it has none)."""
    source = es.manifest_path
    if args.fit is None:
        pooling = es.pooling(args.pooling)
        if args.components is None:
            k = default_components(pooling.width, records)
            check_dims(args.dims, k, pooling.column, pooling.width, records)
        else:
            k = args.components
            check_components(k, pooling.column, pooling.width, records)
        return FitSpec(pooling, k, args.center is not False, bool(args.whiten), source,
                       es.model.to_json()), None
    fit = load_fit(args.fit)
    saved = fit.spec
    pooling = es.pooling(args.pooling or saved.pooling.column)
    if pooling.column != saved.pooling.column or pooling.width != saved.pooling.width:
        raise ValueError(f"--fit {args.fit} was made on column {saved.pooling.column!r} of "
                         f"width {saved.pooling.width}; {source} has {pooling.column!r} of "
                         f"width {pooling.width}")
    _check_fit_settings(args.fit, saved, pooling, es)
    for flag, given, kept in (("components", args.components, saved.components),
                              ("center", args.center, saved.center),
                              ("whiten", args.whiten, saved.whiten)):
        if given is not None and given != kept:
            raise ValueError(f"--{flag} {given} disagrees with --fit {args.fit} ({flag}={kept});"
                             " drop the flag or fit again")
    # the fit's space, this run's storage: a fit on float32 vectors projects int8 ones
    saved = dataclasses.replace(saved, pooling=pooling)
    return saved, dataclasses.replace(fit, spec=saved)


def _check_fit_settings(path: str, saved: FitSpec, pooling, es: EmbeddingSet) -> None:
    """A saved fit applies only to vectors made as the ones it was fitted on: the same model
    (fingerprint), max length, long-text policy, precision and normalization, as --reuse
    requires of the rows it copies (the storage may differ: a float32 fit projects int8
    vectors). A ValueError naming each difference."""
    diffs = model_differences(ModelEntry.from_json(saved.model), es.model,
                              f"{es.manifest_path}'s")
    if saved.pooling.normalize != pooling.normalize:
        diffs.append(f"normalized {saved.pooling.normalize}, {es.manifest_path}'s "
                     f"{pooling.normalize}")
    if diffs:
        raise ValueError(f"--fit {path} was made on vectors embedded with other settings, and "
                         f"its axes do not apply to these: {'; '.join(diffs)}; fit again "
                         "without --fit")


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


def _check_color_by(color_by: str, es: EmbeddingSet) -> None:
    """A column of the run, or length; an input field the run did not carry is named with the
    run flag that carries it."""
    choices = sorted((set(es.columns) - {"id", "text"}) | {"length"})
    if color_by in choices:
        return
    message = f"unknown --color-by {color_by!r}; expected one of {choices}"
    own = {*BASE_TYPES, *(p.column for p in es.poolings), *(p.name for p in es.poolings)}
    if color_by in own:  # `run` keeps an input field of such a name as meta_<field>
        message += (f"; {color_by!r} is a column `beam-embed run` writes itself, one value per "
                    "record, not a field it carries as a group (an input field of that name is "
                    f"carried as 'meta_{color_by}')")
    elif color_by not in es.columns:
        own_names = own_columns(p.column for p in es.poolings)
        carried = ",".join((*(metadata_field(c, own_names) for c in es.metadata_columns),
                            color_by))
        message += (f"; a field of the input is a column when the run carries it: run "
                    f"`beam-embed run` again with --metadata_fields {carried}")
    raise ValueError(message)


def _twin(color_by: str, es: EmbeddingSet) -> str | None:
    """The metadata column holding the input's field named like the run's own column
    `color_by` (source -> meta_source), when the run carried one."""
    twin = META_PREFIX + color_by
    return twin if twin in es.metadata_columns else None


def make_plan(args) -> Plan:
    """Checks every option against the manifest and the saved fit."""
    es = load_embedding_set(args.input)
    fmt, shards = es.shards(args.format)
    records = es.counts.embedded
    check_records(records, es.manifest_path)
    spec, saved_fit = _fit_spec(args, es, records)
    _check_color_by(args.color_by, es)
    if _twin(args.color_by, es):
        log(f"colouring by column {args.color_by!r}, the run's own; the input's field "
            f"{args.color_by!r} is column {_twin(args.color_by, es)!r}: --color-by "
            f"{_twin(args.color_by, es)} colours by it")
    check_method(args.method, spec.components, args.dims)
    check_plot_packages()
    check_sample(args.sample)
    check_map_points(args.method, args.dims, args.sample, records)
    if args.seed < 0:
        raise ValueError(f"--seed {args.seed} is negative; expected 0 or more")
    if args.output.rstrip("/") == args.input.rstrip("/"):
        raise ValueError(f"--output {args.output!r} is the input folder; expected another one")
    model = es.model.name or "unknown model"
    exports = ExportSpec(args.output, spec.components, model, spec.pooling.name, args.method,
                         args.dims, args.color_by, args.seed)
    columns = _columns(args, es)
    check_output(args.output, PCA_OUTPUT, args.overwrite)
    # last: every listed shard there, the file the run wrote (Parquet: rows adding up)
    checked = check_shards(es, fmt)
    if not checked.verified:
        log(unverified(es))
    return Plan(es, fmt, shards, spec, saved_fit, columns, args.output, exports, args.sample,
                args.seed, args.overwrite, checked)


def build_pipeline(p: beam.Pipeline, plan: Plan) -> None:
    """Fit (or the saved fit) -> save it; project every record -> Parquet + a sample."""
    es, spec, out = plan.embeddings, plan.spec, plan.output
    if plan.saved_fit is None:
        fit = (p
               | "ReadForFit" >> ReadEmbeddings(plan.shards, plan.fmt, (), spec.pooling, es.rows)
               | "FitPca" >> FitPca(spec))
    else:
        fit = p | "UseSavedFit" >> beam.Create([plan.saved_fit])
    _ = fit | "SaveFit" >> beam.Map(_named(save_fit), FileSystems.join(out, FIT_FILE))

    every = projection_schema(spec.components, {c: es.column_type(c) for c in es.columns})
    kept = projection_schema(spec.components, {c: es.column_type(c) for c in plan.columns})
    rows = (p
            | "ReadForProjection" >> ReadEmbeddings(plan.shards, plan.fmt, es.columns,
                                                    spec.pooling, es.rows)
            | "ProjectEmbeddings" >> ProjectEmbeddings(beam.pvalue.AsSingleton(fit), every))
    _ = rows | "WriteProjections" >> WriteProjections(out, kept)
    _ = (rows
         | "SampleRows" >> SampleRows(plan.sample, plan.seed, every)
         | "WriteSample" >> beam.Map(_named(write_sample), FileSystems.join(out, SAMPLE_FILE),
                                     plan.seed))


def _named(write):
    """`write(value, path, ...)` whose OSErrors name `path` (a full disk's error names none)."""
    def named(value, path, *args):
        with naming_file(path):
            return write(value, path, *args)
    return named


def _manifest(plan: Plan, fit: PcaFit, exports: dict) -> PcaManifest:
    shards = sorted(p.rsplit("/", 1)[-1]
                    for p in matching(plan.output, [f"{PROJECTIONS}-*-of-*.parquet"]))
    return PcaManifest(
        input=PcaInput(folder=plan.embeddings.folder, format=plan.fmt,
                       model=plan.embeddings.model),
        fit=PcaFitEntry.from_json({"file": FIT_FILE, "reused": plan.saved_fit is not None,
                                   **fit.summary()}),
        projections=PcaProjections(
            files=tuple(shards), rows=exports["sample"].of,
            columns=("id", f"pc_1..pc_{fit.spec.components}", *plan.columns[1:])),
        sample_file=SAMPLE_FILE, **exports)


def check(args) -> Plan:
    """The plan, every option checked, the shards too, and the output folder made: before any
    data is read."""
    plan = make_plan(args)
    make_folder(plan.output)
    return plan


def check_all_read(plan: Plan, exports: dict) -> None:
    """Every record the input's manifest counts was projected (the shards were checked before;
    this catches what only reading them shows)."""
    projected, expected = exports["sample"].of, plan.embeddings.counts.embedded
    if expected is not None and projected != expected:
        raise IncompleteInput(f"read {projected} records from the {plan.fmt} shards of "
                              f"{plan.embeddings.folder}, but its manifest counts {expected}; "
                              "a shard was replaced or damaged (no PCA manifest was written)")


def run(plan: Plan, beam_args: list[str], command: list[str]) -> PcaManifest:
    """Fits, projects, samples, draws; returns the manifest it wrote last. One job per output
    folder, as for `run`: under the folder's claim, everything is written into the job's
    staging folder and swapped in once complete; a job that fails leaves the previous one as
    it was, and only the files a manifest lists are ever replaced."""
    if output_format(plan.fmt).tensorflow:
        import_tensorflow()  # e.g. TFRecord shards are parsed with TensorFlow: load it quietly
    options = PipelineOptions(beam_args)
    with staged_run(plan.output, PCA_OUTPUT, plan.overwrite, command, options) as staged:
        staging = staged.stage()  # the staging folders of killed jobs go first
        staged_plan = dataclasses.replace(
            plan, output=staging, exports=dataclasses.replace(plan.exports, folder=staging))
        manifest = _write_all(staged_plan, options)
    return manifest


def _write_all(plan: Plan, options: PipelineOptions) -> PcaManifest:
    """The whole job into `plan.output` (the staging folder), its manifest last."""
    warm_up = start_warm_up()  # the plotting libraries, while the pipeline runs
    with beam.Pipeline(runner=runner_for(options), options=options) as p:
        build_pipeline(p, plan)
    fit = load_fit(FileSystems.join(plan.output, FIT_FILE))
    warm_up.join()
    exports = export_sample(FileSystems.join(plan.output, SAMPLE_FILE), plan.exports,
                            fit.explained_variance_ratio)
    check_all_read(plan, exports)
    if plan.checked is not None:  # what was read is the run the input's manifest describes
        check_unchanged(plan.checked)
    manifest = _manifest(plan, fit, exports)
    with naming_file(FileSystems.join(plan.output, MANIFEST)):
        manifest.write(plan.output)
    return manifest
