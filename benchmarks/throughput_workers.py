"""The measured processes of benchmarks/throughput.py, one kind per process:

    python benchmarks/throughput_workers.py KIND --out PREFIX [options]

writes PREFIX.json (and PREFIX*.npy vectors). Every worker records wall-clock marks
(time.time()) of its phases under "marks", so the driver can split a process's life into
interpreter start, imports, model load, warm-up, work and exit. The `st` worker runs in a
separate interpreter with sentence-transformers installed (never a project dependency): this
module imports nothing beyond the standard library at the top.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

STARTED = time.time()  # the interpreter is up and running this file; only the stdlib imported

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MAX_SEQ_LENGTH = 256  # the minilm preset's (and sentence-transformers') limit
BATCH_TOKENS, MAX_BATCH_SIZE = 16384, 512  # the job's defaults (pipeline/job/settings.py)


def _read_corpus(path: str, limit: int = 0) -> list[str]:
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


def _spec(args):
    """The job's encoder spec; `--accelerator xla`: the TPU path's encoder on this CPU (the
    encoder XLA-compiled, fixed shapes per length bucket: what `on_host` runs)."""
    sys.path.insert(0, REPO)
    from beam_embed.models.spec import EncoderSpec

    xla = getattr(args, "accelerator", "auto") == "xla"
    return EncoderSpec(kind="bert", encoder=os.path.join(args.model, "encoder"),
                       preprocessor=os.path.join(args.model, "preprocessor"),
                       max_seq_length=MAX_SEQ_LENGTH, poolings=("mean",), normalize=True,
                       long_text="truncate", precision=args.precision,
                       accelerator="tpu" if xla else "auto", on_host=xla,
                       batch_tokens=BATCH_TOKENS, max_batch_size=MAX_BATCH_SIZE)


def _warm_every_bucket(embedder) -> None:
    """One call per length bucket up to MAX_SEQ_LENGTH, so every shape a fixed-shape (XLA)
    encoder runs is compiled before the timed work; the graph encoder gets the same calls."""
    from beam_embed.models.fixed_shapes import SEQ_BUCKETS

    for length in [b for b in SEQ_BUCKETS if b <= MAX_SEQ_LENGTH]:
        embedder.embed([" ".join(["a"] * (length - 2))])  # "a" is one WordPiece


def _loaded(model: str, precision: str = "fp32"):
    """The export's (preprocessor, encoder for `precision`) SavedModels, as the job's encoder
    loaded them."""
    from beam_embed.models.encoders.bert import load_pair

    return load_pair(os.path.join(model, "encoder"), os.path.join(model, "preprocessor"),
                     precision)


def _dims(encoder, model: str) -> dict:
    """width, layers and feed-forward width of an export-model encoder."""
    module = _loaded(model)[1]
    inter = (int(module.layers[0].ffn_in_kernel.shape[-1]) if hasattr(module, "layers")
             else 4 * encoder.width)
    return {"width": encoder.width, "layers": encoder.num_layers, "intermediate": inter}


def worker_encoder(args) -> dict:
    """The job's Embedder over the job's batches, one precision: rate, padded work, FLOPs."""
    import numpy as np
    from op_profile import encoder_flops

    sys.path.insert(0, REPO)
    from beam_embed.pipeline.common.rows.records import Record
    from beam_embed.pipeline.job.batching import (
        FIRST_WINDOW_BATCHES,
        WINDOW_BATCHES,
        _WindowedSortAndBatchDoFn,
    )
    from beam_embed.pipeline.job.embed import estimated_tokens

    texts = _read_corpus(args.corpus, args.limit)
    marks = {"imports": time.time()}
    embedder = _spec(args).build()
    marks["model_loaded"] = time.time()
    encoder = embedder.encoder
    dims = _dims(encoder, args.model)
    records = [Record(str(i), t, "corpus") for i, t in enumerate(texts)]
    batcher = _WindowedSortAndBatchDoFn(1, MAX_BATCH_SIZE, BATCH_TOKENS, estimated_tokens,
                                        WINDOW_BATCHES * MAX_BATCH_SIZE,
                                        FIRST_WINDOW_BATCHES * MAX_BATCH_SIZE)
    batcher.start_bundle()
    batches = [list(b) for r in records for b in batcher.process(r)]
    batches += [list(wv.value) for wv in batcher.finish_bundle()]
    embedder.embed([r.text for r in batches[len(batches) // 2]])  # warm-up: trace + first shapes
    marks["first_batch"] = time.time()
    _warm_every_bucket(embedder)
    marks["warm"] = time.time()
    compilations = getattr(encoder, "compilations", 0)

    shapes, lock = {}, threading.Lock()
    original_run = encoder._run

    def counting_run(pieces, seq_length, rows=None, *more, **kw):
        key = f"{rows or len(pieces)}x{int(seq_length)}"
        with lock:
            shapes[key] = shapes.get(key, 0) + 1
        return original_run(pieces, seq_length, rows, *more, **kw)

    encoder._run = counting_run
    vectors = np.zeros((len(texts), encoder.width), np.float32)
    tokens = np.zeros(len(texts), np.int64)
    t0, c0 = time.perf_counter(), time.process_time()
    for batch in batches:
        result = embedder.embed([r.text for r in batch])
        index = [int(r.id) for r in batch]
        vectors[index] = result.vectors["mean"]
        tokens[index] = result.num_tokens
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    marks["done"] = time.time()
    np.save(args.out + ".npy", vectors)
    padded = flops = 0
    for key, n in shapes.items():
        rows, seq = map(int, key.split("x"))
        padded += rows * seq * n
        flops += encoder_flops(rows, seq, **dims) * n
    real = np.minimum(tokens, MAX_SEQ_LENGTH)
    return {"seconds": seconds, "cpu_seconds": cpu, "load_s": marks["model_loaded"] - marks["imports"],
            "batches": len(batches), "padded_tokens": padded, "real_tokens": int(real.sum()),
            "flops": flops, "gflops_per_s": flops / seconds / 1e9, "shapes": shapes,
            "dims": dims, "tokens_per_text": tokens.tolist(), "marks": marks,
            "warm_s": marks["warm"] - marks["model_loaded"],
            "compilations": [compilations, getattr(encoder, "compilations", 0)]}


def _after_import(patches: dict) -> None:
    """Runs patches[name](module) right after the module `name` is first imported, wherever in
    the job that happens, so the worker imports nothing ahead of the job's own order."""
    import importlib.abc
    import importlib.util

    class Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name not in patches:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            run_module = spec.loader.exec_module

            def exec_module(module):
                run_module(module)
                patches[name](module)
            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Hook())


def worker_job(args) -> dict:
    """The embedding job in this process, as `python -m beam_embed.pipeline.run` runs it (pipeline/run.py:
    the process entered as the job's own, the command's main), with marks at its phases:
    imports, the launcher's model load, the pipeline handed to the runner, each Embedder.embed
    call, main's return. The marks are set by wrappers installed as their modules are imported,
    so TensorFlow, Beam and the model load in the job's own order."""
    sys.path.insert(0, REPO)
    import importlib

    job_args = json.loads(args.job_args)
    calls, lock, marks = [], threading.Lock(), {}

    def bert(module):
        original = module.load_pair

        def load_pair(*a, **kw):
            start = time.time()
            out = original(*a, **kw)
            marks.setdefault("model_load", [start, time.time()])
            return out
        module.load_pair = load_pair

    def embedder(module):
        original = module.Embedder.embed

        def embed(self, texts):
            start = time.time()
            out = original(self, texts)
            with lock:
                calls.append([start, time.time(), len(texts)])
            return out
        module.Embedder.embed = embed

    def pipeline(module):
        original = module.Pipeline.run

        def run(self, *a, **kw):
            marks.setdefault("pipeline_run", time.time())
            return original(self, *a, **kw)
        module.Pipeline.run = run

    _after_import({"beam_embed.models.encoders.bert": bert, "beam_embed.models.embedder": embedder,
                   "apache_beam.pipeline": pipeline})
    # the job process's entry, as `beam-embed run` sets it up
    read = importlib.import_module("beam_embed.pipeline.job.warm_start").read_at_entry(job_args)
    importlib.import_module("beam_embed.process").enter(
        "run", job_args, local=read is not None and read.plain)
    command = importlib.import_module("beam_embed.pipeline.job.command")  # an entry point: imports little
    marks["imports"] = time.time()
    code = command.main(job_args, read=read)
    marks["main_done"] = time.time()
    if code != 0:
        raise SystemExit(code)
    probe = [c for c in calls if c[0] < marks.get("pipeline_run", 0)]  # the launcher's checks
    batches = sorted(c for c in calls if c not in probe)
    return {"marks": marks, "embed_calls": batches, "probe_calls": len(probe)}


def worker_naive(args) -> dict:
    """Beam's MLTransform + TensorflowHubTextEmbeddings, as users wire it today."""
    import shutil
    import tempfile

    import apache_beam as beam
    from apache_beam.ml.transforms.base import MLTransform
    from apache_beam.ml.transforms.embeddings.tensorflow_hub import (
        TensorflowHubTextEmbeddings,
    )

    texts = _read_corpus(args.corpus, args.limit)
    artifacts = tempfile.mkdtemp(prefix="naive-artifacts-")
    count = [0]
    t0 = time.perf_counter()
    with beam.Pipeline(argv=["--runner=DirectRunner"]) as p:
        _ = (p
             | beam.Create([{"text": t} for t in texts])
             | MLTransform(write_artifact_location=artifacts).with_transform(
                 TensorflowHubTextEmbeddings(
                     columns=["text"], hub_url=os.path.join(args.model, "encoder"),
                     preprocessing_url=os.path.join(args.model, "preprocessor"),
                     min_batch_size=32, max_batch_size=32))
             | beam.Map(lambda row: len(row["text"]))
             | beam.combiners.Count.Globally()
             | beam.Map(lambda n: count.__setitem__(0, n)))
    seconds = time.perf_counter() - t0
    shutil.rmtree(artifacts, ignore_errors=True)
    return {"seconds": seconds, "texts": len(texts), "embedded": count[0]}


def worker_st(args) -> dict:
    """sentence-transformers `encode`, each of --configs in turn (runs in the --st-python venv);
    marks: imports, model load, the first config's warm-up batch, its encode."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    marks = {"imports": time.time()}
    texts = _read_corpus(args.corpus, args.limit)
    model = SentenceTransformer(args.model, device="cpu")
    marks["model_loaded"] = time.time()
    model.max_seq_length = MAX_SEQ_LENGTH
    runs = {}
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    for config in args.configs.split(","):
        name, batch = config.split("_b")
        batch, dtype = int(batch), dtypes[name]
        model = model.to(dtype)
        model.encode(texts[:batch], batch_size=batch)  # warm-up
        marks.setdefault("warm", time.time())
        t0, c0 = time.perf_counter(), time.process_time()
        vectors = model.encode(texts, batch_size=batch, convert_to_numpy=True)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        marks.setdefault("done", time.time())
        np.save(f"{args.out}.{config}.npy", np.asarray(vectors, np.float32))
        runs[config] = {"seconds": seconds, "cpu_seconds": cpu, "batch": batch,
                        "precision": name}
    # padding: encode() sorts by length (longest first) and pads each batch to its longest
    lengths = np.array([len(ids) for ids in model.tokenizer(
        texts, truncation=True, max_length=MAX_SEQ_LENGTH)["input_ids"]])
    order = np.argsort([-len(t) for t in texts], kind="stable")
    for run in runs.values():
        b = run["batch"]
        run["padded_tokens"] = int(sum(len(order[i:i + b]) * lengths[order[i:i + b]].max()
                                       for i in range(0, len(texts), b)))
    return {"runs": runs, "real_tokens": int(lengths.sum()), "marks": marks,
            "versions": {"sentence_transformers": sentence_transformers.__version__,
                         "torch": torch.__version__, "torch_threads": torch.get_num_threads()}}


def worker_onednn(args) -> dict:
    """Which oneDNN kernels one batch runs (the driver sets ONEDNN_VERBOSE=1)."""
    _spec(args).build().embed(_read_corpus(args.corpus)[:256])
    return {}


def worker_matmul(args) -> dict:
    """TensorFlow's own MatMul + bias rate at the model's projection shapes, fp32 and bf16."""
    from op_profile import matmul_rate

    dims = json.loads(args.dims)
    return {p: matmul_rate(p, args.rows, dims["width"], dims["intermediate"])
            for p in args.precisions.split(",")}


def worker_profile(args) -> dict:
    """One encoder call per precision at rows x seq under TensorFlow's profiler, per op type,
    and TF's MatMul + bias rate at the same rows in the same process."""
    import numpy as np
    from op_profile import encoder_flops, matmul_rate, op_profile

    sys.path.insert(0, REPO)
    from beam_embed.models.encoders.bert import HubBertEncoder, precision_handle, select_precision

    encoder = HubBertEncoder(os.path.join(args.model, "encoder"),
                             os.path.join(args.model, "preprocessor"), MAX_SEQ_LENGTH)
    dims = _dims(encoder, args.model)
    pieces = encoder.tokenize(_read_corpus(args.corpus))
    lengths = pieces.lengths
    # the corpus's texts nearest the profiled length: the job's padding, not the worst case
    order = np.argsort(np.abs(lengths + 2 - args.seq), kind="stable")[:args.rows]
    packed = encoder.pack(pieces.take(order).truncated(args.seq - 2), args.seq, args.rows)
    flops = encoder_flops(args.rows, args.seq, **dims)
    out = {}
    for precision in args.precisions.split(","):
        encoder_dir = os.path.join(args.model, "encoder")
        handle = precision_handle(encoder_dir, precision)
        fn = select_precision(_loaded(args.model, precision)[1], handle, precision,
                              own=handle != encoder_dir)
        profile = op_profile(fn, packed)
        rate = matmul_rate(precision, args.rows * args.seq, dims["width"], dims["intermediate"])
        profile["gflops_per_s"] = round(flops / profile["wall_ms"] / 1e6, 1)
        profile["matmul_rate"] = rate
        out[precision] = profile
    return {"rows": args.rows, "seq": args.seq, "profiles": out}


WORKERS = {"encoder": worker_encoder, "job": worker_job, "naive": worker_naive, "st": worker_st,
           "onednn": worker_onednn, "matmul": worker_matmul, "profile": worker_profile}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=sorted(WORKERS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--corpus")
    ap.add_argument("--model")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--accelerator", default="auto", choices=("auto", "xla"),
                    help="encoder: the graph (auto) or the TPU path's XLA program on this CPU")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--configs", default="fp32_b32")
    ap.add_argument("--rows", type=int, default=0)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--dims", default="{}")
    ap.add_argument("--job-args", default="[]", help="the job's command line, as JSON")
    args = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    data = WORKERS[args.kind](args)
    data.setdefault("marks", {})["started"] = STARTED
    data["marks"]["finished"] = time.time()
    with open(args.out + ".json", "w") as f:
        json.dump(data, f)
    if args.kind == "job":  # end as `python -m beam_embed.pipeline.run` ends, where it skips the teardown
        try:
            from beam_embed.process.exits import exit_now
        except ImportError:  # an older checkout: the interpreter's own exit
            return 0
        exit_now(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
