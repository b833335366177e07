"""A Hugging Face Hub on loopback for the tests: the endpoints huggingface_hub's
snapshot_download calls (a revision's info, its file tree, each file's HEAD and GET under
/resolve/), serving local folders as model repos. HF_ENDPOINT points huggingface_hub at it.
`requests` records every request's method and path, so a test can tell a download from none."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import threading
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"  # the one revision each repo has


def _files(folder: str) -> dict[str, str]:
    """Repo path -> local path of every file below `folder`."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            found[os.path.relpath(path, folder).replace(os.sep, "/")] = path
    return found


class Hub(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, repos: dict[str, str]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos = {repo: _files(folder) for repo, folder in repos.items()}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def downloads(self) -> list[str]:
        """The files served with their bytes (GET under /resolve/)."""
        with self.lock:
            return [p for m, p in self.requests if m == "GET" and "/resolve/" in p]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Hub

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _send(self, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
        self.send_response(status)
        for k, v in {**headers, "Content-Length": str(len(data))}.items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _json(self, value, body: bool) -> None:
        self._send(200, json.dumps(value).encode(), {"Content-Type": "application/json"}, body)

    def _missing(self, code: str, body: bool) -> None:
        self._send(404, b'{"error": "not found"}', {"X-Error-Code": code,
                                                   "Content-Type": "application/json"}, body)

    def _answer(self, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        with self.server.lock:
            self.server.requests.append((self.command, path))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6:
            repo, what, rev = "/".join(parts[2:4]), parts[4], parts[5]
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo, what, rev = "/".join(parts[:2]), "resolve", parts[3]
        else:
            return self._missing("EntryNotFound", body)
        files = self.server.repos.get(repo)
        if files is None:
            return self._missing("RepoNotFound", body)
        if rev not in ("main", COMMIT):
            return self._missing("RevisionNotFound", body)
        if what == "revision":
            return self._json({"id": repo, "sha": COMMIT,
                               "siblings": [{"rfilename": f} for f in sorted(files)]}, body)
        if what == "tree":
            return self._json([{"type": "file", "path": f, "size": os.path.getsize(p),
                                "oid": _oid(p)} for f, p in sorted(files.items())], body)
        name = "/".join(parts[4:])
        if what != "resolve" or name not in files:
            return self._missing("EntryNotFound", body)
        with open(files[name], "rb") as f:
            data = f.read()
        self._send(200, data, {"ETag": f'"{_oid(files[name])}"', "X-Repo-Commit": COMMIT,
                               "Content-Type": "application/octet-stream"}, body)


def _oid(path: str) -> str:
    """The blob id git gives the file (the ETag the Hub sends for a file not in LFS)."""
    with open(path, "rb") as f:
        data = f.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@contextlib.contextmanager
def serving(repos: dict[str, str]):
    """A Hub serving `repos` (repo id -> local folder) on loopback, until the block ends."""
    hub = Hub(repos)
    thread = threading.Thread(target=hub.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        hub.shutdown()
        hub.server_close()
        thread.join()
