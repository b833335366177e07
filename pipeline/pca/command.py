"""`beam-embed pca` / `python -m beam_embed.pipeline.pca`: exact PCA of the embedding job's output,
projections of every record, and exports for people.

    beam-embed pca --input EMBEDDINGS_DIR --output VIZ_DIR [options] [Beam options]

VIZ_DIR gets:

    pca.npz                              the fit (reuse it with --fit)
    projections-SSSSS-of-NNNNN.parquet   id, pc_1..pc_K, --columns
    sample.parquet                       the sample behind the exports (its provenance inside)
    projector/                           TensorBoard projector bundle
    plot.html, plot.png                  interactive scatter, static image
    manifest.json                        written last: its presence means the run finished

Flags are parsed here without Beam (so --help is instant); every option is checked before any
data is read (job.py); options that are neither this job's nor Beam's are errors.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.settings.command_line import CommandParser, check_beam_args
from beam_embed.pipeline.common.settings.errors import one_line_errors, refused
from beam_embed.pipeline.pca.limits import (
    DEFAULT_COMPONENTS,
    DEFAULT_SAMPLE,
    MIN_SAMPLE,
    PROJECTOR_LIMIT,
)
from beam_embed.process import exits
from beam_embed.process.log import log

if TYPE_CHECKING:  # the manifest's module imports Beam: not for --help
    from beam_embed.pipeline.common.run_folder.manifest.pca import PcaManifest

PROG = "beam-embed pca"


def parser() -> CommandParser:
    p = CommandParser(PROG, "\n\n".join(__doc__.split("\n\n")[i] for i in (0, 2, 3)),
                      epilog="Beam's own options (--runner, --direct_num_workers, ...) pass "
                             "through; `beam-embed run --help-beam` lists them.")
    p.add_argument("--input", required=True, help="the embedding job's output folder")
    p.add_argument("--output", required=True, help="folder for the fit, projections, exports")
    p.add_argument("--pooling", help="pooling name or column (default: the manifest's first)")
    p.add_argument("--components", type=int,
                   help=f"K, the number of components: 1 to the width or the number of records, "
                        f"whichever is smaller (default {DEFAULT_COMPONENTS}, or that bound when "
                        "smaller)")
    p.add_argument("--format", help=f"the shards read: {' or '.join(output_formats.readable())}"
                                    " (default: the first of these the run wrote)")
    p.add_argument("--center", action=argparse.BooleanOptionalAction,
                   help="subtract the mean before the fit (default: yes)")
    p.add_argument("--whiten", action=argparse.BooleanOptionalAction,
                   help="scale each coordinate to unit variance (default: no)")
    p.add_argument("--fit", help="a saved pca.npz to apply instead of fitting")
    p.add_argument("--columns", help="comma-separated columns to keep beside id and the PCs "
                                     "(default: all; 'length' means num_tokens)")
    p.add_argument("--color-by", default="source",
                   help="a column, or 'length' (tokens); source is the file each record was "
                        "read from (a corpus field named source is column meta_source)")
    p.add_argument("--dims", type=int, choices=(2, 3), default=2, help="plot dimensions")
    p.add_argument("--method", default="pca", help="plot map: pca, tsne or umap")
    p.add_argument("--sample", type=int, default=DEFAULT_SAMPLE,
                   help=f"points in the projector and plots ({MIN_SAMPLE} to {PROJECTOR_LIMIT:,})")
    p.add_argument("--seed", type=int, default=0, help="sample and t-SNE/UMAP seed")
    p.add_argument("--overwrite", action="store_true", help="replace a previous run's outputs")
    return p


def parse_args(argv=None):
    """(the job's options, the rest for Beam); a FlagError on a flag neither takes."""
    p = parser()
    args, rest = p.parse(sys.argv[1:] if argv is None else list(argv), passthrough=True)
    return args, check_beam_args(rest, p.known_flags(), PROG)


def closing_line(manifest: PcaManifest, output: str) -> str:
    """What was fitted and projected, what the plots map, and what was written."""
    from beam_embed.pipeline.pca.maps import map_title

    k, rows = manifest.fit.components, manifest.projections.rows
    method = manifest.plot.method
    plotted = "" if method == "pca" else (
        f"; the plots map the {manifest.sample.size:,} sampled records by "
        f"{map_title(method, k)}")
    shards = len(manifest.projections.files)
    return (f"done: PCA-{k} of {rows:,} records{plotted} -> {output} (plot.html, plot.png, "
            f"projector/, pca.npz, {shards} projection shard(s), manifest.json)")


@one_line_errors(PROG)
def main(argv=None) -> int:
    """Runs the job; exit codes in beam_embed.process.exits (2: bad configuration, one line on
    stderr before any data is read; 3: a shard of the input missing or damaged)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args, beam_args = parse_args(argv)
        from apache_beam.options.pipeline_options import PipelineOptions

        from beam_embed.pipeline.common.runners.choice import check_runner, cluster_path, is_dask
        from beam_embed.pipeline.pca.job import check

        options = PipelineOptions(beam_args)
        check_runner(options)  # a Dask run's scheduler answers
        if is_dask(options):  # a cluster's workers do not share this working folder
            args.input, args.output = cluster_path(args.input), cluster_path(args.output)
            args.fit = args.fit and cluster_path(args.fit)

        plan = check(args)
    except (ValueError, FileNotFoundError) as e:  # FileNotFoundError: a missing --fit file
        return refused(PROG, e)
    from beam_embed.pipeline.pca.job import run

    manifest = run(plan, beam_args, [PROG, *argv])
    log(closing_line(manifest, plan.output))
    log(f"next: open {plan.output}/plot.html in a browser   or   "
        f"tensorboard --logdir {plan.output}/projector")
    return exits.OK
