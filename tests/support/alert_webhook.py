"""A real webhook that records the alerts posted to it, and the settings alert tests use."""

from __future__ import annotations

import http.server
import json
import threading

from console.config import load_settings


class Webhook:
    """A real HTTP server on 127.0.0.1 that records JSON posts and answers `status`."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.status = 204
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
                length = int(self.headers["Content-Length"])
                hook.received.append(json.loads(self.rfile.read(length)))
                self.send_response(hook.status)
                self.end_headers()

            def log_message(self, *args) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def states(self) -> list[tuple[str, str]]:
        return [(body["condition"], body["state"]) for body in self.received]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def settings_for(tmp_path, **variables):
    environ = {
        "CONSOLE_DATABASE_URL": "sqlite://",
        "CONSOLE_SECRET_KEY": "k" * 32,
        # no worker runs here: pending mail (the alert emails too) only ages when a test says so
        "CONSOLE_ALERT_PENDING_AGE_CRITICAL_SECONDS": "86400",
        "CONSOLE_ALERT_PENDING_AGE_BULK_SECONDS": "86400",
        **variables,
    }
    return load_settings(environ, instance_path=tmp_path)
