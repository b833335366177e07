"""Whether gs:// requests can reach Cloud Storage at all: asked once, before the first request.

google-cloud-storage retries a request whose connection fails for up to 120 s (its default
retry takes a connection error for a passing one), and then raises its RetryError. A machine
with no network, a STORAGE_EMULATOR_HOST that nothing listens on, or a proxy that cannot reach
Google would wait that long for each command. So before the process's first gs:// request (the
credentials look, gcs_auth.py, runs once a process just before it), one connection is opened the
way the client would open it: to the endpoint the client picks (STORAGE_EMULATOR_HOST,
API_ENDPOINT_OVERRIDE, else storage.googleapis.com), through the proxy the environment names
for it (HTTPS_PROXY, NO_PROXY, ... as requests reads them; an https endpoint through a CONNECT
tunnel, which is where a proxy that cannot reach Google says so). It fails within
PROBE_TIMEOUT_S with one line naming the endpoint, the proxy if any, and the cause. Once the
connection opens, the client's own retries stay in place for the failures that do pass.
"""

from __future__ import annotations

import base64
import http.client
import os
import socket
import threading
from urllib.parse import unquote, urlsplit

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"  # google-cloud-storage's: the emulator's URL
# DNS and a TCP (and proxy) handshake; a reachable endpoint answers in well under a second.
PROBE_TIMEOUT_S = 10.0


class StorageUnreachable(OSError):
    """No connection to Cloud Storage's endpoint (or the proxy to it) could be opened. An
    OSError, so the one-line error reports it; not a ConnectionError, which the storage client
    would retry if it ever raised inside a retried call."""


def storage_endpoint() -> str:
    """The URL google-cloud-storage sends gs:// requests to, as it decides it."""
    from google.cloud import storage

    url = storage.Client.create_anonymous_client().api_endpoint
    return url if "://" in url else f"http://{url}"


def _proxy_for(url: str) -> str | None:
    """The proxy requests would use for `url` (from the environment), or None."""
    from requests.utils import get_environ_proxies, select_proxy

    return select_proxy(url, get_environ_proxies(url))


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def _connect(url: str, proxy: str | None, timeout: float) -> None:
    """Opens (and closes) the connection a request to `url` starts with; an OSError if it
    cannot."""
    host, port = _host_port(url)
    if proxy is None:
        socket.create_connection((host, port), timeout=timeout).close()
        return
    proxy_host, proxy_port = _host_port(proxy if "://" in proxy else f"http://{proxy}")
    connection = http.client.HTTPConnection(proxy_host, proxy_port, timeout=timeout)
    try:
        if urlsplit(url).scheme == "https":  # the tunnel the TLS connection goes through
            parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            headers = {}
            if parts.username:
                user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
                headers["Proxy-Authorization"] = \
                    "Basic " + base64.b64encode(user.encode()).decode()
            connection.set_tunnel(host, port, headers=headers)
        connection.connect()  # raises OSError("Tunnel connection failed: 502 ...") when refused
    finally:
        connection.close()


def _why_not(url: str, proxy: str | None, timeout: float) -> str | None:
    """None when the connection opens within `timeout` (the name lookup included, which has no
    timeout of its own); else why not, in a few words."""
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            _connect(url, proxy, timeout)
            outcome.append(None)
        except OSError as e:
            outcome.append(e.strerror or str(e) or type(e).__name__)

    thread = threading.Thread(target=attempt, name="beam-embed-gcs-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return outcome[0] if outcome else f"no answer within {timeout:g} s"


def _named(url: str, proxy: str | None) -> str:
    host, port = _host_port(url)
    where = f"{host}:{port}"
    if os.environ.get(EMULATOR_ENV):
        where += f", the {EMULATOR_ENV} endpoint"
    if proxy is not None:
        proxy_host, proxy_port = _host_port(proxy if "://" in proxy else f"http://{proxy}")
        where += f", through the proxy {proxy_host}:{proxy_port}"  # never its credentials
    return where


def check_reachable(timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raises StorageUnreachable, in one line naming the endpoint and the cause, when no
    connection to Cloud Storage opens within `timeout` seconds."""
    url = storage_endpoint()
    proxy = _proxy_for(url)
    why = _why_not(url, proxy, timeout)
    if why is not None:
        raise StorageUnreachable(f"cannot connect to Cloud Storage ({_named(url, proxy)}): "
                                 f"{why}; gs:// paths cannot be read or written")
