"""The embedding job: `beam-embed run` / `python -m pipeline.run`.

main(argv) -> parse once + validate (no data read) -> probe the model -> claim the output ->
build_pipeline(p, cfg) -> run -> summary. `--dry-run` builds the same job and describes it.
"""

from __future__ import annotations

import json
import sys

from pipeline.common.log import log
from pipeline.common.manifest import JOB_OUTPUTS, MANIFEST, prepare_output
from pipeline.job.config import configure
from pipeline.job.options import parse, print_help


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print_help()
        return 0
    try:
        options = parse(argv)
        from pipeline.dataflow.options import dry_run_requested

        if dry_run_requested(options):  # build and describe the job; run and contact nothing
            from pipeline.job.dry_run import dry_run
            return dry_run(options)
        cfg = configure(options)
        from pipeline.job.build import probe_widths
        from pipeline.job.sources import expand_inputs

        files = expand_inputs(list(cfg.inputs))
        if not files:
            log(f"warning: {list(cfg.inputs)} matched no files; the job writes an empty output")
        widths = probe_widths(cfg)
        prepare_output(cfg.output, JOB_OUTPUTS, cfg.overwrite)
    except ValueError as e:  # bad configuration: one line, before any data is read
        print(f"beam-embed run: {e}", file=sys.stderr)
        return 2
    log(f"embedding {len(files)} file(s) with {cfg.encoder.name} "
        f"(poolings {', '.join(cfg.encoder.poolings)}) into {cfg.output}")
    run(options, cfg, files, widths)
    return summarize(cfg.output)


def run(options, cfg, files, widths) -> None:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import DirectOptions

    from pipeline.common.runners import runner_for
    from pipeline.job.build import build_pipeline

    direct = options.view_as(DirectOptions)
    workers = direct.direct_num_workers or 1
    runner = runner_for(options)  # None: the --runner named (Dataflow, ...), which spreads work
    one_worker = runner is not None and direct.direct_running_mode == "in_memory" and workers == 1
    with beam.Pipeline(runner=runner, options=options) as p:
        build_pipeline(p, cfg, files, widths, workers, spread=not one_worker)


def summarize(output: str) -> int:
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(FileSystems.join(output, MANIFEST)) as f:
        manifest = json.load(f)
    c = manifest["counts"]
    log(f"done: read {c['read']}, embedded {c['embedded']} ({c['truncated']} truncated), skipped "
        f"empty {c['skipped_empty']}, dead-lettered {c['dead_lettered']}, {c['tokens']} tokens in "
        f"{manifest['wall_time_s']:.1f}s -> {output}")
    return 0
