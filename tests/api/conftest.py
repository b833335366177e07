"""The `run` command's output for the API tests' corpus (tests/api/helpers.py), the reference
the API's results are compared with."""

from __future__ import annotations

import pytest

from tests.api.helpers import RUN_FLAGS, write_jsonl


@pytest.fixture(scope="session")
def reference_run(tiny_export, tmp_path_factory):
    """(the run's folder, its manifest) for the corpus, embedded by `beam-embed run`."""
    from tests.job_helpers import run_job

    folder = tmp_path_factory.mktemp("reference")
    corpus = write_jsonl(str(folder / "corpus.jsonl"))
    out = str(folder / "run")
    return out, run_job(out, "--input", corpus, "--model", tiny_export, *RUN_FLAGS)
