"""Where an encoder call's time goes, and how fast this machine's TensorFlow multiplies matrices.

    op_profile(fn, inputs)   one call under TensorFlow's profiler, time summed per op type
    matmul_rate(dtype, ...)  TF's own MatMul (+ bias) rate at the model's shapes, in GFLOP/s
    encoder_flops(...)       the model work of one call, to set against that rate

Used by benchmarks/throughput.py's workers; TensorFlow only, no project imports.
"""

from __future__ import annotations

import collections
import glob
import os
import shutil
import tempfile
import time

# Op types that are matrix multiplications (Eigen's and oneDNN's names for them).
MATMUL_OPS = frozenset({
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "_FusedMatMul",
    "_MklMatMul", "_MklFusedMatMul", "_MklNativeFusedMatMul", "_MklBatchMatMulV2",
    "_MklNativeBatchMatMulV2", "_MklFusedBatchMatMulV2", "_MklEinsum", "_FusedBatchMatMulV2",
})


def _xspace(logdir: str):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # TF's own trace format

    paths = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    if not paths:
        raise RuntimeError(f"the profiler wrote no trace under {logdir}")
    with open(paths[0], "rb") as f:
        return xplane_pb2.XSpace.FromString(f.read())


def op_profile(fn, inputs, calls: int = 3) -> dict:
    """Time per op type of `fn(inputs)` (after one warm-up call), per call.

    The executor's threads record each op as "name:Type"; the ms here are those ops' own
    durations summed per type (two ops running at once both count, so the sum can exceed the
    wall time)."""
    import tensorflow as tf

    def run():
        out = fn(inputs)
        tf.nest.map_structure(lambda t: t.numpy(), out)

    run()
    logdir = tempfile.mkdtemp(prefix="op-profile-")
    try:
        tf.profiler.experimental.start(logdir, tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=2, python_tracer_level=0, device_tracer_level=0))
        start = time.perf_counter()
        for _ in range(calls):
            run()
        wall = (time.perf_counter() - start) / calls
        tf.profiler.experimental.stop()
        space = _xspace(logdir)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    ms, count = collections.Counter(), collections.Counter()
    for plane in space.planes:
        names = plane.event_metadata
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = names[event.metadata_id].name
                if ":" not in name or "::" in name:  # executor bookkeeping, not an op
                    continue
                kind = name.rsplit(":", 1)[1]
                ms[kind] += event.duration_ps / 1e9 / calls
                count[kind] += 1
    total = sum(ms.values())
    matmul = sum(v for k, v in ms.items() if k in MATMUL_OPS)
    return {"wall_ms": round(wall * 1e3, 2), "op_ms": round(total, 2),
            "matmul_ms": round(matmul, 2), "ops_per_call": round(sum(count.values()) / calls),
            "ops": {k: {"ms": round(v, 3), "count": round(count[k] / calls)}
                    for k, v in ms.most_common()}}


def encoder_flops(rows: int, seq: int, width: int, layers: int, intermediate: int) -> float:
    """Multiply-adds x 2 of one BERT encoder call on rows x seq padded tokens: the QKV, output
    and feed-forward projections, and attention's two products."""
    per_token = 2 * (width * 3 * width + width * width + 2 * width * intermediate)
    attention = 2 * 2 * seq * width
    return float(rows) * seq * (per_token + attention) * layers


def matmul_rate(dtype: str, rows: int, width: int, intermediate: int,
                seconds: float = 1.0) -> dict:
    """GFLOP/s of TF's MatMul + bias at the encoder's projection shapes (rows x width @ width x
    3*width, width x width, width x intermediate, intermediate x width), weights as graph
    constants as the encoder's graph has them. `overall` is total FLOPs over total time."""
    import numpy as np
    import tensorflow as tf

    dt = {"fp32": tf.float32, "bf16": tf.bfloat16}[dtype]
    rng = np.random.default_rng(0)
    shapes = [(width, 3 * width), (width, width), (width, intermediate), (intermediate, width)]
    out, flops_total, time_total = {}, 0.0, 0.0
    for k, n in shapes:
        x = tf.cast(tf.constant(rng.standard_normal((rows, k), np.float32)), dt)
        w = tf.constant(tf.cast(rng.standard_normal((k, n), np.float32) / k ** 0.5, dt).numpy())
        b = tf.constant(tf.cast(rng.standard_normal(n, np.float32), dt).numpy())
        fn = tf.function(lambda x, w=w, b=b: tf.nn.bias_add(tf.matmul(x, w), b))
        fn(x).numpy()
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds or calls < 2:
            fn(x).numpy()
            calls += 1
        elapsed = time.perf_counter() - start
        flops = 2.0 * rows * k * n * calls
        out[f"{rows}x{k}@{k}x{n}"] = round(flops / elapsed / 1e9, 1)
        flops_total += flops
        time_total += elapsed
    return {"dtype": dtype, "shapes": out, "overall": round(flops_total / time_total / 1e9, 1)}


def format_profile(profile: dict, top: int = 12) -> list[str]:
    """Lines for a report: the top op types by time, with their share of all op time."""
    total = profile["op_ms"] or 1.0
    head = (f"{profile['wall_ms']:.1f} ms a call, {profile['ops_per_call']} ops; matmul ops "
            f"{profile['matmul_ms']:.1f} ms of {profile['op_ms']:.1f} ms op time "
            f"({100 * profile['matmul_ms'] / total:.0f}%)")
    lines = [head]
    for kind, v in list(profile["ops"].items())[:top]:
        lines.append(f"  {kind:24s} {v['ms']:9.2f} ms {100 * v['ms'] / total:5.1f}%  x{v['count']}")
    return lines
