"""Running the embedding job in tests and reading back what it wrote."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pyarrow.parquet as pq
import tensorflow as tf

from beam_embed.pipeline.job.command import main


def run_job(output: str, *args: str) -> dict:
    code = main(["--output", output, "--progress_every", "0", *args])
    assert code == 0, f"job failed with exit code {code}"
    with open(os.path.join(output, "manifest.json")) as f:
        return json.load(f)


def parquet_rows(output: str) -> dict[str, dict]:
    files = sorted(glob.glob(os.path.join(output, "embeddings-*.parquet")))
    rows = {}
    for f in files:
        for row in pq.read_table(f).to_pylist():
            rows[row["id"]] = row
    return rows


def tfrecord_rows(output: str) -> dict[str, dict]:
    rows = {}
    for f in sorted(glob.glob(os.path.join(output, "embeddings-*.tfrecord"))):
        for raw in tf.data.TFRecordDataset(f).as_numpy_iterator():
            ex = tf.train.Example.FromString(raw).features.feature
            row = {}
            for key, feat in ex.items():
                kind = feat.WhichOneof("kind")
                values = list(getattr(feat, kind).value)
                row[key] = (values[0].decode() if kind == "bytes_list" else
                            values[0] if kind == "int64_list" else np.asarray(values, np.float32))
            rows[row["id"]] = row
    return rows


def dead_letters(output: str) -> list[dict]:
    out = []
    for f in sorted(glob.glob(os.path.join(output, "errors-*.jsonl"))):
        with open(f) as fh:
            out += [json.loads(line) for line in fh if line.strip()]
    return out


def write_lines(path: str, lines: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path
