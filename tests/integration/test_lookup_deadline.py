"""Every lookup has one deadline: connect and the whole answer, however slowly it comes.

Servers on 127.0.0.1 that trickle the body, trickle the headers (one byte every
0.5 s) or say nothing; the lookup gives up at its deadline and says the
provider gave no answer yet. Only "well within" bounds are asserted.
"""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time

import pytest

from console.core.asking import FAILED, Question
from console.transports.lookup_core import ProviderLookup
from console.transports.postmark_lookup import PostmarkLookupApi
from console.transports.sendgrid_lookup import SendGridLookupApi

DEADLINE_SECONDS = 2.0
WELL_WITHIN_SECONDS = 15.0
TRICKLE_SECONDS = 0.5
QUESTION = Question(
    intent_id=7,
    message_id="<7.abc@shop.example.com>",
    recipient="amb@example.com",
    template="welcome",
    attempted_at=dt.datetime(2026, 5, 20, 10, 0, tzinfo=dt.UTC),
)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"


class SlowServer:
    """Accepts connections and answers `head` then `body`, one byte every TRICKLE_SECONDS."""

    def __init__(self, head: bytes, body: bytes, trickle_from: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.answer, self.trickle_from = head + body, trickle_from
        self.stopped = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            try:
                connection.sendall(self.answer[: self.trickle_from])
                for byte in self.answer[self.trickle_from :]:
                    if self.stopped.wait(TRICKLE_SECONDS):
                        return
                    connection.sendall(bytes([byte]))
                self.stopped.wait()  # all said (or silent): hold the connection open
            except OSError:
                return

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()


SERVERS = {
    "trickling body": lambda: SlowServer(
        HEAD, b'{"TotalCount": 0, "Messages": []}' + b" " * 99_000, len(HEAD)
    ),
    "trickling headers": lambda: SlowServer(HEAD, b"{}", 12),
    "silent": lambda: SlowServer(b"", b"", 0),
}


@pytest.fixture(params=list(SERVERS))
def slow_server(request):
    server = SERVERS[request.param]()
    yield server
    server.close()


@pytest.mark.parametrize(
    "api_for",
    [lambda url: PostmarkLookupApi(url, "token"), lambda url: SendGridLookupApi(url, "SG.key")],
    ids=["postmark", "sendgrid"],
)
def test_a_slow_provider_is_given_up_at_the_deadline(slow_server, api_for):
    lookup = ProviderLookup(api_for(slow_server.base_url), timeout_seconds=DEADLINE_SECONDS)
    started = time.monotonic()
    try:
        finding = lookup.ask(QUESTION)
    finally:
        lookup.close()
    assert time.monotonic() - started < WELL_WITHIN_SECONDS
    assert finding.said == FAILED and finding.unanswered
    assert "no answer" in finding.detail
