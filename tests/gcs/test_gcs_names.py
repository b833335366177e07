"""gs:// paths as they are named (a Cloud Storage emulator): a bucket that does not exist, named to
`run` (input or output), `search` and `pca`, is one line naming it, exit 2, nothing made; an
object named by two patterns is read once."""

from __future__ import annotations

import pytest

from beam_embed.pipeline.cli import main as cli
from tests.job_helpers import run_job

pytestmark = pytest.mark.pipeline  # whole commands, end to end

MISSING = "gs://no-such-bucket"


def _refused(capsys, command: str, *args: str) -> str:
    code = cli([command, *args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith(f"beam-embed {command}: ")]
    assert len(lines) == 1, err
    return lines[0].removeprefix(f"beam-embed {command}: ")


@pytest.mark.parametrize("pattern", [f"{MISSING}/in/*.jsonl", f"{MISSING}/in/a.jsonl"])
def test_an_input_in_a_missing_bucket_is_refused_before_the_output_folder(
        gcs, tiny_export, tmp_path, capsys, pattern):
    out = tmp_path / "out"
    line = _refused(capsys, "run", "--input", pattern, "--model", tiny_export, "--output",
                    str(out), "--progress_every", "0")
    assert line == f"--input '{pattern}': the bucket 'no-such-bucket' does not exist; check its name"
    assert not out.exists()


def test_an_output_in_a_missing_bucket_is_refused(gcs, tiny_export, tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\n")
    line = _refused(capsys, "run", "--input", str(corpus), "--model", tiny_export, "--output",
                    f"{MISSING}/out", "--progress_every", "0")
    assert line == f"'{MISSING}/out': the bucket 'no-such-bucket' does not exist; check its name"


@pytest.mark.parametrize("command, args", [
    ("search", [f"{MISSING}/run", "the cat"]),
    ("pca", ["--input", f"{MISSING}/run", "--output", "VIZ"])])
def test_readers_name_the_missing_bucket(gcs, tmp_path, capsys, command, args):
    args = [str(tmp_path / "viz") if a == "VIZ" else a for a in args]
    line = _refused(capsys, command, *args)
    assert line == f"'{MISSING}/run': the bucket 'no-such-bucket' does not exist; check its name"
    assert not (tmp_path / "viz").exists()


def test_a_folder_of_an_existing_bucket_still_holds_no_manifest(gcs, capsys):
    line = _refused(capsys, "search", gcs.path("never-written"), "the cat")
    assert line.startswith(f"no manifest.json in '{gcs.path('never-written')}'")


def test_an_object_named_by_two_patterns_is_read_once(gcs, tiny_export, tmp_path):
    gcs.upload("in/a.jsonl", '{"text": "the cat sat"}\n{"text": "a dog"}\n')
    gcs.upload("in/b.jsonl", '{"text": "the mat"}\n')
    manifest = run_job(str(tmp_path / "out"), "--input", gcs.path("in/*.jsonl"), "--input",
                       gcs.path("in/a.jsonl"), "--model", tiny_export)
    assert (manifest["counts"]["read"], manifest["inputs"]["files"]) == (3, 2)
