"""The embedding job: `beam-embed run` / `python -m beam_embed.pipeline.run`.

main(argv) -> help (no Beam, no TensorFlow) -> argv read once into RunSettings, checked (argv.py,
settings.py) -> with only the job's own flags, the encoder's warm-up starts on a thread before
Beam is imported (warm_start.py) -> Beam's PipelineOptions (beam_options.py), the output folder
checked (no data read) -> the encoder's spec (resolved.py), its warm-up started
(models/warm_up.py) unless it did -> claim the output folder -> probe the model and check its
limits -> build_pipeline(p, run) into the run's staging folder -> run -> publish (swap the
complete run in) -> summary and exit code (beam_embed.process.exits). `--dry-run` builds
the same job and describes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys

from beam_embed.pipeline.common.settings.errors import one_line_errors, refused
from beam_embed.pipeline.job.argv import JobArgv, print_help, read_job_argv
from beam_embed.process import exits
from beam_embed.process.log import log
from beam_embed.process.terminal import printable

PROG = "beam-embed run"


def _bad_config(e: Exception) -> int:
    return refused(PROG, e)


@one_line_errors(PROG)
def main(argv: list[str] | None = None, read: JobArgv | None = None) -> int:
    """`read`: argv as the process's entry read it (beam_embed.pipeline.job.warm_start.read_at_entry),
    else it is read here."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print_help()
        return exits.OK
    if "--help-beam" in argv:
        from beam_embed.pipeline.common.settings.command_line import beam_flags

        beam_flags()[0].print_help()
        return exits.OK
    from beam_embed.pipeline.job.warm_start import start_warm_up

    try:
        job = read or read_job_argv(argv)  # read once: the job's settings, and what is Beam's
        spec = start_warm_up(job)  # the plain case: the model warms up while Beam imports
    except ValueError as e:
        return _bad_config(e)
    from beam_embed.models.hub_loader import is_remote
    from beam_embed.pipeline.common.run_folder.manifest.folder import make_folder
    from beam_embed.pipeline.common.run_folder.manifest.job import JOB
    from beam_embed.pipeline.common.run_folder.staging import check_output
    from beam_embed.pipeline.job.beam_options import beam_options
    from beam_embed.pipeline.job.resolved import check_accelerator, resolve

    try:
        options = beam_options(job)
        from beam_embed.pipeline.job.job_stores import check_launch

        check_launch(job.settings, options)  # a BigQuery --store's temp_location
        from beam_embed.pipeline.job.dataflow.dry_run_options import dry_run_requested

        if dry_run_requested(options):  # build and describe the job; run and contact nothing
            from beam_embed.pipeline.job.dry_run import dry_run
            return dry_run(job.settings, options)
        settings = job.settings
        from beam_embed.pipeline.common.runners.choice import check_runner, cluster_path, is_dask

        check_runner(options)  # a Dask run's scheduler answers
        check_output(settings.output, JOB, settings.overwrite)  # before the model loads
        if settings.reuse:  # what its manifest alone refuses, before the model or int8's sample
            from beam_embed.pipeline.job.reuse import check_reusable

            check_reusable(settings.reuse, settings.vector_dtype)
        run = resolve(settings, options, spec)  # the model's spec
        check_accelerator(run.encoder, options)  # a local run's TPU or GPU, before the model
        run.encoder.warm_up()  # loads and runs the encoder once while the launcher goes on
        from beam_embed.pipeline.job.input_fields import with_input_fields
        from beam_embed.pipeline.job.sources import expand_inputs

        run = dataclasses.replace(run, files=tuple(expand_inputs(list(run.settings.input))))
        if is_dask(options):  # a cluster's workers do not share this working folder
            from beam_embed.pipeline.job.resolved import shipped

            run = shipped(run, cluster_path)
        run = with_input_fields(run, run.files)  # checked, and decided where the flags leave them
        created = make_folder(run.output)
    except ValueError as e:  # bad configuration: one line, before any data is read
        return _bad_config(e)
    if is_dask(options):  # every worker sees the output and the model, and the same model
        from beam_embed.pipeline.common.runners.choice import check_cluster

        try:
            check_cluster(options, run.output, run.encoder, run.encoder.fingerprint())
        except ValueError as e:
            if created and not is_remote(run.output) and not os.listdir(run.output):
                os.rmdir(run.output)
            return _bad_config(e)
    code = claimed_run(options, run, argv, settings)
    if code == exits.BAD_CONFIG and created and not is_remote(run.output) \
            and not os.listdir(run.output):  # a refused run leaves nothing behind
        os.rmdir(run.output)
    return code


def claimed_run(options, run, argv: list[str], given=None) -> int:
    """The run, holding the output folder's claim from its last check to the swap. `given`:
    the settings as the user gave them, before the input decided what they left unset (the
    run's first line says which were decided)."""
    from beam_embed.pipeline.common.run_folder.manifest.job import JOB
    from beam_embed.pipeline.common.run_folder.staged_run import OutputRefused, staged_run
    from beam_embed.pipeline.job.input_fields import fields_note
    from beam_embed.pipeline.job.resolved import check_model_limits, workers_run_here

    settings = run.settings
    given = settings if given is None else given
    attempt = None
    if settings.resume:  # the killed run to continue: its staging folder, its run id
        from beam_embed.pipeline.job.resume import claimed_by, find_attempt

        attempt = find_attempt(run.output, claimed_by(run.output, options))
        if attempt is None:
            log(f"--resume: no killed run in {run.output} to continue; starting afresh")
    try:  # checked again under the claim: a run may have finished there since
        with staged_run(run.output, JOB, settings.overwrite, [PROG, *argv], options=options,
                        run_id=attempt and attempt.run_id, resume=settings.resume) as staged:
            try:
                from beam_embed.pipeline.job import resume

                if attempt is not None:  # the same run, before anything is read
                    resume.check_same_run(attempt, run)
                elif not settings.overwrite:
                    resume.refuse_killed_work(run.output)
                from beam_embed.pipeline.job.build import probe_widths

                run = dataclasses.replace(run, widths=probe_widths(
                    run, on_host=not workers_run_here(options)))
                run = check_model_limits(run, run.encoder.max_positions())
                from beam_embed.pipeline.job.build import manifest_base
                from beam_embed.pipeline.job.calibration import vector_storage

                # int8's ranges come last: every refusal before that work
                run = dataclasses.replace(run, stored=vector_storage(run, calibrate=False))
                check_stores(run)  # reached, their tables made, before any data is read
                int8_rerun = settings.overwrite and settings.vector_dtype == "int8"
                base = manifest_base(run) if settings.reuse or int8_rerun else None
                if settings.reuse:  # its shards and settings, now that the model's are final
                    from beam_embed.pipeline.job.reuse import previous_run

                    run = dataclasses.replace(run, previous=previous_run(settings.reuse, base))
                run = dataclasses.replace(run, stored=resume.kept_storage(attempt, run)
                                          if attempt is not None else vector_storage(
                                              run, replaced=base if int8_rerun else None))
            except ValueError as e:  # int8: calibrated, kept from the run it replaces, or
                return _bad_config(e)  # from the killed attempt it continues
            staging = staged.stage(resumed=attempt is not None)
            if attempt is not None:
                run = dataclasses.replace(run, resumed=resume.prepare(attempt))
                resume.say_resuming(run.resumed, run.output)
            else:
                resume.write_record(staging, resume.attempt_record(run, settings.overwrite))
            log(f"embedding {len(run.files)} file(s) with {run.encoder.name} "
                f"(poolings {', '.join(run.encoder.poolings)}{_prompt_note(run.encoder)}) into "
                f"{run.output}"
                f"{fields_note(given, run.settings)}")
            execute(options, run.writing_to(staging))
            if run.previous is not None:  # the rows copied were the run --reuse checked
                run.previous.check_read()
    except OutputRefused as e:
        return _bad_config(e)
    if staged.replaced:
        log(f"replaced the previous run in {run.output} ({len(staged.replaced)} files)")
    if run.resumed is not None:
        from beam_embed.pipeline.job.resume import say_resumed

        say_resumed(run.resumed, run.output)
    from beam_embed.pipeline.job.summary import summarize

    code = summarize(run.output, settings.allow_incomplete_input)
    return load_stores(run, code)


def _prompt_note(spec) -> str:
    """The prompt the run prepends to each text, for its first line ("" when none)."""
    from beam_embed.models.prompts import Chosen, describe

    return f"; {describe(Chosen(spec.prompt, spec.prompt_name))}" if spec.prompt else ""


def check_stores(run) -> None:
    """Each --store reached and its table made or checked with the run's width (its first
    pooling's), or a ValueError naming the first that is not."""
    if not run.settings.store:
        return
    from beam_embed.pipeline.common.stores.bigquery_store import table_schema
    from beam_embed.pipeline.common.stores.load import open_stores
    from beam_embed.pipeline.job.build import output_schema
    from beam_embed.pipeline.job.job_stores import targets

    if targets(run.settings):  # its columns, each a name BigQuery takes
        schema = output_schema(run)
        table_schema(schema.include_text, [c for _, c in schema.metadata()])
    for store in open_stores(targets(run.settings, 1), run.widths[0][1]):
        store.close()


def load_stores(run, code: int) -> int:
    """The published run upserted into each --store; a store that fails leaves the run as it
    is and says how to load it again (exit 1)."""
    from beam_embed.pipeline.job.job_stores import targets

    s = run.settings
    after = targets(s, 1)  # a BigQuery table was written by the job itself
    if not after or code not in (exits.OK, exits.INCOMPLETE_INPUT):
        return code
    from beam_embed.pipeline.common.stores.load import load, open_stores
    from beam_embed.pipeline.common.stores.rows import run_rows

    again = (f"beam-embed store {run.output} {' '.join(t.uri for t in after)}"
             + (f" --store_table {s.store_table}" if s.store_table != "embeddings" else "")
             + (" --store_sync" if s.store_sync else ""))
    try:
        rows = run_rows(run.output, None)
        load(rows, open_stores(after, rows.width), sync=s.store_sync)
    except Exception as e:  # the run is published either way: say how to load it again
        log(f"the run is published in {run.output}, but loading it into the store failed: "
            f"{printable(str(e).splitlines()[0] if str(e) else type(e).__name__)}; load it "
            f"again with: {again}")
        return exits.FAILED
    return code


def execute(options, run) -> None:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import DirectOptions

    from beam_embed.pipeline.common.runners.choice import is_dask, runner_for
    from beam_embed.pipeline.job.build import build_pipeline
    from beam_embed.process.job_process import resume_collector

    resume_collector()

    direct = options.view_as(DirectOptions)
    workers = direct.direct_num_workers or 1
    runner = runner_for(options)  # None (Dataflow, ...) and Dask's spread work over workers
    one_worker = runner is not None and not is_dask(options) and \
        direct.direct_running_mode == "in_memory" and workers == 1
    from beam_embed.pipeline.job.chunking import chunking
    from beam_embed.pipeline.job.input_size import expected_records

    # --reuse copies most rows' vectors without the encoder: its records are no measure there
    expected = 0.0 if run.previous is not None else expected_records(
        run.settings, run.fields(), run.files, run.chunks or chunking(run.settings, run.encoder))
    with _progress(options, expected, run.settings.progress_every), \
            beam.Pipeline(runner=runner, options=options) as p:
        build_pipeline(p, run, workers, spread=not one_worker, expected=expected)
    if is_dask(options):  # a lost worker's steps ran again: their output must add up
        from beam_embed.pipeline.job.complete import check_rows

        check_rows(run.output)


@contextlib.contextmanager
def _progress(options, expected: float, every_s: float):
    """A Dask run's progress line, from the counts its workers post (a local run's workers
    print their own)."""
    from beam_embed.pipeline.common.runners.choice import is_dask

    if not is_dask(options) or every_s <= 0:
        yield
        return
    from beam_embed.pipeline.common.runners.dask.progress import Watch
    from beam_embed.pipeline.common.runners.dask.runner import connect

    client = connect(options, workers=False)
    try:
        with Watch(client, expected, every_s, log):
            yield
    finally:
        client.close()
