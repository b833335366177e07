"""Milvus: Milvus Lite in a file (`milvus:///FILE.db`) or a server (`milvus://HOST:PORT`). The
collection's primary key is the record's id (VARCHAR), its `vector` field is indexed for cosine
distance, and the payload's other fields are dynamic fields."""

from __future__ import annotations

import logging

import numpy as np

from beam_embed.pipeline.common.stores.base import Store
from beam_embed.pipeline.common.stores.rows import RowBatch
from beam_embed.process.log import is_verbose
from beam_embed.process.private_apis.stdlib import import_keeping_handlers

ID_BYTES = 65535  # Milvus's longest VARCHAR


class MilvusStore(Store):
    def __init__(self, target, width: int):
        super().__init__(target, width)
        import_keeping_handlers("pymilvus")
        from pymilvus import DataType, MilvusClient

        if not is_verbose():  # its own logger, which it set to print warnings such as mvccTs's
            logging.getLogger("pymilvus").setLevel(logging.ERROR)

        uri = target.path if target.local else f"http://{target.host}"
        self.client = MilvusClient(uri=uri, timeout=10)
        name = target.table
        if self.client.has_collection(name):
            fields = self.client.describe_collection(name)["fields"]
            vector = next((f for f in fields if f["name"] == "vector"), None)
            self.check_width(vector and vector.get("params", {}).get("dim"))
            self.client.load_collection(name)
            return
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=True)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=ID_BYTES)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=width)
        index = self.client.prepare_index_params()
        index.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
        self.client.create_collection(name, schema=schema, index_params=index)

    def upsert(self, batch: RowBatch) -> None:
        vectors = np.asarray(batch.vectors, np.float32).tolist()
        rows = [{**{k: v for k, v in p.items() if v is not None}, "vector": vec}
                for p, vec in zip(batch.payloads, vectors)]
        for row in rows:
            if len(row["id"].encode()) > ID_BYTES:
                raise ValueError(f"{self.target.shown()}: id {row['id'][:60]!r}… is longer than "
                                 f"Milvus's {ID_BYTES:,}-byte primary key")
        self.client.upsert(self.target.table, data=rows)

    def ids(self) -> set[str]:
        found = set()
        it = self.client.query_iterator(self.target.table, batch_size=4096, filter="",
                                        output_fields=["id"])
        while batch := it.next():
            found.update(r["id"] for r in batch)
        it.close()
        return found

    def delete(self, ids: list[str]) -> None:
        for start in range(0, len(ids), 4096):
            self.client.delete(self.target.table, ids=ids[start:start + 4096])

    def close(self) -> None:
        self.client.flush(self.target.table)
        self.client.close()


def open_store(target, width: int) -> MilvusStore:
    return MilvusStore(target, width)
