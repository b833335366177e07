"""The extras stay inside the ranges Apache Beam supports: pandas 3 breaks Beam 2.77's own
`beam.io.ReadFromCsv`, and the `read` and `dev` extras once let pip install it. Checked against
Beam's installed metadata (its requirements, its `dataframe` extra), and ReadFromCsv run in this
environment, as `make` set it up."""

from __future__ import annotations

import ast
import os
from importlib.metadata import distribution, version

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Every version a range could admit, to compare two ranges without solving them.
VERSIONS = [Version(f"{a}.{b}.{c}") for a in range(4) for b in range(31) for c in range(4)]


def _setup_lists() -> dict[str, list[str]]:
    """setup.py's requirement lists (RUNTIME, READ, DEV, ...), read as written."""
    tree = ast.parse(open(os.path.join(ROOT, "setup.py")).read())
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.List)}


def _beam_ranges() -> dict[str, Requirement]:
    """Beam's own requirements and those of its `dataframe` extra (pandas), by name."""
    ranges = {}
    for line in distribution("apache-beam").requires or ():
        r = Requirement(line)
        if r.marker is None or r.marker.evaluate({"extra": "dataframe"}):
            ranges.setdefault(r.name.lower(), r)
    return ranges


def _ours() -> list[tuple[str, Requirement]]:
    return [(name, Requirement(line)) for name, lines in _setup_lists().items()
            for line in lines]


def test_every_requirement_is_inside_beams_range():
    beam_ranges = _beam_ranges()
    assert "pandas" in beam_ranges  # the dataframe extra's range is read
    outside = []
    for name, ours in _ours():
        theirs = beam_ranges.get(ours.name.lower())
        if theirs is None:
            continue
        pins = [Version(s.version) for s in ours.specifier if s.operator == "=="]
        admitted = pins or [v for v in VERSIONS if v in ours.specifier]
        wrong = [str(v) for v in admitted if v not in theirs.specifier]
        if wrong:
            outside.append(f"{name}: {ours} admits {wrong[0]}, Beam {theirs.specifier}")
    assert not outside, outside


def test_read_extra_pins_pandas_below_2_4():
    read = [Requirement(x) for x in _setup_lists()["READ"]]
    pandas = next(r for r in read if r.name == "pandas")
    assert "2.3.3" in pandas.specifier and "2.4.0" not in pandas.specifier
    assert "3.1.1" not in pandas.specifier


def test_installed_pandas_is_inside_the_pin():
    pandas = next(r for _, r in _ours() if r.name == "pandas")
    installed = version("pandas")
    assert installed in pandas.specifier, (
        f"pandas {installed} is installed, outside the read/dev extras' pin {pandas}, which "
        "Beam's ReadFromCsv needs: reinstall the environment (`rm -rf .venv && make`, or "
        "`make extra EXTRA=read`)")


@pytest.mark.pipeline
def test_read_from_csv_runs_here(tmp_path):
    """Beam's ReadFromCsv, in this environment: what pandas 3 broke."""
    path = tmp_path / "corpus.csv"
    path.write_text('doc_id,title,body\nd1,One,"first, with a comma"\nd2,Two,second\n')
    with beam.Pipeline(runner="DirectRunner") as p:
        rows = (p | beam.io.ReadFromCsv(str(path))
                | beam.Map(lambda r: (r.doc_id, r.title, r.body)))
        assert_that(rows, equal_to([("d1", "One", "first, with a comma"),
                                    ("d2", "Two", "second")]))
