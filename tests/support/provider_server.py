"""A real HTTP server on 127.0.0.1 playing a Resend-style email provider.

It checks the bearer key, deduplicates by ``Idempotency-Key`` (a repeated key
returns the first answer and sends nothing new) and can be scripted to
misbehave on the next requests: answer 400/429/500/503, accept and then never
answer, accept and then answer 500, or accept and reset the connection mid-response.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG_LIMIT_SECONDS = 5.0


class ProviderServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, api_key: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api_key = api_key
        self.script: collections.deque[str] = collections.deque()
        self.retry_after = "7"
        self.sends: dict[str, dict[str, Any]] = {}  # Idempotency-Key -> the accepted email
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()  # ends every hanging answer
        self.lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up on a scripted misbehaviour is expected here."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def next(self, *behaviours: str) -> None:
        """Script the next requests: ok, 400, 429, 500, 503, accept-hang, accept-500, reset."""
        self.script.extend(behaviours)

    def accept(self, key: str, payload: dict[str, Any]) -> tuple[str, bool]:
        """Store one email under its key once; return its id and whether it is new."""
        with self.lock:
            if key in self.sends:
                return self.sends[key]["id"], False
            self.sends[key] = {"id": f"prov-{uuid.uuid4().hex[:12]}", "payload": payload}
            return self.sends[key]["id"], True


class _Handler(BaseHTTPRequestHandler):
    server: ProviderServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        server = self.server
        with server.lock:
            behaviour = server.script.popleft() if server.script else "ok"
            server.requests.append({"headers": dict(self.headers), "body": body})
        if self.path != "/emails":
            return self._answer(404, {"message": "not found"})
        if self.headers.get("Authorization") != f"Bearer {server.api_key}":
            return self._answer(401, {"message": "API key is invalid"})
        if behaviour in ("400", "429", "500", "503"):
            extra = {"Retry-After": server.retry_after} if behaviour in ("429", "503") else {}
            return self._answer(int(behaviour), {"message": f"scripted {behaviour}"}, extra)
        payload = json.loads(body)
        if not all(payload.get(field) for field in ("from", "to", "subject")):
            return self._answer(422, {"message": "from, to and subject are required"})
        provider_id, _ = server.accept(self.headers.get("Idempotency-Key", ""), payload)
        if behaviour == "accept-hang":
            server.release.wait(HANG_LIMIT_SECONDS)
            return self.close_connection_now()
        if behaviour == "accept-500":
            return self._answer(500, {"message": "internal error"})
        if behaviour == "reset":
            self.wfile.write(b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"id": ')
            self.wfile.flush()
            return self.close_connection_now()
        self._answer(200, {"id": provider_id})

    def close_connection_now(self) -> None:
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        encoded = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(encoded)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(encoded)


def start_provider(api_key: str) -> ProviderServer:
    server = ProviderServer(api_key)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return server


def stop_provider(server: ProviderServer) -> None:
    server.release.set()
    server.shutdown()
    server.server_close()
