"""The request handling shared by the local servers that play providers' send APIs (the
drill's, console.drill.provider_play, and the test suite's, tests/support/provider_apis.py):
HTTP/1.1 kept quiet, a request's body and headers read, a canned answer written out, or
the connection dropped without one.
"""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler
from typing import Any

from console.drill.provider_shapes import Canned


class ProviderHandler(BaseHTTPRequestHandler):
    """One request to a played provider; subclasses answer its methods (``do_POST``...)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _lowered_headers(self) -> dict[str, str]:
        """The request's headers, their names in lower case."""
        return {name.lower(): value for name, value in self.headers.items()}

    def _read_request(self) -> tuple[bytes, dict[str, str]]:
        """The request's body (its ``Content-Length`` bytes) and its lowered headers."""
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        return body, self._lowered_headers()

    def _hang_up(self) -> None:
        """Drop the connection without an answer."""
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, canned: Canned) -> None:
        """Write `canned` out: its status, its headers, a Content-Length and its body."""
        self.send_response(canned.status)
        for name, value in canned.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(canned.body)))
        self.end_headers()
        self.wfile.write(canned.body)
