"""TensorFlow and tensorflow-text's ops, loaded without the Keras a run never calls.

Measured on 2 cores (AMD EPYC, Python 3.11, TF 2.21): `import tensorflow` eagerly imports
`keras.src.optimizers` (to register Keras optimizers for SavedModels that hold one), which
imports all of Keras 3 and, through its scikit-learn wrappers, scikit-learn and SciPy: ~1.3 s of
the ~3.4 s import. `import tensorflow_text` imports Keras again for its Keras layers. Neither is
used to load or run an encoder: SavedModels load through `tf.saved_model.load`, and the
preprocessors only need tensorflow-text's op kernels registered. So the job imports TensorFlow
with that one eager import refused (TensorFlow catches the ImportError) and loads the op
libraries tensorflow-text ships; a later `import keras`, `tensorflow_text` or `tensorflow_hub`
still works and imports them in full. (The refusal itself, a stub in sys.modules for the while,
is beam_embed.process.imports'.)

`import_tensorflow` is what commands and the job's model handler call: the same, without
TensorFlow's C++ start-up lines when the command asked for quiet (beam_embed.process.set_up) or
a library caller did not ask for them.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import importlib.util
import os
import sys

from beam_embed.process.imports import refused_while
from beam_embed.process.library_noise import quiet_environment_while, stderr_silenced
from beam_embed.process.log import quiet_asked

_KERAS_EAGER = "keras.src.optimizers"


def import_tensorflow_lean() -> None:
    """`import tensorflow`, without its eager Keras import when nothing imported Keras yet."""
    if "tensorflow" in sys.modules:
        return
    refuse = "keras" not in sys.modules  # imported already: TensorFlow registers it as usual
    with refused_while(_KERAS_EAGER) if refuse else contextlib.nullcontext():
        import tensorflow  # noqa: F401 - TensorFlow catches the ImportError and goes on


@functools.cache
def register_text_ops() -> None:
    """Registers tensorflow-text's ops (BERT preprocessors, USE-style SavedModels call them)
    from the shared libraries it ships; imports the package where those cannot be found."""
    import_tensorflow_lean()
    import tensorflow as tf

    spec = importlib.util.find_spec("tensorflow_text")
    folders = list(spec.submodule_search_locations or []) if spec else []
    libraries = [so for folder in folders
                 for so in sorted(glob.glob(os.path.join(folder, "python", "ops", "_*.so")))]
    if not libraries:
        import tensorflow_text  # noqa: F401
        return
    for so in libraries:
        tf.load_op_library(so)


def import_tensorflow(quiet: bool | None = None) -> None:
    """Loads TensorFlow and tensorflow-text's ops now (register_text_ops), without their start-up
    lines when `quiet` (None: when a command asked for quiet; local worker processes inherit
    that through the environment; elsewhere, on Dataflow say, TensorFlow loads as usual).
    Commands call it once their flags are checked, the job's model handler before it loads the
    model, the Python API's handlers with the library caller's wish (library_quiet_wanted).
    Quiet, TensorFlow's C++ log level is read as errors-only while it loads and the
    environment is given back as it was after (quiet_environment_while)."""
    if "tensorflow" in sys.modules:
        register_text_ops()
        return
    quiet = quiet_asked() if quiet is None else quiet
    if not quiet:
        register_text_ops()
        return
    with quiet_environment_while(), stderr_silenced():
        register_text_ops()  # imports TensorFlow first
