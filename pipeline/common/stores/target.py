"""A store's URI read once into what its module needs: `qdrant:///PATH`, `qdrant://HOST:PORT`,
`milvus:///FILE.db`, `milvus://HOST:PORT`, `postgresql://USER@HOST/DB` (libpq's URI, a unix
socket as `?host=/folder`), `lancedb:///PATH`, `lancedb+gs://BUCKET/PATH`,
`bigquery://PROJECT.DATASET.TABLE` (its table is the URI's: --store_table does not apply). A
local store's path may also be relative, without the slashes: `lancedb:vectors`,
`milvus:vectors.db`."""

from __future__ import annotations

import dataclasses
import os
import re
from urllib.parse import urlsplit

LOCAL = ("lancedb", "qdrant", "milvus")  # stores with a local mode in a file or folder
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# BigQuery's own rules: a project id (6-30 lowercase letters, digits, hyphens; a domain-scoped
# one as example.com:my-project), a dataset (letters, digits, underscores, at most 1,024), a
# table (letters, digits, underscores, hyphens, at most 1,024: the ones a URI carries plainly)
BQ_PROJECT = re.compile(r"(?:[a-z0-9][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")
BQ_DATASET = re.compile(r"[A-Za-z0-9_]{1,1024}")
BQ_TABLE = re.compile(r"[\w-]{1,1024}")
BQ_FORM = "bigquery://PROJECT.DATASET.TABLE"


@dataclasses.dataclass(frozen=True)
class StoreTarget:
    uri: str  # as the user wrote it
    scheme: str
    path: str | None  # a local file or folder (local modes), absolute
    host: str | None  # host:port of a server
    table: str  # the collection or table

    @property
    def local(self) -> bool:
        return self.path is not None

    def shown(self) -> str:
        """The URI without a password."""
        return re.sub(r"://([^:/@]+):[^@/]*@", r"://\1:***@", self.uri)


def parse_store_uri(uri: str, table: str = "embeddings") -> StoreTarget:
    """A StoreTarget, or a ValueError naming the bad part and the valid forms."""
    from beam_embed.pipeline.common.stores import STORES

    scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
    if scheme not in STORES:
        raise ValueError(f"--store {uri!r}: unknown store; expected a URI starting with one of "
                         f"{', '.join(s + '://' for s in STORES)}")
    if not NAME.fullmatch(table):
        raise ValueError(f"--store_table {table!r}: expected a name of letters, digits and "
                         "underscores, starting with a letter or underscore (at most 63)")
    if scheme == "bigquery":
        return _bigquery(uri)
    if "://" not in uri and scheme in LOCAL:  # lancedb:relative/folder
        rest = uri.split(":", 1)[1]
        if not rest:
            raise ValueError(f"--store {uri!r}: no path; expected {scheme}:PATH or "
                             f"{scheme}:///ABSOLUTE/PATH")
        return StoreTarget(uri, scheme, os.path.abspath(rest), None, table)
    if "://" not in uri:
        raise ValueError(f"--store {uri!r}: expected {scheme}://...")
    parts = urlsplit(uri)
    if scheme in ("postgresql", "postgres"):
        return StoreTarget(uri, scheme, None, parts.hostname or "(local socket)", table)
    if scheme == "lancedb+gs":
        if not parts.netloc:
            raise ValueError(f"--store {uri!r}: expected lancedb+gs://BUCKET/PATH")
        return StoreTarget(uri, scheme, None, f"gs://{parts.netloc}{parts.path}", table)
    if parts.netloc:  # a server
        if scheme == "lancedb":
            raise ValueError(f"--store {uri!r}: a LanceDB database is a folder: "
                             "lancedb:///PATH (three slashes) or lancedb+gs://BUCKET/PATH")
        if not re.fullmatch(r"[^:/]+:\d+", parts.netloc):
            raise ValueError(f"--store {uri!r}: expected {scheme}://HOST:PORT for a server, or "
                             f"{scheme}:///PATH for a local store")
        return StoreTarget(uri, scheme, None, parts.netloc, table)
    if not parts.path or parts.path == "/":
        raise ValueError(f"--store {uri!r}: no path; expected {scheme}:///PATH")
    return StoreTarget(uri, scheme, os.path.abspath(parts.path), None, table)


def _bigquery(uri: str) -> StoreTarget:
    """bigquery://PROJECT.DATASET.TABLE: the table's three names, each checked by BigQuery's
    rules; host is PROJECT.DATASET, table the table."""
    rest = uri.split("://", 1)[1] if "://" in uri else ""
    parts = rest.rsplit(".", 2)  # a domain-scoped project holds dots itself
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"--store {uri!r}: expected {BQ_FORM} (three names, dot-separated)")
    for what, name, rule, valid in (
            ("project", parts[0], BQ_PROJECT, "6-30 lowercase letters, digits and hyphens, "
             "starting with a letter"),
            ("dataset", parts[1], BQ_DATASET, "letters, digits and underscores"),
            ("table", parts[2], BQ_TABLE, "letters, digits, underscores and hyphens")):
        if not rule.fullmatch(name):
            raise ValueError(f"--store {uri!r}: {name!r} is not a BigQuery {what} name; "
                             f"expected {valid} ({BQ_FORM})")
    return StoreTarget(uri, "bigquery", None, f"{parts[0]}.{parts[1]}", parts[2])
