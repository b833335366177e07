"""A tiny Cloud Storage of our own that honours `ifGenerationMatch`, for the claim's tests.

The emulator (tests/gcs_emulator.py) ignores preconditions, so an exclusive create there always
succeeds. This server answers the few JSON-API calls google-cloud-storage makes for the claim
(pipeline/common/run_folder/claim_stores.py's _GcsStore): a multipart upload, an object's metadata,
its media download and its delete, each with `ifGenerationMatch` checked and applied under one lock,
as Cloud Storage does: the check and the write are one step. Point STORAGE_EMULATOR_HOST at
`url` and the production client talks to it. `calls` records (method, object, precondition).
"""

from __future__ import annotations

import email.parser
import itertools
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeGcs:
    def __init__(self):
        self.objects: dict[tuple[str, str], tuple[int, bytes]] = {}  # (bucket, name) -> gen, data
        self.calls: list[tuple[str, str, str | None]] = []
        self.media_generation = 0  # the last download's, read under the lock
        self._lock = threading.Lock()
        self._generations = itertools.count(1000)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeGcs:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _resource(self, bucket: str, name: str) -> dict:
        generation, data = self.objects[(bucket, name)]
        return {"kind": "storage#object", "bucket": bucket, "name": name,
                "generation": str(generation), "metageneration": "1", "size": str(len(data)),
                "id": f"{bucket}/{name}/{generation}"}

    def answer(self, method: str, path: str, query: dict, headers, body: bytes):
        """(status, JSON or bytes) for one request; called under the lock."""
        parts = [urllib.parse.unquote(p) for p in path.split("/")]
        match = query.get("ifGenerationMatch", [None])[0]
        if method == "POST" and parts[1:5] == ["upload", "storage", "v1", "b"]:
            bucket = parts[5]
            message = email.parser.BytesParser().parsebytes(
                b"Content-Type: " + headers["Content-Type"].encode() + b"\r\n\r\n" + body)
            meta, media = message.get_payload()
            name = json.loads(meta.get_payload(decode=True))["name"]
            data = media.get_payload(decode=True)
        elif parts[1:4] == ["download", "storage", "v1"]:
            bucket, name, data = parts[5], "/".join(parts[7:]), None
        else:  # /storage/v1/b/{bucket}/o/{name}
            bucket, name, data = parts[4], "/".join(parts[6:]), None
        self.calls.append((method, name, match))
        current = self.objects.get((bucket, name), (0, b""))[0]  # 0: no live object
        if match is not None and int(match) != current:
            return 412, {"error": {"code": 412, "message": "Precondition Failed"}}
        if method == "POST":
            self.objects[(bucket, name)] = (next(self._generations), data)
            return 200, self._resource(bucket, name)
        if not current:
            return 404, {"error": {"code": 404, "message": "No such object"}}
        if method == "DELETE":
            del self.objects[(bucket, name)]
            return 204, b""
        if query.get("alt") == ["media"]:  # sent with x-goog-generation, as GCS does
            self.media_generation = current
            return 200, self.objects[(bucket, name)][1]
        return 200, self._resource(bucket, name)

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                url = urllib.parse.urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with fake._lock:
                    status, out = fake.answer(self.command, url.path,
                                              urllib.parse.parse_qs(url.query), self.headers,
                                              body)
                    generation = (str(fake.media_generation) if isinstance(out, bytes) and out
                                  else None)
                raw = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream"
                                 if isinstance(out, bytes) else "application/json")
                self.send_header("Content-Length", str(len(raw)))
                if generation:  # a download's: the client takes the object's generation from it
                    self.send_header("X-Goog-Generation", generation)
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, *args):
                pass

        return Handler
