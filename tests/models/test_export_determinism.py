"""An export is a function of the checkpoint and the code: exporting the same folder from two
processes, or twice from one (which has traced other functions meanwhile), writes the same bytes
(TensorFlow's own fingerprint.pb aside, which the model fingerprint does not read), so the model
fingerprint a run records survives clearing the cache or exporting on another machine."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import tensorflow as tf

from beam_embed.models.export.convert import export_checkpoint
from beam_embed.models.saved_model import fingerprint

EXPORT = textwrap.dedent("""
    import sys
    from beam_embed.models.export.convert import export_checkpoint
    export_checkpoint(sys.argv[1], sys.argv[2], name="tiny-bert")
""")


def _files(folder: str) -> dict[str, bytes]:
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = f.read()
    return found


def test_every_export_of_a_folder_writes_the_same_bytes(tiny_checkpoint, tiny_export, tmp_path):
    outs = [str(tmp_path / f"export-{i}") for i in range(3)]
    subprocess.run([sys.executable, "-c", EXPORT, tiny_checkpoint[0], outs[0]], check=True,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    tf.saved_model.load(os.path.join(tiny_export, "preprocessor")).tokenize(tf.constant(["a"]))
    for out in outs[1:]:  # this process has loaded and traced a model before
        export_checkpoint(tiny_checkpoint[0], out, name="tiny-bert")
    first = _files(outs[0])
    assert "preprocessor/saved_model.pb" in first and "encoder/variables/variables.index" in first
    assert b" object at 0x" not in first["preprocessor/saved_model.pb"]
    for out in outs[1:]:
        other = _files(out)
        assert sorted(other) == sorted(first)
        differ = sorted(name for name in first if first[name] != other[name])
        # TensorFlow's fingerprint.pb carries its own identifiers; nothing else may differ
        assert all(os.path.basename(name) == "fingerprint.pb" for name in differ), differ
    fingerprints = {fingerprint(f"{out}/encoder", f"{out}/preprocessor") for out in outs}
    assert len(fingerprints) == 1
