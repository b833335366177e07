"""Lance: the run's rows as one Lance dataset in its folder, `embeddings.lance`
(`lancedb.connect(OUTPUT).open_table("embeddings")`), under the Parquet format's Arrow schema
(so every --vector_dtype is stored as Parquet stores it: float32 and float16 vectors as
fixed-size lists, int8 and binary codes as fixed-size binaries).

Each committed shard set (run_folder/committed_shards.py) writes one Lance fragment: its rows
gathered, then written as one data file under `embeddings.lance/data/` when the set closes. The
manifest's step commits the dataset once, from every set's fragment (a killed attempt's kept
ones included), as its first version: until then no version exists, so a killed or failed run
leaves no readable dataset, and the staging folder publishes the whole dataset like any other
file.

The run's manifest lists every file of the dataset (data, version, transaction files) under
`files["lance"]`, with their sizes and SHA-256; a data file's rows are its fragment's, the
others' 0. pyarrow and pylance are imported inside the functions.
"""

from __future__ import annotations

import json
import os

from beam_embed.pipeline.common.settings.errors import IncompleteInput, one_line

DATASET = "embeddings.lance"  # the run's dataset, in its folder; the table `embeddings`
SUFFIX = ".lance"
_DATA = "/data/"


def _hash(path: str) -> dict:
    import hashlib

    h, n = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            n += len(block)
    return {"bytes": n, "sha256": h.hexdigest()}


def check_writable(output: str, granularity: str) -> None:
    """A ValueError, before anything runs, when the run cannot write a Lance dataset: the
    library is missing, `output` is not a local folder, or the rows are token-level."""
    import importlib.util

    if importlib.util.find_spec("lance") is None:
        raise ValueError("--format lance needs the Lance library (pylance): pip install "
                         "'beam-embed[stores]' (or make extra EXTRA=stores)")
    if "://" in output:
        raise ValueError(f"--format lance writes a local folder, and --output {output!r} is "
                         "not one; expected a local --output, or --format parquet with --store "
                         "lancedb+gs://... to load a LanceDB table on Cloud Storage")
    if granularity != "sentence":
        raise ValueError("--format lance holds sentence vectors; expected --granularity "
                         "sentence, or --format parquet for token vectors")


class Part:
    """One shard set's fragment of the dataset, its rows gathered until the set closes."""

    def __init__(self, output: str, set_name: str, schema, shard_bytes: int):
        self._uri, self._schema = os.path.join(output, DATASET), schema
        self._tables, self._bytes = [], 0
        self.metadata = None

    def encode(self, batch):
        from beam_embed.pipeline.common.output_formats import parquet

        return parquet.table(self._schema, batch)

    def size(self) -> int:
        return self._bytes

    def write(self, encoded) -> None:
        self._tables.append(encoded)
        self._bytes += encoded.nbytes

    def close(self, rows: int) -> dict:
        """Writes the fragment (one data file); {its name relative to the run's folder:
        {"rows", "digest"}}."""
        import pyarrow as pa
        from lance.fragment import LanceFragment

        from beam_embed.pipeline.common.output_formats import parquet

        schema = parquet.arrow_schema(self._schema)
        table = pa.concat_tables(self._tables) if self._tables else schema.empty_table()
        fragment = LanceFragment.create(self._uri, table, schema=schema)
        self.metadata = fragment.to_json()
        self._tables = []
        out = {}
        for data in self.metadata["files"]:
            name = f"{DATASET}/data/{data['path']}"
            out[name] = {"rows": table.num_rows,
                         "digest": _hash(os.path.join(os.path.dirname(self._uri), name))}
        return out


def open_part(output: str, set_name: str, schema, shard_bytes: int) -> Part:
    return Part(output, set_name, schema, shard_bytes)


def finish_parts(output: str, parts: list, schema, index: bool = False) -> dict:
    """Commits the dataset's first version from the fragments (`parts`: their metadata, as
    FragmentMetadata.to_json gives it), numbered in order, then (`index`) an ANN index on each
    vector column; {each file that is not a data file: {"rows": 0, "digest"}}."""
    import lance
    from lance.fragment import FragmentMetadata

    from beam_embed.pipeline.common.output_formats import parquet

    fragments = []
    for i, part in enumerate(parts):
        data = {**part, "id": i}
        fragments.append(FragmentMetadata.from_json(json.dumps(data)))
    uri = os.path.join(output, DATASET)
    dataset = lance.LanceDataset.commit(uri, lance.LanceOperation.Overwrite(
        parquet.arrow_schema(schema), fragments))
    if index:
        _index(dataset, schema)
    found = {}
    for root, _, names in os.walk(uri):
        for n in names:
            name = os.path.relpath(os.path.join(root, n), output).replace(os.sep, "/")
            if _DATA not in f"/{name}":
                found[name] = {"rows": 0, "digest": _hash(os.path.join(root, n))}
    return found


MIN_INDEXED_ROWS = 256  # PQ trains 256 centroids per sub-vector: fewer rows cannot train it


def _index(dataset, schema) -> None:
    """An IVF-PQ index by cosine on each vector column: about sqrt(rows) partitions (at most
    256), sub-vectors of 8 dimensions where the width divides so. Too few rows to train one:
    none (LanceDB then searches exactly, as without the flag)."""
    import math

    rows = dataset.count_rows()
    if rows < MIN_INDEXED_ROWS:
        return
    for column, storage in schema.storage():
        width = storage.width
        subs = width // 8 if width % 8 == 0 else next(d for d in (4, 2, 1) if width % d == 0)
        dataset.create_index(column, index_type="IVF_PQ", metric="cosine",
                             num_partitions=max(1, min(256, int(math.sqrt(rows)))),
                             num_sub_vectors=max(1, subs))


def write(output: str, schema, num_shards: int, in_bundles: bool = False):
    """Not used: the dataset is always written in committed shard sets (open_part)."""
    raise ValueError("--format lance is written by the job's shard sets")


def count_rows(path: str) -> int:
    """A data file's rows (its Lance file footer); 0 for the dataset's other files."""
    if _DATA not in path.replace(os.sep, "/"):
        return 0
    try:
        from lance.file import LanceFileReader

        return LanceFileReader(path).metadata().num_rows
    except (OSError, ValueError, RuntimeError) as e:
        raise IncompleteInput(f"{path} is damaged: not a readable Lance data file "
                              f"({one_line(e)}); restore it or rerun the job") from e
