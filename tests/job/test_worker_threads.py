"""A worker process's TensorFlow pools are sized in one place (beam_embed.pipeline.job.threads):
the launcher's resolve and early warm-up, the Python API's transform and a Dask worker loading
the model all take its answer, and only configure_threads applies one."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from beam_embed.models.spec import EncoderSpec
from beam_embed.pipeline.job.beam_options import parse
from beam_embed.pipeline.job.embed import EncoderHandler
from beam_embed.pipeline.job.threads import worker_threads

ROOT = Path(__file__).resolve().parents[2]
SPEC = EncoderSpec(kind="bert", encoder="unused", preprocessor=None, max_seq_length=8,
                   poolings=("mean",), normalize=False, long_text="truncate")


def test_each_runner_gets_its_pools():
    cores = os.cpu_count() or 1
    multi = parse(["--direct_num_workers=2", "--direct_running_mode=multi_processing"])
    assert worker_threads(multi) == (max(cores // 2, 1), 1)  # two processes split the cores
    assert worker_threads(parse(["--direct_num_workers=2"])) == (0, 0)  # threads share one TF
    assert worker_threads(parse([])) == worker_threads() == (0, 0)  # one process: TF's default
    assert worker_threads(parse(["--runner=DataflowRunner"])) == (1, 1)  # a process per vCPU
    assert worker_threads(parse(["--runner=DataflowRunner",
                                 "--experiments=no_use_multiple_sdk_containers"])) == (0, 0)
    # a Dask launch leaves them to its workers, each of which knows its share of its machine
    assert worker_threads(parse(["--runner=DaskRunner"])) == (0, 0)
    assert worker_threads(parse(["--runner=DaskRunner"]), dask_worker_cores=3) == (3, 3)


def test_a_dask_worker_sizes_the_spec_it_loads_with_the_same_answer(monkeypatch):
    from beam_embed.pipeline.common.runners.dask import cores

    monkeypatch.setattr(cores, "worker_cores", lambda: 3)
    here = EncoderHandler(SPEC)._spec_here()
    assert (here.intra_op_threads, here.inter_op_threads) == worker_threads(dask_worker_cores=3)
    assert _other_fields(here) == _other_fields(SPEC)
    monkeypatch.setattr(cores, "worker_cores", lambda: None)  # not a Dask worker: as launched
    assert EncoderHandler(SPEC)._spec_here() is SPEC


def _other_fields(spec: EncoderSpec) -> dict:
    fields = dict(vars(spec))
    del fields["intra_op_threads"], fields["inter_op_threads"]
    return fields


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return names


def test_the_pools_are_decided_by_worker_threads_and_set_by_configure_threads_only():
    sizers = ["pipeline/job/resolved.py", "pipeline/job/warm_start.py", "pipeline/job/embed.py",
              "beam_embed/api/embed_texts.py"]
    for name in sizers:
        assert "worker_threads" in _calls(ROOT / name), name
    setters = {"set_intra_op_parallelism_threads", "set_inter_op_parallelism_threads"}
    sources = [*ROOT.glob("pipeline/**/*.py"), *ROOT.glob("models/**/*.py"),
               *ROOT.glob("beam_embed/**/*.py")]
    setting = {str(p.relative_to(ROOT)) for p in sources if _calls(p) & setters}
    assert setting == {"models/embedder.py"}  # configure_threads
    deciding = {str(p.relative_to(ROOT)) for p in sources
                if "cpu_count" in _calls(p) and "intra_op" in p.read_text()}
    assert deciding <= {"pipeline/job/threads.py", "models/embedder.py"}  # embedder: lanes only
