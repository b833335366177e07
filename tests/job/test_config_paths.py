"""A --config file's staged-file keys (setup_file, requirements_file, extra_package) are read
from the config file's folder, so a config works whatever folder the command runs in."""

from __future__ import annotations

import os

from beam_embed.pipeline.job.argv import config_argv
from beam_embed.pipeline.job.beam_options import beam_flags

KNOWN = beam_flags()[1]


def _write(folder, text: str) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "job.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def test_relative_staged_files_are_read_beside_the_config(tmp_path):
    cfg = _write(tmp_path / "repo" / "configs", "setup_file: ../setup.py\n"
                 "requirements_file: reqs.txt\nextra_package: [../dist/a.tar.gz, b.whl]\n")
    argv = config_argv(cfg, KNOWN)
    configs = str(tmp_path / "repo" / "configs")
    assert argv == ["--setup_file", str(tmp_path / "repo" / "setup.py"),
                    "--requirements_file", os.path.join(configs, "reqs.txt"),
                    "--extra_package", str(tmp_path / "repo" / "dist" / "a.tar.gz"),
                    "--extra_package", os.path.join(configs, "b.whl")]


def test_a_list_of_extra_packages_repeats_the_flag(tmp_path):
    cfg = _write(tmp_path / "c", "extra_packages: [/a.whl, gs://b/c.whl]\n")
    assert config_argv(cfg, KNOWN) == ["--extra_packages", "/a.whl",
                                       "--extra_packages", "gs://b/c.whl"]


def test_absolute_remote_and_other_paths_are_kept(tmp_path):
    cfg = _write(tmp_path / "c", "setup_file: /abs/setup.py\nextra_package: gs://b/p.tar.gz\n"
                 "input: [corpus/*.txt]\noutput: out\n")
    assert config_argv(cfg, KNOWN) == ["--setup_file", "/abs/setup.py",
                                       "--extra_package", "gs://b/p.tar.gz",
                                       "--input", "corpus/*.txt", "--output", "out"]


def test_a_relative_config_path_resolves_from_the_current_folder(tmp_path, monkeypatch):
    _write(tmp_path / "configs", "setup_file: ../setup.py\n")
    monkeypatch.chdir(tmp_path)
    argv = config_argv(os.path.join("configs", "job.yaml"), KNOWN)
    assert argv == ["--setup_file", str(tmp_path / "setup.py")]
