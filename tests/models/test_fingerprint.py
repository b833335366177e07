"""A model's fingerprint covers everything that changes a vector: each SavedModel's graph,
variables and vocabulary, every SavedModel of an export, and the metadata a run reads; not the
paths an export was made from, nor files beside a model. Each file is hashed once: later
fingerprints of unchanged files only look at them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys

import pytest

from beam_embed.models import saved_model
from beam_embed.models.saved_model import fingerprint
from beam_embed.models.spec import encoder_spec

_opened: list[str] | None = None  # the files Python opens while a test records them


def _record_opens(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], str):
        _opened.append(args[0])


sys.addaudithook(_record_opens)  # Python's own record of open(): no function is replaced


def _of(export: str) -> str:
    return fingerprint(f"{export}/encoder", f"{export}/preprocessor")


@pytest.fixture
def copy(tiny_export, tmp_path):
    out = str(tmp_path / "export")
    shutil.copytree(tiny_export, out)
    return out


def test_a_copy_has_the_same_fingerprint_and_the_spec_records_it(tiny_export, copy):
    assert _of(copy) == _of(tiny_export) and len(_of(copy)) == 16
    assert encoder_spec(tiny_export).fingerprint() == _of(tiny_export)


def test_swapping_two_vocabulary_lines_changes_it(tiny_export, copy):
    vocab = os.path.join(copy, "preprocessor", "assets", "vocab.txt")
    with open(vocab, encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines[7], lines[8] = lines[8], lines[7]
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    assert _of(copy) != _of(tiny_export)
    # what earlier versions recorded (saved_model.pb alone) could not tell
    assert saved_model.earlier_fingerprint(f"{copy}/encoder", f"{copy}/preprocessor") == saved_model.earlier_fingerprint(
        f"{tiny_export}/encoder", f"{tiny_export}/preprocessor")


@pytest.mark.parametrize("sub", ["encoder", "encoder_bf16"])
def test_a_changed_weight_changes_it_in_every_saved_model_of_the_export(tiny_export, copy, sub):
    folder = os.path.join(copy, sub, "variables")
    data = os.path.join(folder, next(n for n in os.listdir(folder) if ".data-" in n))
    with open(data, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x01]))
    assert _of(copy) != _of(tiny_export)


def test_the_metadata_a_run_reads_counts_and_its_provenance_does_not(tiny_export, copy):
    path = os.path.join(copy, "beam_embed.json")
    with open(path) as f:
        meta = json.load(f)
    with open(path, "w") as f:  # made elsewhere, from another folder: the same model
        json.dump({**meta, "source": "/elsewhere/ckpt", "name": "renamed"}, f)
    assert _of(copy) == _of(tiny_export)
    with open(path, "w") as f:
        json.dump({**meta, "normalize": not meta["normalize"]}, f)
    assert _of(copy) != _of(tiny_export)


def test_files_beside_the_model_do_not_count(tiny_export, copy):
    for sub in ("encoder", "preprocessor"):
        with open(os.path.join(copy, sub, "README.md"), "w") as f:
            f.write("notes")
        os.remove(os.path.join(copy, sub, "fingerprint.pb"))  # TensorFlow's own, derived
    assert _of(copy) == _of(tiny_export)


def test_a_saved_model_alone_and_a_remote_handle(tiny_export, tmp_path):
    alone = str(tmp_path / "alone")
    shutil.copytree(os.path.join(tiny_export, "encoder"), alone)
    assert fingerprint(alone) == fingerprint(alone) != fingerprint(f"{tiny_export}/encoder")
    remote = "https://tfhub.dev/google/elmo/3"  # never fetched: the handle itself is hashed
    assert fingerprint(remote) != fingerprint("https://tfhub.dev/google/elmo/2")
    assert saved_model.earlier_fingerprint(remote) == hashlib.sha256(remote.encode()).hexdigest()[:16]


def test_unchanged_files_are_hashed_once(copy):
    global _opened
    first = _of(copy)
    variables = os.path.join(copy, "encoder", "variables")
    _opened = []
    try:
        assert _of(copy) == first
        looked = list(_opened)
    finally:
        _opened = None
    assert not [p for p in looked if p.startswith(variables)]  # remembered, not read again
    vocab = os.path.join(copy, "preprocessor", "assets", "vocab.txt")
    with open(vocab, "a", encoding="utf-8") as f:
        f.write("[extra]\n")
    assert _of(copy) != first  # a changed file is hashed again


def test_a_fingerprint_an_earlier_version_recorded_is_known_as_such(tiny_export, copy):
    from beam_embed.models.spec import recorded_fingerprint

    enc, pre = f"{copy}/encoder", f"{copy}/preprocessor"
    now = recorded_fingerprint(_of(copy), "bert", enc, pre)
    assert (now.same, now.earlier, now.now) == (True, False, _of(copy))
    old = recorded_fingerprint(saved_model.earlier_fingerprint(enc, pre), "bert", enc, pre)
    assert (old.same, old.earlier) == (True, True)
    other = recorded_fingerprint("0123456789abcdef", "bert", enc, pre)
    assert (other.same, other.earlier) == (False, False)
