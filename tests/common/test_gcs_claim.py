"""The claim on a gs:// output folder through the production client (google-cloud-storage over
HTTP, as store_for makes it) against a fake Cloud Storage that honours ifGenerationMatch
(tests/fake_gcs.py; the emulator ignores preconditions): of claims made at once exactly one
wins, a killed run's claim is taken over only with --overwrite and by one run, and a release
never deletes a claim that replaced its own."""

from __future__ import annotations

import json
import socket
import subprocess
import threading

import pytest

from beam_embed.pipeline.common.run_folder.claim import Holder, OutputBusy, claim_output
from beam_embed.pipeline.common.run_folder.claim_stores import CLAIM
from beam_embed.process import gcs_auth
from tests.fake_gcs import FakeGcs

FOLDER = "gs://bkt/runs/out"
NAME = f"runs/out/{CLAIM}"
THREADS = 6


@pytest.fixture
def fake(monkeypatch):
    with FakeGcs() as server:
        monkeypatch.setenv(gcs_auth.EMULATOR_ENV, server.url)
        gcs_auth.install()  # anonymous, as the commands' processes have it
        yield server


def _at_once(overwrite: bool) -> tuple[list, list[str]]:
    """THREADS claims of FOLDER started at the same moment: (claims won, refusals)."""
    barrier, won, refused, lock = threading.Barrier(THREADS), [], [], threading.Lock()

    def attempt(i):
        barrier.wait()
        try:
            claim = claim_output(FOLDER, overwrite, [f"run {i}"])
            with lock:
                won.append(claim)
        except OutputBusy as e:
            with lock:
                refused.append(str(e))

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return won, refused


def _holder(fake: FakeGcs) -> Holder:
    return Holder.parse(fake.objects[("bkt", NAME)][1])


def test_of_claims_started_at_once_exactly_one_wins_even_with_overwrite(fake):
    won, refused = _at_once(overwrite=True)  # a live holder is never taken over
    assert len(won) == 1 and len(refused) == THREADS - 1
    assert all("is in use by run" in r and won[0].run_id in r for r in refused)
    assert _holder(fake).run_id == won[0].run_id
    uploads = [c for c in fake.calls if c[0] == "POST"]
    assert len(uploads) == THREADS and all(c == ("POST", NAME, "0") for c in uploads)
    won[0].release()
    assert not fake.objects


def _dead_claim(fake: FakeGcs) -> int:
    """A claim object as a run killed on this host leaves it: its generation."""
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid now names no process
    dead = Holder("killedrun123", socket.gethostname(), gone.pid, None, "u",
                  "2026-01-01T00:00:00Z", "beam-embed run")
    assert dead.alive() is False
    fake.objects[("bkt", NAME)] = (7, dead.to_bytes())
    return 7


def test_a_killed_runs_claim_is_refused_then_taken_over_with_overwrite(fake):
    generation = _dead_claim(fake)
    with pytest.raises(OutputBusy, match="killedrun123 .*is no longer running.*--overwrite"):
        claim_output(FOLDER, False, ["next"])
    claim = claim_output(FOLDER, True, ["next"])
    assert ("POST", NAME, str(generation)) in fake.calls  # replaced exactly what it judged stale
    assert _holder(fake).run_id == claim.run_id
    taken = len(fake.calls)
    claim.release()
    # the release is one DELETE on the generation it wrote (a stray read may follow it)
    deletes = [c for c in fake.calls[taken:] if c[0] == "DELETE"]
    assert len(deletes) == 1 and deletes[0][2] not in (None, "0", str(generation))
    assert not fake.objects


def test_of_takeovers_started_at_once_exactly_one_wins(fake):
    _dead_claim(fake)
    won, refused = _at_once(overwrite=True)
    assert len(won) == 1 and len(refused) == THREADS - 1
    assert all("is in use by run" in r for r in refused)
    assert _holder(fake).run_id == won[0].run_id
    won[0].release()


def test_a_release_leaves_a_claim_that_replaced_its_own(fake):
    claim = claim_output(FOLDER, False, ["first"])
    own, body = fake.objects[("bkt", NAME)]
    other = json.loads(body)
    other.update(run_id="other", host="elsewhere")
    fake.objects[("bkt", NAME)] = (9999, json.dumps(other).encode())  # taken over from elsewhere
    taken = len(fake.calls)
    claim.release()
    # the release is one DELETE on the generation it wrote, which no longer matches (a stray
    # read may come before or after it)
    deletes = [c for c in fake.calls[taken:] if c[0] == "DELETE"]
    assert deletes == [("DELETE", NAME, str(own))] and own != 9999
    assert json.loads(fake.objects[("bkt", NAME)][1])["run_id"] == "other"
