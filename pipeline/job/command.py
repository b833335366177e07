"""The embedding job: `beam-embed run` / `python -m beam_embed.pipeline.run`.

main(argv) -> help (no Beam, no TensorFlow) -> with only the job's own flags, the encoder's
warm-up starts on a thread before Beam is imported (early.py) -> argv read once into JobFlags
(flags.py) and Beam's PipelineOptions (options.py), validated, the output folder checked (no data
read) -> the encoder's warm-up starts (models/warm_up.py) unless it
did -> claim the output folder -> probe the model and check its
limits -> build_pipeline(p, cfg) into the run's staging folder -> run -> publish (swap the
complete run in) -> summary and exit code (beam_embed.pipeline.common.exits). `--dry-run` builds the same
job and describes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading

from beam_embed.pipeline.common import exits
from beam_embed.pipeline.common.errors import CommandError, one_line, one_line_errors
from beam_embed.pipeline.common.log import log
from beam_embed.pipeline.job.flags import print_help

PROG = "beam-embed run"


def _bad_config(e: ValueError) -> int:
    print(f"{PROG}: {e}", file=sys.stderr)
    return exits.BAD_CONFIG


@one_line_errors(PROG)
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print_help()
        return exits.OK
    if "--help-beam" in argv:
        from beam_embed.pipeline.common.flags import beam_flags

        beam_flags()[0].print_help()
        return exits.OK
    from beam_embed.pipeline.job.early import job_argv, start_warm_up

    try:
        job = job_argv(argv)  # read once: the job's flags, and what is Beam's
        spec = start_warm_up(job)  # the plain case: the model warms up while Beam imports
    except ValueError as e:
        return _bad_config(e)
    from beam_embed.models.hub_loader import is_remote
    from beam_embed.pipeline.common.manifest import JOB, make_folder
    from beam_embed.pipeline.common.staging import check_output
    from beam_embed.pipeline.job.config import check_accelerator, configure
    from beam_embed.pipeline.job.options import beam_options

    try:
        options = beam_options(job)
        from beam_embed.pipeline.job.dataflow.options import dry_run_requested

        if dry_run_requested(options):  # build and describe the job; run and contact nothing
            from beam_embed.pipeline.job.dry_run import dry_run
            return dry_run(job.flags, options)
        flags = job.flags
        check_output(flags.output.rstrip("/"), JOB, flags.overwrite)  # before the model loads
        cfg = configure(flags, options, spec)  # the plain checks, then the model's spec
        check_accelerator(cfg.encoder, options)  # a local run's TPU or GPU, before the model
        cfg.encoder.warm_up()  # loads and runs the encoder once while the launcher goes on
        from beam_embed.pipeline.job.input_fields import with_input_fields
        from beam_embed.pipeline.job.sources import expand_inputs

        files = expand_inputs(list(cfg.inputs))
        cfg = with_input_fields(cfg, files)  # checked, and decided where the flags leave them
        created = make_folder(cfg.output)
    except ValueError as e:  # bad configuration: one line, before any data is read
        return _bad_config(e)
    code = claimed_run(flags, options, cfg, files, argv)
    if code == exits.BAD_CONFIG and created and not is_remote(cfg.output) \
            and not os.listdir(cfg.output):  # a refused run leaves nothing behind
        os.rmdir(cfg.output)
    return code


def claimed_run(flags, options, cfg, files, argv: list[str]) -> int:
    """The run, holding the output folder's claim from its last check to the swap."""
    from beam_embed.pipeline.common.claim import claim_output
    from beam_embed.pipeline.common.manifest import JOB
    from beam_embed.pipeline.common.staging import (
        NothingPublished,
        check_output,
        discard,
        publish,
        remove_leftovers,
        staging_folder,
    )
    from beam_embed.pipeline.job.config import check_model_limits, workers_run_here
    from beam_embed.pipeline.job.input_fields import fields_note

    with unwound_on_sigterm() as stopped, \
            claim_output(cfg.output, cfg.overwrite, [PROG, *argv], options=options) as claim:
        try:  # checked again under the claim: a run may have finished there since
            previous = check_output(cfg.output, JOB, cfg.overwrite)
            from beam_embed.pipeline.job.build import probe_widths

            widths = probe_widths(cfg, on_host=not workers_run_here(options))
            explicit = flags.max_seq_length is not None
            cfg = check_model_limits(cfg, cfg.encoder.max_positions(), explicit)
            from beam_embed.pipeline.job.calibration import vector_storage

            stored = vector_storage(cfg, widths, files)  # int8: calibrated on a sample
            if cfg.reuse:  # its shards and settings, now that the model's are final
                from beam_embed.pipeline.job.build import manifest_base
                from beam_embed.pipeline.job.reuse import previous_run

                cfg = dataclasses.replace(cfg, previous=previous_run(
                    cfg.reuse, manifest_base(cfg, widths, files, stored)))
        except ValueError as e:
            return _bad_config(e)
        for path in remove_leftovers(cfg.output):
            log(f"removed {path}, left by a run that did not finish")
        staging = staging_folder(cfg.output, claim.run_id)
        log(f"embedding {len(files)} file(s) with {cfg.encoder.name} "
            f"(poolings {', '.join(cfg.encoder.poolings)}) into {cfg.output}"
            f"{fields_note(flags, cfg)}")
        try:
            run(options, dataclasses.replace(cfg, output=staging), files, widths, stored)
        except Exception as e:  # the old run, if any, is untouched; say where this one stopped
            discard(staging)
            if stopped:  # SIGTERM inside a Beam step, which wraps the SystemExit raised there
                raise SystemExit(128 + stopped[0]) from e
            raise CommandError(f"the run stopped, nothing was published to {cfg.output} (its "
                               f"previous run, if any, is untouched): {one_line(e)}") from e
        except BaseException:  # Ctrl-C, SIGTERM: nothing of the run stays behind either
            discard(staging)
            raise
        try:
            replaced = publish(staging, cfg.output, JOB, previous)
        except NothingPublished:  # refused before it changed anything: the run goes
            discard(staging)
            raise
        if replaced:
            log(f"replaced the previous run in {cfg.output} ({len(replaced)} files)")
    from beam_embed.pipeline.job.summary import summarize

    return summarize(cfg.output, cfg.allow_incomplete_input)


@contextlib.contextmanager
def unwound_on_sigterm():
    """SIGTERM (a scheduler stopping the run, `timeout`) unwinds the run like Ctrl-C, so its
    claim is released; only SIGKILL leaves a claim for --overwrite to take over. Yields the
    signals received: Beam re-raises what a step raised as its own error, so the caller tells
    a stopped run from a failed one by this list, not by the exception."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def stop(signum, frame):
        received.append(signum)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(options, cfg, files, widths, stored=()) -> None:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import DirectOptions

    from beam_embed.pipeline.common.lean_process import resume_collector
    from beam_embed.pipeline.common.runners import runner_for
    from beam_embed.pipeline.job.build import build_pipeline

    resume_collector()

    direct = options.view_as(DirectOptions)
    workers = direct.direct_num_workers or 1
    runner = runner_for(options)  # None: the --runner named (Dataflow, ...), which spreads work
    one_worker = runner is not None and direct.direct_running_mode == "in_memory" and workers == 1
    from beam_embed.pipeline.job.input_size import expected_records

    # --reuse copies most rows' vectors without the encoder: its records are no measure there
    expected = 0.0 if cfg.previous is not None else expected_records(cfg, files)
    with beam.Pipeline(runner=runner, options=options) as p:
        build_pipeline(p, cfg, files, widths, workers, spread=not one_worker, stored=stored,
                       expected=expected)
