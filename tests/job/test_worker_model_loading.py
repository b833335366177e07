"""Model loading as a Dataflow worker does it: a handle on a remote filesystem that TensorFlow
reads itself (`ram://` here; gs:// handles are read from a local copy, models/gcs_copy.py, and
tests/gcs/ runs them), loaded once per process and shared by threads."""

from __future__ import annotations

import json
import os
import threading

import pytest
import tensorflow as tf

from beam_embed.models.spec import EncoderSpec
from beam_embed.pipeline.job.embed import EncoderHandler
from tests.job_helpers import run_job

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

THREADS = 3


def copy_tree(src: str, dst: str) -> str:
    """A local folder onto any TensorFlow filesystem (`gsutil cp -r`, for `ram://`)."""
    for root, _, files in tf.io.gfile.walk(src):
        rel = os.path.relpath(root, src)
        target = dst if rel == "." else f"{dst}/{rel}"
        tf.io.gfile.makedirs(target)
        for name in files:
            tf.io.gfile.copy(os.path.join(root, name), f"{target}/{name}", overwrite=True)
    return dst


def test_remote_handle_loads_once_per_process_for_all_threads(tiny_export, tmp_path,
                                                               monkeypatch):
    handle = copy_tree(tiny_export, "ram://beam-embed-tests/tiny-export")
    builds, inference_threads, lock = [], set(), threading.Lock()
    real_build, real_run = EncoderSpec.build, EncoderHandler.run_inference

    def counting_build(self):
        with lock:
            builds.append(threading.get_ident())
        return real_build(self)

    def recording_run(self, batch, model, inference_args=None):
        with lock:
            inference_threads.add(threading.get_ident())
        return real_run(self, batch, model, inference_args)

    monkeypatch.setattr(EncoderSpec, "build", counting_build)
    monkeypatch.setattr(EncoderHandler, "run_inference", recording_run)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"r{i}", "text": f"the cat sat {i}"}) + "\n"
                              for i in range(60)))
    manifest = run_job(str(tmp_path / "out"), "--input", str(corpus), "--id_field", "id",
                       "--model", handle, "--max_batch_size", "2", "--format", "parquet",
                       "--direct_running_mode", "multi_threading",
                       "--direct_num_workers", str(THREADS))
    assert manifest["counts"]["embedded"] == 60
    assert manifest["model"]["encoder"] == f"{handle}/encoder"
    # the launcher's check, then one copy for the worker process, whatever its threads
    assert len(inference_threads) > 1  # records are reshuffled over the THREADS workers
    assert len(builds) == 2, f"{len(builds)} loads from {len(inference_threads)} threads"
