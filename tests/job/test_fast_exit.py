"""`python -m beam_embed.pipeline.run` ends with os._exit after flushing (beam_embed.process.exits.exit_now):
no line is lost, the exit code is the command's, and a run unwound by SIGTERM ends too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from beam_embed.process import exits
from tests.job_helpers import write_lines

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_exit_now_flushes_buffered_output_and_logging_and_keeps_the_code(tmp_path):
    log_file = tmp_path / "log.txt"
    script = ("import logging, sys\n"
              f"logging.basicConfig(filename={str(log_file)!r}, level=logging.INFO)\n"
              "logging.info('logged line')\n"
              "print('first line'); sys.stdout.write('no newline')\n"
              "sys.stderr.write('to stderr')\n"
              "from beam_embed.process.exits import exit_now\n"
              "exit_now(3)\n"
              "print('never printed')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (3, "first line\nno newline", "to stderr")
    assert "logged line" in log_file.read_text()
    done = subprocess.run([sys.executable, "-c", "from beam_embed.process.exits import exit_now\n"
                           "exit_now(None)"], cwd=ROOT, env=ENV, timeout=120)
    assert done.returncode == exits.OK


def test_exit_now_runs_the_atexit_handlers_libraries_clean_up_in(tmp_path):
    made = tmp_path / "generated.py"  # as TensorFlow's autograph leaves its modules
    script = ("import atexit, os\n"
              f"open({str(made)!r}, 'w').close()\n"
              f"atexit.register(os.remove, {str(made)!r})\n"
              "atexit.register(print, 'handler ran')\n"
              "from beam_embed.process.exits import exit_now\n"
              "exit_now(4)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout) == (4, "handler ran\n")
    assert not made.exists()


@pytest.mark.parametrize("raised, code, err", [(143, 143, ""), (None, exits.OK, ""),
                                               ("'stopped'", exits.FAILED, "stopped\n")])
def test_exit_after_ends_on_a_system_exit_without_waiting_for_threads(raised, code, err):
    script = ("import threading, time\n"
              "threading.Thread(target=time.sleep, args=(600,)).start()  # not a daemon\n"
              "from beam_embed.process.exits import exit_after\n"
              "def command():\n"
              f"    raise SystemExit({raised})\n"
              "exit_after(command)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stderr) == (code, err)


@pytest.mark.pipeline
def test_a_finished_run_keeps_its_exit_code_summary_and_outputs(tiny_export, tmp_path):
    corpus = write_lines(str(tmp_path / "empty.txt"), ["", "  "])
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "beam_embed.pipeline.run", "--input", corpus, "--model", tiny_export,
         "--output", str(out), "--progress_every", "0"], cwd=ROOT, env=ENV, capture_output=True,
        text=True, timeout=600)
    assert done.returncode == exits.NOTHING_EMBEDDED, done.stderr[-2000:]
    assert "nothing was embedded" in done.stderr.strip().splitlines()[-1]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["skipped_empty"] == 2 and manifest["counts"]["embedded"] == 0
    assert not [p for p in os.listdir(out) if p.startswith((".beam-embed", "beam-temp"))]


# the `beam-embed` console script's entry, with exit_now reporting what the process imported
ENTRY = ("import sys\n"
         "from beam_embed.process import exits\n"
         "real = exits.exit_now\n"
         "def exit_now(code):\n"
         "    print('pandas imported:', 'pandas' in sys.modules, file=sys.stderr)\n"
         "    print('refusing:', any(type(f).__name__ == '_Refuse' for f in sys.meta_path),\n"
         "          file=sys.stderr)\n"
         "    print('other runners clients imported:', any(m in sys.modules for m in\n"
         "          ('google.cloud.dataflow', 'apache_beam.io.gcp.bigquery')), file=sys.stderr)\n"
         "    real(code)\n"
         "exits.exit_now = exit_now\n"
         "from beam_embed.pipeline.cli import entry\n"
         "sys.argv = ['beam-embed', *sys.argv[1:]]\n"
         "entry()\n")


@pytest.mark.pipeline
def test_beam_embed_run_ends_without_teardown_and_never_imports_pandas(tiny_export, tmp_path):
    """Neither Beam nor pyarrow is handed a pandas object in a job, so its process does not
    import pandas; the output is the same as a run in a process that has pandas."""
    import pyarrow.parquet as pq

    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat", "a dog ran", "sat"])
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, "run", "--input", corpus, "--model", tiny_export,
         "--output", str(out), "--progress_every", "0"], cwd=ROOT, env=ENV, capture_output=True,
        text=True, timeout=600)
    assert done.returncode == exits.OK, done.stderr[-2000:]
    assert "pandas imported: False" in done.stderr and "refusing: True" in done.stderr
    # a local run (only the job's own flags) leaves out what other runners and IOs need
    assert "other runners clients imported: False" in done.stderr
    import pandas  # noqa: F401 - this process has it

    from beam_embed.pipeline.job.command import main

    assert main(["--input", corpus, "--model", tiny_export, "--output", str(tmp_path / "lib"),
                 "--progress_every", "0"]) == exits.OK
    tables = [pq.read_table(next(p.glob("embeddings-*.parquet"))).sort_by("id")
              for p in (out, tmp_path / "lib")]
    assert tables[0].num_rows == 3 and tables[0].equals(tables[1])


def test_other_commands_keep_pandas(tmp_path):
    """Only a `run` process refuses pandas (pca's plots use it); a pandas already imported is
    kept."""
    done = subprocess.run([sys.executable, "-c", ENTRY, "--version"], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == exits.OK and "refusing: False" in done.stderr, done.stderr
    script = ("import pandas\n"
              "from beam_embed.process.job_process import refuse_unused_imports\n"
              "refuse_unused_imports()\n"
              "import pandas.api.types\n"
              "print(pandas.api.types.is_integer(1))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr[-2000:]


def test_only_a_local_run_refuses_the_clients_of_other_runners(tmp_path):
    """Beam imports Dataflow's client and BigQuery's IO when they are not refused (the process
    of a run with Beam's own flags); a local run's process goes on without them, gs:// paths
    still readable."""
    script = ("import sys\n"
              "from beam_embed.process.job_process import refuse_unused_imports\n"
              "refuse_unused_imports(local=sys.argv[1] == 'local')\n"
              "import apache_beam\n"
              "from apache_beam.io.filesystems import FileSystems\n"
              "print([m in sys.modules for m in ('google.cloud.dataflow',\n"
              "       'apache_beam.io.gcp.bigquery', 'pandas')], FileSystems.get_filesystem(\n"
              "       'gs://bucket/x').scheme())\n")
    seen = {}
    for mode in ("local", "other"):
        done = subprocess.run([sys.executable, "-c", script, mode], cwd=ROOT, env=ENV,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        seen[mode] = done.stdout.strip()
    assert seen == {"local": "[False, False, False] gs", "other": "[True, True, False] gs"}
