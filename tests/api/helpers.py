"""What the API tests share: a corpus of records (good and bad) as the run reads them from a
JSON Lines file and as the API gets them as elements, and collecting a PCollection's elements
from a pipeline run in this process (the DirectRunner runs in-process)."""

from __future__ import annotations

import json
import uuid

import apache_beam as beam
import numpy as np

ROWS = [
    {"id": "r1", "text": "the cat sat on the mat .", "topic": "pets"},
    {"id": "r2", "text": "a  dog\u00a0ran\t!", "topic": "pets"},  # cleaned to "a dog ran !"
    {"id": "r3", "text": "the river bank was big and small", "topic": "geo"},
    {"id": "r4", "text": " ".join(["money is big ."] * 8), "topic": "money"},  # truncated at 16
    {"id": "r5", "text": " \u3000 ", "topic": "blank"},  # empty once cleaned
    {"id": "r6", "text": None, "topic": "null"},
    {"id": "r7", "text": "the cat\x00sat", "topic": "binary"},
    {"id": "r8", "text": "x" * 300, "topic": "long"},  # over --max_text_bytes 200
    {"id": "r9", "text": 42, "topic": "number"},
]
POOLINGS = ["mean", "cls"]
# The settings both the run and the API are given: the same text checks, truncation, batching.
SETTINGS = {"max_seq_length": 16, "max_text_bytes": 200, "batch_tokens": 64}
RUN_FLAGS = ["--pooling", ",".join(POOLINGS), "--id_field", "id", "--metadata_fields", "topic",
             *[f for k, v in SETTINGS.items() for f in (f"--{k}", str(v))]]


def write_jsonl(path: str) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in ROWS)
    return path


def elements() -> list[dict]:
    """The corpus's records as the run's reader sees them (JSON decoded)."""
    return [json.loads(json.dumps(row)) for row in ROWS]


def cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def dead_letter_lines(lines) -> set[tuple]:
    """Dead letters (DeadLetter.to_json() or an errors file's objects) as comparable tuples."""
    return {(d["id"], d["kind"], d["reason"], d["excerpt"]) for d in lines}


COLLECTED: dict[str, list] = {}


class _Collect(beam.DoFn):
    def __init__(self, key: str):
        self._key = key

    def process(self, element):
        COLLECTED.setdefault(self._key, []).append(element)


class Collected:
    """The elements of PCollections, once the pipeline has run: `collected.of(pcoll)` while
    building it, `collected[pcoll]` after."""

    def __init__(self):
        self._keys = {}

    def of(self, pcoll, label: str = "Collect") -> None:
        key = uuid.uuid4().hex
        self._keys[id(pcoll)] = key
        COLLECTED[key] = []
        _ = pcoll | f"{label}{key[:6]}" >> beam.ParDo(_Collect(key))

    def __getitem__(self, pcoll) -> list:
        return COLLECTED.pop(self._keys[id(pcoll)])
