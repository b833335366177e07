"""The README's "Reading the output" snippets run against a real job output."""

from __future__ import annotations

import json
import re

import pytest

from tests.job_helpers import run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

TEXTS = ["the cat sat on the mat", "a dog ran", "the river bank", "money is big", "play"]
EXPECTED = ["(5, 8)", "the cat sat on the mat", "(5, 8)"]  # something each snippet prints


def _snippets() -> list[str]:
    with open("README.md", encoding="utf-8") as f:
        readme = f.read()
    section = readme.split("## Reading the output", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.fixture(scope="module")
def output(tiny_export, tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    corpus = write_lines(str(d / "c.jsonl"), [
        json.dumps({"id": f"r{i}", "text": t, "topic": "x"}) for i, t in enumerate(TEXTS)])
    run_job(str(d / "out"), "--input", corpus, "--model", tiny_export, "--id_field", "id",
            "--metadata_fields", "topic", "--pooling", "mean")
    return str(d / "out")


def test_readme_has_the_three_readers():
    assert len(_snippets()) == len(EXPECTED)


@pytest.mark.parametrize("index", range(len(EXPECTED)))
def test_snippet_runs(output, index, capsys):
    exec(compile(_snippets()[index], f"README snippet {index}", "exec"), {"OUTPUT": output})
    assert EXPECTED[index] in capsys.readouterr().out
