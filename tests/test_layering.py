"""Plain `lint-imports` from the repository root checks the mapped packages too.

grimp alone would see beam_embed/ only (pipeline/ and models/ are mapped in by setup.py), and a
contract about modules it never read passes whatever they import. These run the command as a
user does, on .importlinter's own settings with one contract added that today's imports break.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINT_IMPORTS = os.path.join(os.path.dirname(sys.executable), "lint-imports")


def _lint(tmp_path, contract: dict[str, str]) -> subprocess.CompletedProcess:
    """lint-imports from the repository root with .importlinter's settings and `contract` alone."""
    ours = configparser.ConfigParser()
    ours.read(os.path.join(REPO, ".importlinter"))
    config = configparser.ConfigParser()
    config["importlinter"] = ours["importlinter"]
    config["importlinter:contract:probe"] = {"name": "probe", **contract}
    path = tmp_path / "probe.ini"
    with open(path, "w") as f:
        config.write(f)
    return subprocess.run([LINT_IMPORTS, "--config", str(path), "--no-cache", "--no-logo"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_the_repository_keeps_its_contracts():
    done = subprocess.run([LINT_IMPORTS, "--no-cache", "--no-logo"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    ours = configparser.ConfigParser()
    ours.read(os.path.join(REPO, ".importlinter"))
    contracts = [name for name in ours.sections() if name.startswith("importlinter:contract:")]
    assert f"{len(contracts)} kept, 0 broken" in done.stdout


@pytest.mark.parametrize("importer, imported", [
    ("beam_embed.pipeline.cli", "beam_embed.process"),      # pipeline/ -> beam_embed/
    ("beam_embed.pipeline.common", "beam_embed.models"),    # pipeline/ -> models/
    ("beam_embed.models", "beam_embed.process"),            # models/ -> beam_embed/
])
def test_an_import_from_a_mapped_folder_breaks_a_contract(tmp_path, importer, imported):
    done = _lint(tmp_path, {"type": "installed_forbidden", "source_modules": importer,
                            "forbidden_modules": imported})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "probe BROKEN" in done.stdout
    assert f"{importer} is not allowed to import {imported}" in done.stdout


def test_layers_are_checked_in_the_mapped_folders(tmp_path):
    # models/ above pipeline/: every import of the models by the job breaks it.
    done = _lint(tmp_path, {"type": "installed_layers",
                            "layers": "beam_embed.models\nbeam_embed.pipeline.common"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "beam_embed.pipeline.common is not allowed to import beam_embed.models" in done.stdout
