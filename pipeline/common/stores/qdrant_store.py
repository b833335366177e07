"""Qdrant, in local mode (`qdrant:///PATH`, a folder the client owns while open) or on a server
(`qdrant://HOST:PORT`). Qdrant's point ids are integers or UUIDs: each record's id maps to a
UUID (version 5, from the id), and the id itself is in the payload (`id`)."""

from __future__ import annotations

import uuid

import numpy as np

from beam_embed.pipeline.common.stores.base import Store
from beam_embed.pipeline.common.stores.rows import RowBatch

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/beam-embed/ids")


def point_id(record_id: str) -> str:
    return str(uuid.uuid5(NAMESPACE, record_id))


class QdrantStore(Store):
    def __init__(self, target, width: int):
        super().__init__(target, width)
        from qdrant_client import QdrantClient, models

        self.models = models
        if target.local:
            self.client = QdrantClient(path=target.path)
        else:
            host, port = target.host.rsplit(":", 1)
            self.client = QdrantClient(host=host, port=int(port), timeout=10,
                                       check_compatibility=False)  # its warning is noise
        name = target.table
        if self.client.collection_exists(name):
            params = self.client.get_collection(name).config.params.vectors
            self.check_width(getattr(params, "size", None))
        else:
            self.client.create_collection(name, vectors_config=models.VectorParams(
                size=width, distance=models.Distance.COSINE))

    def upsert(self, batch: RowBatch) -> None:
        self.client.upsert(self.target.table, points=self.models.Batch(
            ids=[point_id(i) for i in batch.ids],
            vectors=np.asarray(batch.vectors, np.float32).tolist(), payloads=batch.payloads),
            wait=True)

    def ids(self) -> set[str]:
        found, offset = set(), None
        while True:
            points, offset = self.client.scroll(self.target.table, limit=4096, offset=offset,
                                                with_payload=["id"], with_vectors=False)
            found.update(p.payload.get("id") for p in points)
            if offset is None:
                return found

    def delete(self, ids: list[str]) -> None:
        for start in range(0, len(ids), 4096):
            self.client.delete(self.target.table, points_selector=self.models.PointIdsList(
                points=[point_id(i) for i in ids[start:start + 4096]]), wait=True)

    def close(self) -> None:
        self.client.close()


def open_store(target, width: int) -> QdrantStore:
    return QdrantStore(target, width)
