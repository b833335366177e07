"""Where the encoder runs: the device an `--accelerator` asks for, found (or refused) once per
process, and the tf.distribute strategy its calls go through.

`auto` and `gpu` use TensorFlow's default strategy (its own placement: a visible GPU, else the
CPU); `gpu` only adds the check that a GPU is there. `tpu` connects to the TPU of this VM and
initializes it once per process (a TPU has a single owner: one SDK process per worker VM), and
runs the encoder's XLA program under TPUStrategy. `on_host` runs the same code path, XLA program
and fixed shapes included, under the default strategy on this machine's CPU: a launcher whose
workers hold the TPU (Dataflow) checks the model that way, and so do the tests.
"""

from __future__ import annotations

import functools

import tensorflow as tf

HOST = "/CPU:0"  # tokenization and packing stay on the host, whatever the accelerator


def _missing(accelerator: str, why: str) -> ValueError:
    return ValueError(f"--accelerator {accelerator}: {why}; run where one is (configs/"
                      f"dataflow_{accelerator}.yaml) or use --accelerator auto")


def require_gpu() -> None:
    if not tf.config.list_physical_devices("GPU"):
        raise _missing("gpu", "TensorFlow sees no GPU on this machine")


@functools.cache
def tpu_strategy() -> tf.distribute.Strategy:
    """This VM's TPU, initialized (once per process), as a TPUStrategy of one replica."""
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:  # no TPU, no TPU runtime
        reason = (str(e).strip() or type(e).__name__).splitlines()[0].split(". ")[0]
        raise _missing("tpu", f"no TPU found on this machine ({reason[:120]})") from e
    if strategy.num_replicas_in_sync != 1:
        # each replica would run the same batch; one chip per worker VM is what the job plans
        raise ValueError(f"--accelerator tpu: this VM has {strategy.num_replicas_in_sync} TPU "
                         "cores; the job runs one (topology 1x1, configs/dataflow_tpu.yaml)")
    return strategy


def strategy(accelerator: str, on_host: bool = False) -> tf.distribute.Strategy:
    """The strategy the encoder's calls run under; raises ValueError (one line) when the
    accelerator asked for is not on this machine."""
    if accelerator == "tpu" and not on_host:
        return tpu_strategy()
    if accelerator == "gpu" and not on_host:
        require_gpu()
    return tf.distribute.get_strategy()


def check(accelerator: str) -> None:
    """Fails, before any data is read, when this machine lacks the accelerator (a local run)."""
    strategy(accelerator)
