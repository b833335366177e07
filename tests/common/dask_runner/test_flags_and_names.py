"""`--runner DaskRunner` and Beam's Dask flags as the commands take them: the flags pass through
`run` and `pca` (a misspelled one is one line with a hint), Beam's DaskOptions are imported only
when a Dask flag is given (their import loads dask.distributed), and every name of a Dask runner
gets the project's."""

from __future__ import annotations

import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_embed.pipeline.cli import main
from beam_embed.pipeline.common.runners.choice import check_runner, is_dask, runner_for

DASK_ARGS = ["--runner", "DaskRunner", "--dask_client_address", "tcp://10.0.0.1:8786",
             "--dask_npartitions", "4"]


def test_dask_flags_pass_through_run_and_pca():
    from beam_embed.pipeline.job.beam_options import parse
    from beam_embed.pipeline.pca.command import parse_args

    options = parse(DASK_ARGS).get_all_options()
    assert (options["runner"], options["address"], options["npartitions"]) == \
        ("DaskRunner", "tcp://10.0.0.1:8786", 4)
    assert parse_args(["--input", "in", "--output", "out", *DASK_ARGS])[1] == DASK_ARGS


def test_a_misspelled_dask_flag_is_one_line_with_a_hint(capsys):
    assert main(["run", "--runner", "DaskRunner", "--dask_client_adress", "tcp://h:1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean --dask-client-address" in err, err


@pytest.mark.parametrize("argv, imported", [(["--direct_num_workers", "2"], False),
                                            (["--dask_npartitions", "2"], True)])
def test_daskoptions_are_imported_only_for_a_dask_flag(argv, imported):
    script = ("import sys\n"
              "from beam_embed.pipeline.common.settings.command_line import check_beam_args\n"
              f"check_beam_args({argv!r}, set(), 'p')\n"
              "print('distributed' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == [str(imported)]


@pytest.mark.parametrize("name", ["DaskRunner", "dask", "daskrunner",
                                  "apache_beam.runners.dask.dask_runner.DaskRunner"])
def test_every_name_of_a_dask_runner_gets_the_projects(name):
    from beam_embed.pipeline.common.runners.dask.runner import DaskRunner

    options = PipelineOptions(["--runner", name])
    assert is_dask(options) and type(runner_for(options)) is DaskRunner


def test_other_runners_need_no_scheduler():
    for argv in ([], ["--runner", "DirectRunner"], ["--runner", "DataflowRunner"]):
        options = PipelineOptions(argv)
        assert not is_dask(options)
        check_runner(options)  # contacts nothing, raises nothing
