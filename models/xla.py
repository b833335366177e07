"""An encoder's call compiled with XLA (`jit_compile`), run under a tf.distribute strategy.

One compiled program per input shape: the caller keeps the shapes few (models/fixed_shapes.py).
Only the layers the poolings read leave the device, with the pooled vector (the graph's call
returns every layer). `compilations` counts the programs traced, one per distinct (shape,
layers) the function has been called with: a test compares it with XLA's own dump.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf


class CompiledForward:
    def __init__(self, forward, strategy: tf.distribute.Strategy):
        self._forward = forward  # a BERT-contract call: packed int32 inputs -> outputs
        self._strategy = strategy
        # one function per set of layers (a job asks for one), its shapes traced within it;
        # the layers are bound, not passed: TPUStrategy.run hands its args over as tensors
        self._fns: dict[tuple[int, ...], tf.types.experimental.PolymorphicFunction] = {}

    def _call(self, inputs, layers):
        out = self._forward(inputs)
        return {"encoder_outputs": {k: out["encoder_outputs"][k] for k in layers},
                "pooled_output": out["pooled_output"]}

    def __call__(self, inputs: dict[str, np.ndarray], layers: tuple[int, ...]) -> dict:
        layers = tuple(layers)
        if layers not in self._fns:
            self._fns[layers] = tf.function(functools.partial(self._call, layers=layers),
                                            jit_compile=True, reduce_retracing=False)
        tensors = {k: tf.constant(v) for k, v in inputs.items()}
        return self._strategy.run(self._fns[layers], args=(tensors,))

    @property
    def compilations(self) -> int:
        return sum(fn.experimental_get_tracing_count() for fn in self._fns.values())
