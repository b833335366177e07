"""One run per output folder: of runs started at once exactly one gets the claim; a second is
told who holds it; a killed run's claim is taken over only with --overwrite."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

import pytest
from google.api_core.exceptions import NotFound, PreconditionFailed

from beam_embed.pipeline.common.run_folder.claim import CLAIM, Holder, OutputBusy, claim_output
from beam_embed.pipeline.common.run_folder.claim_stores import _GcsStore
from beam_embed.process import exits


def _try_claim(args) -> bool:
    folder, barrier = args
    barrier.wait()  # every process starts its attempt at the same moment
    try:
        claim_output(folder, False, ["worker"])  # kept: the process exits holding it
        return True
    except OutputBusy:
        return False


def test_of_runs_started_at_once_exactly_one_gets_the_claim(tmp_path):
    ctx = multiprocessing.get_context("fork")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(8)
        with ctx.Pool(8) as pool:
            won = pool.map(_try_claim, [(str(tmp_path), barrier)] * 8)
    assert sorted(won) == [False] * 7 + [True]


def test_second_run_is_refused_naming_the_holder_until_released(tmp_path):
    first = claim_output(str(tmp_path), False, ["beam-embed", "run", "--output", "x"])
    with pytest.raises(OutputBusy) as busy:
        claim_output(str(tmp_path), True, ["beam-embed", "run"])  # --overwrite: still refused
    message = str(busy.value)
    assert busy.value.code == exits.OUTPUT_BUSY and "\n" not in message
    assert f"run {first.run_id} (pid {os.getpid()} on " in message and "in use" in message
    recorded = json.loads((tmp_path / CLAIM).read_text())
    assert recorded["run_id"] == first.run_id and recorded["command"].endswith("--output x")
    first.release()
    assert not (tmp_path / CLAIM).exists()
    with claim_output(str(tmp_path), False, ["again"]) as again:
        assert again.run_id != first.run_id
    assert not (tmp_path / CLAIM).exists()


def _dead_holder(folder) -> Holder:
    """A claim written by a process that has exited, as a killed run leaves it."""
    code = (f"from beam_embed.pipeline.common.run_folder.claim import claim_output; "
            f"c = claim_output({str(folder)!r}, False, ['killed']); print(c.run_id)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    holder = Holder.parse((folder / CLAIM).read_bytes())
    assert holder.run_id == out.stdout.strip() and holder.alive() is False
    return holder


def test_killed_runs_claim_is_taken_over_only_with_overwrite(tmp_path):
    dead = _dead_holder(tmp_path)
    with pytest.raises(OutputBusy) as busy:
        claim_output(str(tmp_path), False, ["next"])
    assert f"run {dead.run_id}" in str(busy.value) and "no longer running" in str(busy.value)
    assert "--overwrite" in str(busy.value)
    with claim_output(str(tmp_path), True, ["next"]) as claim:
        assert Holder.parse((tmp_path / CLAIM).read_bytes()).run_id == claim.run_id
        assert claim.taken_over == dead.run_id  # its staging folder is a run's to remove
    assert not (tmp_path / CLAIM).exists()


def test_holder_on_another_host_may_be_alive():
    other = Holder("abc", "some-other-host", 1, None, "u", "t", "c")
    assert other.alive() is None
    assert Holder.parse(b"not json").run_id == "unknown"  # an unreadable claim still blocks


class _Blob:
    def __init__(self, bucket, name):
        self.bucket, self.name, self.generation = bucket, name, None

    def upload_from_string(self, data, content_type=None, if_generation_match=None):
        current = self.bucket.objects.get(self.name)
        if if_generation_match is not None and (current[1] if current else 0) != if_generation_match:
            raise PreconditionFailed("precondition")
        self.bucket.generation += 1
        self.generation = self.bucket.generation
        self.bucket.objects[self.name] = (data, self.generation)

    def download_as_bytes(self, if_generation_match=None):
        data, generation = self.bucket.objects[self.name]
        if if_generation_match is not None and generation != if_generation_match:
            raise PreconditionFailed("precondition")
        return data


class _Bucket:
    """Cloud Storage's object generations and preconditions, as its JSON API documents them."""

    def __init__(self):
        self.objects, self.generation = {}, 1000

    def blob(self, name):
        return _Blob(self, name)

    def get_blob(self, name):
        if name not in self.objects:
            return None
        blob = _Blob(self, name)
        blob.generation = self.objects[name][1]
        return blob

    def delete_blob(self, name, if_generation_match=None):
        if name not in self.objects:
            raise NotFound("gone")
        if if_generation_match is not None and self.objects[name][1] != if_generation_match:
            raise PreconditionFailed("precondition")
        del self.objects[name]


class _Client:
    def __init__(self):
        self.buckets = {}

    def bucket(self, name):
        return self.buckets.setdefault(name, _Bucket())


def test_gcs_claim_uses_generation_preconditions():
    client = _Client()
    folder = "gs://bucket/embeddings/run1"
    store = lambda: _GcsStore(folder, client)  # noqa: E731  (each run its own store)
    first = claim_output(folder, False, ["first"], store())
    objects = client.buckets["bucket"].objects
    assert list(objects) == [f"embeddings/run1/{CLAIM}"]
    with pytest.raises(OutputBusy):  # same host, this live process: refused
        claim_output(folder, True, ["second"], store())
    # the holder "runs elsewhere": --overwrite replaces exactly the generation it read
    data, generation = objects[f"embeddings/run1/{CLAIM}"]
    moved = json.loads(data)
    moved["host"] = "elsewhere"
    objects[f"embeddings/run1/{CLAIM}"] = (json.dumps(moved).encode(), generation)
    with pytest.raises(OutputBusy) as busy:
        claim_output(folder, False, ["second"], store())
    assert "may still be running on elsewhere" in str(busy.value)
    second = claim_output(folder, True, ["second"], store())
    assert json.loads(objects[f"embeddings/run1/{CLAIM}"][0])["run_id"] == second.run_id
    first.release()  # its generation is gone: the new holder's claim stays
    assert json.loads(objects[f"embeddings/run1/{CLAIM}"][0])["run_id"] == second.run_id
    second.release()
    assert not objects
