"""Embedding-job output folders written directly with pyarrow / tf.train.Example, in the job's
fixed format (shards + manifest.json), and the matrices that go in them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

WIDTH = 48
MODEL = {"name": "test-model", "handle": "/models/test", "fingerprint": "abc123"}


def clustered_matrix(n: int, width: int = WIDTH, clusters: int = 5, seed: int = 0):
    """[n, width] float32 Gaussian clusters with a decaying spectrum, and each row's cluster."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(clusters, width))
    labels = rng.integers(clusters, size=n)
    noise = rng.normal(size=(n, width)) * np.linspace(2.0, 0.2, width)
    return (centres[labels] + noise + 1.5).astype(np.float32), labels


def records(vectors: dict, texts=None, sources=None, meta=None) -> pa.Table:
    """A table of records in the job's schema; `vectors` maps column -> [n, width] float32."""
    n = len(next(iter(vectors.values())))
    cols = {"id": pa.array([f"rec-{i:06d}" for i in range(n)])}
    if texts is not None:
        cols["text"] = pa.array(texts, pa.string())
    cols["source"] = pa.array(sources or ["corpus.jsonl"] * n, pa.string())
    for name, values in (meta or {}).items():
        cols[name] = pa.array(values, pa.string())
    cols["num_tokens"] = pa.array(np.arange(n) % 60 + 3, pa.int32())
    cols["truncated"] = pa.array(np.arange(n) % 7 == 0)
    for name, v in vectors.items():
        cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), v.shape[1])
    return pa.table(cols)


def _example(row: dict, vector_columns) -> bytes:
    import tensorflow as tf

    feature = {}
    for name, value in row.items():
        if name in vector_columns:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
        elif isinstance(value, (bool, int)):
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
        else:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[value.encode("utf-8")]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_embeddings(folder: str, table: pa.Table, shards: int = 4, row_group_size: int = 64,
                     formats=("parquet",), normalize=None) -> str:
    """Writes `table` as the job would: `embeddings-SSSSS-of-NNNNN.{parquet,tfrecord}` shards
    (contiguous row ranges) and manifest.json (each shard's rows, size and SHA-256). Vector
    columns are the fixed_size_list ones."""
    os.makedirs(folder, exist_ok=True)
    vector_columns = [f.name for f in table.schema if pa.types.is_fixed_size_list(f.type)]
    bounds = np.linspace(0, table.num_rows, shards + 1).astype(int)
    files = {fmt: [] for fmt in formats}
    for s in range(shards):
        part = table.slice(bounds[s], bounds[s + 1] - bounds[s])
        for fmt in formats:
            name = f"embeddings-{s:05d}-of-{shards:05d}.{fmt}"
            files[fmt].append(name)
            path = os.path.join(folder, name)
            if fmt == "parquet":
                pq.write_table(part, path, row_group_size=row_group_size)
            else:
                import tensorflow as tf

                with tf.io.TFRecordWriter(path) as w:
                    for row in part.to_pylist():
                        w.write(_example(row, vector_columns))
    base = {"id", "text", "source", "num_tokens", "truncated"}
    manifest = {
        "format_version": 1, "model": MODEL,
        "poolings": [{"name": c.replace("_layer_m2", "@-2"), "column": c,
                      "width": table.schema.field(c).type.list_size,
                      "normalize": (normalize or {}).get(c, False)} for c in vector_columns],
        "files": files,
        "metadata_columns": [c for c in table.column_names
                             if c not in base and c not in vector_columns],
        "text_column": "text" in table.column_names,
        "counts": {"read": table.num_rows, "embedded": table.num_rows, "skipped_empty": 0,
                   "dead_lettered": 0},
        "rows": {name: int(bounds[s + 1] - bounds[s]) for names in files.values()
                 for s, name in enumerate(names)},
        "digests": {name: _digest(os.path.join(folder, name)) for names in files.values()
                    for name in names}}
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return folder


def _digest(path: str) -> dict:
    """A shard's size and SHA-256, as the job's manifest records them."""
    with open(path, "rb") as f:
        data = f.read()
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def without_digests(folder: str) -> None:
    """The run's manifest as earlier versions wrote it: no shard sizes and SHA-256s."""
    path = os.path.join(folder, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    del manifest["digests"]
    with open(path, "w") as f:
        json.dump(manifest, f)


def read_projections(folder: str) -> pa.Table:
    """All projection shards of a PCA output folder, ordered by id."""
    names = sorted(n for n in os.listdir(folder) if n.startswith("projections-"))
    return pa.concat_tables(pq.read_table(os.path.join(folder, n)) for n in names).sort_by("id")


def pcs_of(table: pa.Table) -> np.ndarray:
    return np.column_stack([table.column(c).to_numpy() for c in table.column_names
                            if c.startswith("pc_")])


# Fits sum outer products in float32 about each chunk's mean (fit.py) and project in float32:
# components and coordinates against a float64 reference (scikit-learn's PCA, numpy's SVD) need
# at most rtol 6.1e-6 here (measured on these tests' data; projections 3.8e-6), where
# scikit-learn's own fit of the same float32 matrix is 5-200x further off. 1e-5 leaves 1.6x.
FLOAT32_RTOL = 1e-5
# Two of our fits of the same vectors summed in other chunks: each carries its own float32
# rounding (measured: rtol 1.02e-5 needed).
TWO_FITS_RTOL = 2 * FLOAT32_RTOL


def assert_close(actual, expected, rtol=1e-6):
    """Equal to `rtol` relative, elementwise, with the absolute floor rtol * max|expected|."""
    expected = np.asarray(expected)
    np.testing.assert_allclose(actual, expected, rtol=rtol,
                               atol=rtol * float(np.abs(expected).max()))


def chromium_dom(html_path: str, budget_ms: int = 15000) -> str:
    """The DOM of a page after headless Chromium ran its scripts (no network, fresh profile)."""
    exe = shutil.which("chromium")
    assert exe, "Debian's chromium package is needed: apt-get install -y chromium"
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
             "--dump-dom", f"file://{html_path}"],
            capture_output=True, text=True, timeout=120, check=True)
    return out.stdout
