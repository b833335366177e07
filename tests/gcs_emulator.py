"""A Cloud Storage emulator (the gcp-storage-emulator package of the dev extra) in a process of
its own, on a free loopback port, with one bucket: what the gs:// tests read and write through.

Its own process, not a thread of pytest's: a command under test that runs in pytest's process
would otherwise share the interpreter (and its lock) with the server answering it. Run as a
script, it binds port 0, prints the port it got and serves until stdin closes, so there is no
race for a port and the server ends with the tests even when pytest is killed.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import urllib.request
import uuid

BUCKET = "bkt"
START_TIMEOUT_S = 60


@contextlib.contextmanager
def running_emulator(bucket: str = BUCKET, host: str = "127.0.0.1", held: str = ""):
    """Starts the emulator on `host` and yields its URL (for STORAGE_EMULATOR_HOST); stops it
    after. `held`: objects whose names hold it are never deleted (_hold). Raises RuntimeError,
    with the emulator's own output, when it does not start."""
    process = subprocess.Popen([sys.executable, __file__, bucket, host, held],
                               stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = _first_line(process)
        if not line.strip().isdigit():
            process.kill()
            raise RuntimeError(f"the Cloud Storage emulator did not start: {line!r} "
                               f"{process.stderr.read()[-3000:]}")
        url = f"http://{host}:{int(line)}"
        with urllib.request.urlopen(url + "/", timeout=10) as answer:  # its health check
            assert answer.read() == b"OK"
        yield url
    finally:
        process.stdin.close()  # the script's signal to stop
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class GcsFolder:
    """A folder of the emulator's bucket, read and written with google-cloud-storage's own
    client pointed at the emulator: not through the code under test."""

    def __init__(self, url: str, prefix: str, bucket: str = BUCKET):
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": url})
        self.url, self.prefix, self.bucket = url, prefix.strip("/"), client.bucket(bucket)

    @classmethod
    def new(cls, url: str, name: str) -> GcsFolder:
        """A folder of its own in the emulator's bucket, named after `name`."""
        return cls(url, f"{re.sub(r'[^A-Za-z0-9_-]+', '-', name)[:60]}-{uuid.uuid4().hex[:6]}")

    def path(self, name: str = "") -> str:
        """The gs:// path of `name` in this folder."""
        return f"gs://{self.bucket.name}/{self.prefix}" + (f"/{name}" if name else "")

    def upload(self, name: str, data: bytes | str) -> str:
        self.bucket.blob(f"{self.prefix}/{name}").upload_from_string(data)
        return self.path(name)

    def upload_tree(self, local: str, name: str) -> str:
        """Every file under the local folder `local`, as `name/...`."""
        for root, _, files in os.walk(local):
            for file in files:
                relative = os.path.relpath(os.path.join(root, file), local).replace(os.sep, "/")
                self.bucket.blob(f"{self.prefix}/{name}/{relative}").upload_from_filename(
                    os.path.join(root, file))
        return self.path(name)

    def read(self, name: str) -> bytes:
        return self.bucket.blob(f"{self.prefix}/{name}").download_as_bytes()

    def snapshot(self, sub: str = "") -> dict[str, bytes]:
        """{name relative to `sub`: its bytes} of every object under `sub`."""
        base = f"{self.prefix}/{sub.strip('/')}/" if sub else f"{self.prefix}/"
        return {b.name[len(base):]: b.download_as_bytes()
                for b in self.bucket.list_blobs(prefix=base)}

    def download(self, sub: str, local: str) -> str:
        """The objects under `sub` written under the local folder `local` (made): `local`."""
        for name, data in self.snapshot(sub).items():
            target = os.path.join(local, *name.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
        return local


def use_emulator(patch, url: str, cache: str) -> None:
    """This process's gs:// paths on the emulator (`patch`: a pytest MonkeyPatch) with the
    commands' credentials look in place; gs:// models copied into `cache`."""
    from beam_embed.process import gcs_auth

    patch.setenv(gcs_auth.EMULATOR_ENV, url)
    patch.setenv("BEAM_EMBED_CACHE", cache)
    gcs_auth.install()


def _first_line(process: subprocess.Popen) -> str:
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    return got[0] if got else f"(nothing within {START_TIMEOUT_S} s)"


def _hold(marker: str) -> None:
    """Objects whose names hold `marker` are not deleted: their deletes, one at a time or in a
    batch, answer 403 as Cloud Storage's do for an object under a hold (or a caller without
    delete permission). The emulator has neither holds nor permissions."""
    from http import HTTPStatus

    from gcp_storage_emulator import server
    from gcp_storage_emulator.handlers import objects

    text = "Object is under active Temporary hold and cannot be deleted, overwritten or archived"
    refusal = {"error": {"code": 403, "message": text,
                         "errors": [{"message": text, "domain": "global", "reason": "forbidden"}]}}
    one, batched = objects.delete, objects._BATCH_METHOD_HANDLERS["DELETE"]

    def delete(request, response, storage, *args, **kwargs):
        if marker not in request.params["object_id"]:
            return one(request, response, storage, *args, **kwargs)
        response.status = HTTPStatus.FORBIDDEN
        response.json(refusal)

    def delete_in_a_batch(request, item, storage, bucket_name, object_id, meta, response):
        if not object_id or marker not in object_id:
            return batched(request, item, storage, bucket_name, object_id, meta, response)
        objects._batch_write_json(response, "HTTP/1.1 403 Forbidden", refusal)
        return True

    objects._BATCH_METHOD_HANDLERS["DELETE"] = delete_in_a_batch
    routes = [handlers for _, handlers in server.HANDLERS if handlers.get("DELETE") is one]
    assert routes, "the emulator no longer routes deletes where this expects"
    for handlers in routes:
        handlers["DELETE"] = delete


def _serve(bucket: str, host: str = "127.0.0.1", held: str = "") -> None:
    import logging

    from gcp_storage_emulator.server import create_server

    logging.disable(logging.WARNING)  # a request log line per call otherwise
    if held:
        _hold(held)
    server = create_server(host, 0, in_memory=True, default_bucket=bucket)
    server.start()
    print(server._api._httpd.server_address[1], flush=True)
    sys.stdin.read()  # until the tests close it (or die)
    server.stop()


if __name__ == "__main__":
    _serve(*sys.argv[1:4])
