"""A run flag is one field of RunSettings plus its use: a setting added by this test alone is
listed by `--help`, read from the command line (either spelling, through Beam's parser too) and
from `--config`, checked before anything is read, and reaches the job the pipeline is built
from, with no other module changed."""

from __future__ import annotations

import dataclasses

import pytest

from beam_embed.pipeline.common.settings.setting_fields import flag, setting
from beam_embed.pipeline.job import build, settings
from beam_embed.pipeline.job.command import main
from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs


def _at_least_3(name: str, value: int) -> None:
    if value < 3:
        raise ValueError(f"{flag(name)} must be at least 3, got {value}")


@dataclasses.dataclass(frozen=True)
class WithMinChars(settings.RunSettings):
    min_chars: int = setting(3, check=_at_least_3, help="the shortest text worth embedding")


@pytest.fixture
def built(monkeypatch):
    """The settings each job's pipeline is built from, with the extra setting declared."""
    monkeypatch.setattr(settings, "RunSettings", WithMinChars)
    seen, real = [], build.build_pipeline

    def recorded(p, run, *args, **kwargs):
        seen.append(run.settings)
        return real(p, run, *args, **kwargs)

    monkeypatch.setattr(build, "build_pipeline", recorded)
    return seen


@pytest.fixture
def corpus(tmp_path):
    return write_lines(str(tmp_path / "c.txt"), ["the cat sat", "a dog ran"])


def test_help_lists_the_new_flag(built, capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--min-chars MIN_CHARS" in out
    assert "the shortest text worth embedding (default: 3)" in out


def test_the_command_line_and_the_config_reach_the_job(built, tiny_export, corpus, tmp_path):
    args = ["--input", corpus, "--model", tiny_export, "--format", "parquet"]
    run_job(str(tmp_path / "a"), *args, "--min-chars", "5")  # the plain case
    run_job(str(tmp_path / "b"), *args, "--min_chars", "6", "--runner", "DirectRunner")
    config = tmp_path / "job.yaml"
    config.write_text("min_chars: 7\n")
    manifest = run_job(str(tmp_path / "c"), "--config", str(config), *args)
    assert [s.min_chars for s in built] == [5, 6, 7]
    assert all(isinstance(s, WithMinChars) for s in built)
    assert manifest["counts"]["embedded"] == 2


@pytest.mark.parametrize("given", [["--min-chars", "2"], ["--min-chars", "2", "--runner",
                                                          "DirectRunner"], ["CONFIG"]])
def test_a_bad_value_is_refused_before_anything_is_read(given, built, tmp_path, capsys):
    config = tmp_path / "job.yaml"
    config.write_text("min_chars: 2\n")
    given = ["--config", str(config)] if given == ["CONFIG"] else given
    out = tmp_path / "out"
    code = main(["--input", str(tmp_path / "missing.txt"), "--output", str(out), *given])
    err = capsys.readouterr().err
    assert code == 2 and err == "beam-embed run: --min_chars must be at least 3, got 2\n"
    assert not out.exists() and built == []


def test_python_callers_get_the_same_check():
    assert WithMinChars(min_chars=4, pooling="mean").min_chars == 4
    with pytest.raises(ValueError, match="--min_chars must be at least 3, got 1"):
        WithMinChars(min_chars=1)
