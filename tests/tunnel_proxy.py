"""An HTTP proxy for tests that tunnels nowhere: it answers every request (a CONNECT, a plain
GET) with one status line and closes the connection. "200 Connection established" lets a
client's first connection open without anything leaving loopback; "502 Bad Gateway" is what a
proxy that cannot reach the host answers."""

from __future__ import annotations

import contextlib
import socketserver
import threading


@contextlib.contextmanager
def tunnel_proxy(status: str = "200 Connection established"):
    """A proxy on a free loopback port answering `status`; yields its URL, stops after."""

    class Answer(socketserver.StreamRequestHandler):
        timeout = 10

        def handle(self) -> None:
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # the request's head
                pass
            self.wfile.write(f"HTTP/1.1 {status}\r\n\r\n".encode())

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Answer) as server:
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join(10)
