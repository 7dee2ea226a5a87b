"""A provider on 127.0.0.1 that answers slowly: one byte every ``trickle_seconds``, or nothing.

Each connection gets the same answer: its first ``trickle_from`` bytes at once,
the rest trickled; then the connection is held open. ``requests`` counts the
requests received, and ``wait_for_requests`` waits for a number of them;
``hold`` keeps the answers back until ``release``.
"""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time

TRICKLE_SECONDS = 0.5
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
NO_MESSAGES = b'{"TotalCount": 0, "Messages": []}'  # Postmark's search, nothing found


class SlowServer:
    """Accepts connections and answers `head` then `body`, trickled from byte `trickle_from`."""

    def __init__(
        self, head: bytes, body: bytes, trickle_from: int, trickle_seconds: float = TRICKLE_SECONDS
    ) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.answer, self.trickle_from = head + body, trickle_from
        self.trickle_seconds = trickle_seconds
        self.stopped = threading.Event()
        self.held = threading.Event()  # set: answers wait for `release`
        self.released = threading.Event()
        self.received = threading.Condition()
        self.requests: list[bytes] = []  # the first bytes of each request
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def wait_for_requests(self, count: int, timeout_seconds: float) -> None:
        """Wait until `count` requests have come; AssertionError after `timeout_seconds`."""
        deadline = time.monotonic() + timeout_seconds
        with self.received:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.requests)} requests came, not {count}"
                self.received.wait(left)

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            try:
                request = connection.recv(65536)
                with self.received:
                    self.requests.append(request)
                    self.received.notify_all()
                if self.held.is_set():
                    self.released.wait()
                connection.sendall(self.answer[: self.trickle_from])
                for byte in self.answer[self.trickle_from :]:
                    if self.stopped.wait(self.trickle_seconds):
                        return
                    connection.sendall(bytes([byte]))
                self.stopped.wait()  # all said (or silent): hold the connection open
            except OSError:
                return

    def hold(self) -> None:
        """Keep each answer from now on until `release`."""
        self.held.set()

    def release(self) -> None:
        """Let the answers held go on."""
        self.released.set()

    def close(self) -> None:
        self.stopped.set()
        self.released.set()
        self.listener.close()


def trickling_body() -> SlowServer:
    """A 200 whose body of about 100 KB comes one byte every TRICKLE_SECONDS."""
    return SlowServer(HEAD, NO_MESSAGES + b" " * 99_000, len(HEAD))


def trickling_headers() -> SlowServer:
    """A 200 whose status line and headers come one byte every TRICKLE_SECONDS."""
    return SlowServer(HEAD, b"{}", 12)


def silent() -> SlowServer:
    """A server that reads the request and says nothing."""
    return SlowServer(b"", b"", 0)


def slow_but_answering(seconds: float) -> SlowServer:
    """Postmark's search finding nothing, complete, trickled over about `seconds`."""
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(NO_MESSAGES)}"
    )
    head_bytes = head.encode() + b"\r\n\r\n"
    return SlowServer(head_bytes, NO_MESSAGES, len(head_bytes), seconds / len(NO_MESSAGES))


def add_ambiguous_intents(session_factory, count: int) -> list[int]:
    """`count` ambiguous welcome mails, each with one attempt an hour old; their ids."""
    from sqlalchemy import update

    from console.models import Attempt, Intent, utcnow
    from console.outbox import enqueue
    from console.vocabulary import AMBIGUOUS

    started = utcnow() - dt.timedelta(hours=1)
    params = {"name": "Bob", "login_url": "https://shop.example.com/login"}
    ids = []
    with session_factory() as session:
        for number in range(count):
            intent = enqueue(
                session, key=f"slow:{number}", to=f"amb{number}@example.com", template="welcome",
                params=params,
            )  # fmt: skip
            session.flush()
            session.add(
                Attempt(intent_id=intent.id, attempt_number=1, lease_token=f"t{number}",
                        started_at=started + dt.timedelta(seconds=number))
            )  # fmt: skip
            update_status = update(Intent).where(Intent.id == intent.id)
            session.execute(update_status.values(status=AMBIGUOUS, attempt_count=1))
            ids.append(intent.id)
        session.commit()
    return ids
