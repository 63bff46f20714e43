"""What every fake service has in common: a threaded HTTP server on a free loopback port, served from a
daemon thread while the fake is entered, and a quiet handler that answers JSON."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    """Subclasses implement ``respond(method)``; ``send_json`` answers."""

    protocol_version = "HTTP/1.1"
    content_type = "application/json"
    # Headers and body go out as two writes: with Nagle on, the body waits for the client's delayed ACK
    # of the headers (40 ms on Linux) on every call of a kept-alive connection.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def send_json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body_bytes(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def respond(self, method: str) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:
        self.respond("GET")

    def do_POST(self) -> None:
        self.respond("POST")

    def do_PATCH(self) -> None:
        self.respond("PATCH")

    def do_DELETE(self) -> None:
        self.respond("DELETE")


class LoopbackServer:
    """``with`` serves ``handler`` at ``address`` (``127.0.0.1:<port>``) until the block ends."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
