"""A gs:// model's local copy (models/gcs_copy.py), against the Cloud Storage emulator: fetched
whole, fetched again when an object changed, a file the folder no longer holds removed."""

from __future__ import annotations

import os

import pytest

from beam_embed.models import gcs_copy


@pytest.fixture
def fresh(monkeypatch):
    """Each look lists gs:// again (a process lists a path once)."""
    monkeypatch.setattr(gcs_copy, "_COPIES", {})
    return gcs_copy._COPIES


def _files(folder: str) -> dict[str, bytes]:
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = f.read()
    return out


def test_a_folder_is_copied_whole_and_kept_in_step(gcs, fresh, tmp_path):
    gcs.upload("m/saved_model.pb", b"graph")
    gcs.upload("m/variables/variables.index", b"index")
    gcs.upload("m/variables/variables.data-00000-of-00002", b"old")
    gcs.upload("m/weights.gz", b"not gzip at all")  # copied as it is, never decompressed
    local = gcs_copy.local_copy(gcs.path("m"))
    assert local.startswith(str(tmp_path / "cache" / "gs" / "bkt"))
    assert _files(local) == {"saved_model.pb": b"graph", "variables/variables.index": b"index",
                             "variables/variables.data-00000-of-00002": b"old",
                             "weights.gz": b"not gzip at all"}
    assert gcs_copy.local_copy(gcs.path("m") + "/") == local

    gcs.bucket.blob(f"{gcs.prefix}/m/variables/variables.data-00000-of-00002").delete()
    gcs.upload("m/variables/variables.data-00000-of-00001", b"new")
    gcs.upload("m/saved_model.pb", b"graph v2")
    fresh.clear()
    assert gcs_copy.local_copy(gcs.path("m")) == local
    assert _files(local) == {"saved_model.pb": b"graph v2", "variables/variables.index": b"index",
                             "variables/variables.data-00000-of-00001": b"new",
                             "weights.gz": b"not gzip at all"}


def test_an_object_alone_and_a_path_with_nothing(gcs, fresh):
    gcs.upload("e/beam_embed.json", b"{}")
    one = gcs_copy.local_copy(gcs.path("e/beam_embed.json"))
    with open(one, "rb") as f:
        assert f.read() == b"{}"
    gone = gcs_copy.local_copy(gcs.path("e/encoder_bf16/saved_model.pb"))
    assert not os.path.exists(gone)
    gcs.bucket.blob(f"{gcs.prefix}/e/beam_embed.json").delete()
    fresh.clear()
    assert gcs_copy.local_copy(gcs.path("e/beam_embed.json")) == one
    assert not os.path.exists(one)  # a copy never says an object is there when it is not


def test_local_paths_are_themselves_and_odd_gs_names_are_refused(tmp_path):
    assert gcs_copy.local_copy(str(tmp_path)) == str(tmp_path)
    with pytest.raises(OSError, match="not a gs://bucket/path"):
        gcs_copy.local_copy("gs://bkt/a/../../etc")
