"""A sentence-transformers model's Dense layers after pooling, as an export saves them
(`dense/<i>_weight.npy`, `dense/<i>_bias.npy`, listed in beam_embed.json's `dense`): applied to
every pooling's vectors before any normalization, as sentence-transformers applies them.
No TensorFlow at import."""

from __future__ import annotations

import io
import os

import numpy as np

ACTIVATIONS = {"tanh": np.tanh, "identity": lambda x: x, "relu": lambda x: np.maximum(x, 0),
               "sigmoid": lambda x: 1 / (1 + np.exp(-x))}


def _load(path: str) -> np.ndarray:
    import tensorflow as tf  # the export may lie on gs://

    with tf.io.gfile.GFile(path, "rb") as f:
        return np.load(io.BytesIO(f.read()), allow_pickle=False)


class DenseHead:
    """x -> activation(x @ W.T + b), layer by layer."""

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray | None, str]]):
        self.layers = layers

    @classmethod
    def of_export(cls, folder: str, meta: dict) -> DenseHead | None:
        if not meta.get("dense"):
            return None
        return cls([(_load(os.path.join(folder, d["weight"])),
                     _load(os.path.join(folder, d["bias"])) if d.get("bias") else None,
                     d["activation"]) for d in meta["dense"]])

    @property
    def width(self) -> int:
        return int(self.layers[-1][0].shape[0])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        for weight, bias, activation in self.layers:
            x = x @ weight.T
            if bias is not None:
                x = x + bias
            x = ACTIVATIONS[activation](x)
        return np.asarray(x, np.float32)
