"""The TPU path on the CPU: the encoder XLA-compiled (`jit_compile`) in fixed shapes under the
default strategy (`on_host`, what a Dataflow launcher runs), against the graph encoder.

What a TPU adds (TPUStrategy, the device itself) cannot run here; the test for its absence is
the clear refusal. Compilations are counted twice: the traces of the compiled function, and the
modules XLA itself dumps (`--xla_dump_to`), in a fresh process.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from beam_embed.models.spec import encoder_spec
from tests.bert_reference import TINY_VOCAB

POOLINGS = ("cls", "pooled_output", "mean", "max", "mean@-2")
BATCH = (256, 64)  # a small budget: several buckets, calls of 8-32 rows
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = [w for w in TINY_VOCAB[5:] if not w.startswith("##")]
    return [" ".join(rng.choice(words, rng.integers(1, 40))) for _ in range(n)]


def _cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def _tpu_spec(export, precision="fp32", **kw):
    spec = encoder_spec(export, poolings=POOLINGS, max_seq_length=64, accelerator="tpu",
                        precision=precision, batch=BATCH, **kw)
    return dataclasses.replace(spec, on_host=True)


@pytest.fixture(scope="module")
def embedders(tiny_export):
    graph = encoder_spec(tiny_export, poolings=POOLINGS, max_seq_length=64).build()
    return graph, _tpu_spec(tiny_export).build()


@pytest.fixture(scope="module")
def calls(embedders):
    """Every compiled call of the module's TPU embedder: (rows given, shape run)."""
    tpu = embedders[1]
    seen, compiled = [], tpu.encoder._compiled
    original = compiled.__call__

    class Spy:
        def __call__(self, inputs, layers):
            seen.append(inputs["input_word_ids"].shape)
            return original(inputs, layers)

        compilations = property(lambda self: compiled.compilations)

    tpu.encoder._compiled = Spy()
    return seen


def test_compiled_encoder_equals_the_graph_encoder_per_row_every_pooling(embedders, calls):
    graph, tpu = embedders
    texts = _texts(45)
    want, got = graph.embed(texts), tpu.embed(texts)
    assert set(got.vectors) == {"cls", "pooled_output", "mean", "max", "mean_layer_m2"}
    for column, vectors in got.vectors.items():
        assert vectors.shape == want.vectors[column].shape == (45, 8)
        assert _cosine(vectors, want.vectors[column]).min() >= 0.99999, column
        np.testing.assert_allclose(vectors, want.vectors[column], atol=2e-5)
    np.testing.assert_array_equal(got.num_tokens, want.num_tokens)
    shapes = tpu.encoder.fixed_shapes.shapes()
    assert calls and all(tuple(shape) in shapes for shape in calls)


def test_padding_rows_never_reach_the_outputs(embedders, calls):
    graph, tpu = embedders
    texts = _texts(11, seed=3)  # 11 rows: never a whole number of calls of 8, 16 or 32
    del calls[:]
    got = tpu.embed(texts)
    padded = sum(rows for rows, _ in calls)
    assert padded > len(texts)  # the calls ran with padding rows ...
    for column, vectors in got.vectors.items():  # ... and only the texts' rows came out,
        assert vectors.shape[0] == len(texts)
        for i, text in enumerate(texts):  # each its own text's vector, whatever ran beside it
            alone = graph.embed([text]).vectors[column][0]
            assert _cosine(vectors[i], alone) >= 0.99999, (column, i)


def test_bf16_on_the_tpu_path_stays_close_to_fp32(tiny_export, embedders):
    bf16 = _tpu_spec(tiny_export, "bf16").build()
    texts = _texts(20, seed=5)
    want = embedders[0].embed(texts).vectors["mean"]
    assert _cosine(bf16.embed(texts).vectors["mean"], want).min() >= 0.999


def test_compilations_equal_the_shapes_used_by_xla_s_own_count(tiny_export, tmp_path):
    """In a fresh process with XLA dumping every module it compiles: the traces counted by the
    encoder, the modules XLA compiled and the distinct shapes the calls ran in are one number,
    and embedding the same texts again compiles nothing."""
    dump = tmp_path / "xla"
    script = textwrap.dedent(f"""
        import json
        from tests.models.test_xla_encoder import _texts, _tpu_spec
        tpu = _tpu_spec({tiny_export!r}).build()
        shapes = set()
        run = tpu.encoder._compiled
        class Spy:
            def __call__(self, inputs, layers):
                shapes.add(inputs["input_word_ids"].shape)
                return run(inputs, layers)
        tpu.encoder._compiled = Spy()
        texts = _texts(45)
        tpu.embed(texts)
        first = run.compilations
        tpu.embed(texts)
        tpu.embed(texts[:7])
        print(json.dumps({{"first": first, "after": run.compilations,
                           "shapes": sorted(shapes)}}))
    """)
    env = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "3",
           "XLA_FLAGS": f"--xla_dump_to={dump}"}
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    modules = glob.glob(str(dump / "module_*.before_optimizations.txt"))
    assert found["first"] == found["after"] >= 2  # the same texts again: nothing compiled
    assert len(modules) == found["after"] == len(found["shapes"])


def test_a_missing_tpu_is_refused_in_one_line(tiny_export):
    spec = dataclasses.replace(_tpu_spec(tiny_export), on_host=False)
    with pytest.raises(ValueError) as e:
        spec.build()
    message = str(e.value)
    assert message.startswith("--accelerator tpu: no TPU found on this machine")
    assert "\n" not in message and "--accelerator auto" in message


@pytest.mark.parametrize("flags, refused", [
    ({"precision": "fp16"}, "--precision fp16 is not available with --accelerator tpu"),
    ({"granularity": "token"}, "--granularity token is not available with --accelerator tpu"),
])
def test_what_a_tpu_cannot_run_is_refused_before_loading(tiny_export, flags, refused):
    with pytest.raises(ValueError, match=refused):
        encoder_spec(tiny_export, accelerator="tpu", **flags)


def test_a_tpu_computes_in_bf16_unless_told_otherwise(tiny_export, text_in):
    assert encoder_spec(tiny_export, accelerator="tpu").precision == "bf16"
    assert encoder_spec(tiny_export).precision == "fp32"
    with pytest.raises(ValueError, match="--accelerator tpu is not available for text_in"):
        encoder_spec(encoder=text_in[0], accelerator="tpu", precision="fp32")
    with pytest.raises(ValueError, match=r"unknown --accelerator 'tpuv5'; expected one of"):
        encoder_spec(tiny_export, accelerator="tpuv5")
