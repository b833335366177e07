"""TensorFlow loaded lean (models/tf_import.py): no Keras on the way to a loaded model, the same
tokens as with tensorflow_text imported, and Keras/tensorflow_text still importable after."""

from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_SCRIPT = """
import json, sys
from beam_embed.models.tf_import import import_tensorflow_lean
from beam_embed.models.hub_loader import load_handle
import_tensorflow_lean()
out = {"keras_after_import": "keras" in sys.modules}
import tensorflow as tf
pre = load_handle(sys.argv[1] + "/preprocessor")
texts = tf.constant(["Hello, world!", "unaffable tokenization"])
lean = pre.tokenize(texts).merge_dims(-2, -1).to_list()
out["keras_after_load"] = "keras" in sys.modules or "tensorflow_text" in sys.modules
import tensorflow_text  # its modules load the same op libraries again
import keras.src.optimizers  # what TensorFlow's own import skipped still imports
full = tf.saved_model.load(sys.argv[1] + "/preprocessor").tokenize(texts)
out["lean"], out["full"] = lean, full.merge_dims(-2, -1).to_list()
print(json.dumps(out))
"""


def test_model_loads_and_tokenizes_without_keras(tiny_export):
    env = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, tiny_export], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["keras_after_import"]
    assert not out["keras_after_load"]
    assert out["lean"] == out["full"]
    assert all(len(ids) > 1 for ids in out["lean"])
