"""benchmarks/dask_cluster.py's quick mode runs (its full mode is run by hand on a quiet
machine): the script cannot break unseen, and what it reports is there and adds up."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pipeline  # whole jobs, end to end

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                      "dask_cluster.py")


def test_the_quick_mode_runs_and_reports_where_the_dask_run_goes(tiny_export, tmp_path):
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, SCRIPT, "--quick", "--model", tiny_export, "--json",
                           str(out)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["sentences"] == 300 and result["rounds"] == 1
    local, dask = result["runs"]["local"][0], result["runs"]["dask"][0]
    assert local["embedded"] == dask["embedded"] == 300
    ratio = result["dask_over_local_throughput"]["median"]
    assert ratio == pytest.approx(dask["records_per_s"] / local["records_per_s"], abs=1e-3)
    assert result["vectors"]["rows"] == 300 and result["vectors"]["min_cosine"] >= 0.99999
    where = result["where_the_dask_run_goes"]
    assert len(where["compute_s_per_worker"]) == 2  # both workers ran tasks
    assert 0 < where["encoder_s"] <= where["compute_s"]
    assert where["tasks"] > 0 and where["task_span_s"] <= dask["pipeline_s"]
    assert "Dask/local" in done.stdout
