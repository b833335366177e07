"""The embedding job: `beam-embed run` / `python -m pipeline.run`.

main(argv) -> help (no Beam, no TensorFlow) -> parse once + validate and check the output folder
(no data read, no model loaded) -> probe the model -> claim the output -> build_pipeline(p, cfg)
-> run -> summary. `--dry-run` builds the same job and describes it.
"""

from __future__ import annotations

import sys

from pipeline.common.log import log
from pipeline.job.flags import print_help


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print_help()
        return 0
    if "--help-beam" in argv:
        from pipeline.common.flags import beam_flags

        beam_flags()[0].print_help()
        return 0
    from pipeline.common.manifest import JOB_OUTPUTS, prepare_output, refuse_previous_run
    from pipeline.job.config import configure
    from pipeline.job.options import EmbedOptions, parse

    try:
        options = parse(argv)
        from pipeline.dataflow.options import dry_run_requested

        if dry_run_requested(options):  # build and describe the job; run and contact nothing
            from pipeline.job.dry_run import dry_run
            return dry_run(options)
        opts = options.view_as(EmbedOptions)
        refuse_previous_run(opts.output.rstrip("/"), JOB_OUTPUTS, opts.overwrite)
        cfg = configure(options)  # the plain checks, then the model's spec
        from pipeline.job.build import probe_widths
        from pipeline.job.sources import expand_inputs

        files = expand_inputs(list(cfg.inputs))
        widths = probe_widths(cfg)
        prepare_output(cfg.output, JOB_OUTPUTS, cfg.overwrite)
    except ValueError as e:  # bad configuration: one line, before any data is read
        print(f"beam-embed run: {e}", file=sys.stderr)
        return 2
    if not files:
        log(f"warning: {list(cfg.inputs)} matched no files; the job writes an empty output")
    log(f"embedding {len(files)} file(s) with {cfg.encoder.name} "
        f"(poolings {', '.join(cfg.encoder.poolings)}) into {cfg.output}")
    run(options, cfg, files, widths)
    from pipeline.job.summary import summarize

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
