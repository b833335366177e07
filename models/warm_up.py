"""An encoder's load and first call, on a background thread while the launcher goes on.

A TensorFlow graph's first call optimizes it (grappler) and creates its kernels: ~0.9 s for
MiniLM's bf16 graph on 2 cores, C++ work that leaves the GIL free. Started as soon as the job's
model spec is known, it runs beside the launcher's own Python work (the output folder's checks
and claim, the pipeline modules' imports, loading the preprocessor); the encoder's load then
finds the model loaded and its graph warm (measured: the preprocessor load + the bf16 encoder's
load and first call, 1.80-2.05 s in turn, 1.27-1.65 s side by side). Kinds that do not say
`warms_up` load when the encoder is first asked for. A warm-up that fails is not reported here: the encoder's own load,
on the launcher's thread, fails the same way and says why.
"""

from __future__ import annotations

import logging
import threading


class _WarmUp:
    def __init__(self):
        self.loaded = threading.Event()  # the model is loaded (its first call may still run)
        self.done = threading.Event()


_started: dict[tuple[str, str], _WarmUp] = {}
_lock = threading.Lock()


def start(cls, spec) -> bool:
    """Starts warming `spec`'s encoder (a beam_embed.models.spec.EncoderSpec; `cls` its kind's Encoder
    class) unless the kind has no warm-up or one already started; True when a warm-up is (or
    was) under way."""
    if not cls.warms_up:
        return False
    from beam_embed.models.embedder import configure_threads

    configure_threads(spec.intra_op_threads, spec.inter_op_threads)  # before the first op runs
    key = (spec.encoder, spec.precision)
    with _lock:
        if key in _started:
            return True
        state = _started[key] = _WarmUp()
    threading.Thread(target=_warm, args=(cls, spec, state), name="encoder-warm-up",
                     daemon=True).start()
    return True


def _warm(cls, spec, state: _WarmUp) -> None:
    try:
        cls.warm_up(spec, state.loaded.set)
    except Exception as e:  # noqa: BLE001 - the launcher's own load reports it
        logging.getLogger(__name__).debug("warm-up of %s failed: %s", spec.encoder, e)
    finally:
        state.loaded.set()
        state.done.set()


def wait(encoder: str, precision: str, loaded_only: bool = False) -> None:
    """Returns once a warm-up of this encoder and precision, if one started, has finished (or,
    `loaded_only`, has loaded the model: its first call runs on while the caller loads the rest,
    Python work that would otherwise hold the GIL from the model's own load)."""
    state = _started.get((encoder, precision))
    if state is not None:
        (state.loaded if loaded_only else state.done).wait()
