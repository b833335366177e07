"""The CPU features that decide which encoder precision is fast here (no TensorFlow import).

bf16 matmuls have hardware only with AMX (`amx_bf16`) or AVX-512 BF16 (`avx512_bf16`); without
them TensorFlow turns oneDNN off and Eigen emulates bf16, at the fp32 graph's speed and with
bf16's rounding (measured on an AVX2-only AMD EPYC: bf16 0.9-1.0x the fused fp32 encoder).
"""

from __future__ import annotations

import functools

FAST_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo; empty where that cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def has_fast_bf16(flags: frozenset[str]) -> bool:
    return any(f in flags for f in FAST_BF16_FLAGS)
