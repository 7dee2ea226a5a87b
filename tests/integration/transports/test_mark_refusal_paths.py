"""A refused ``data_sent`` mark stops the body on every path the body can take: DATA
from a relay without extensions, DATA beside the mark (PIPELINING), one BDAT chunk
(CHUNKING, with and without PIPELINING), and the HTTP provider's request; on SQLite
and PostgreSQL.

Each case changes the database just before the worker asks for the mark: the
recipient suppressed, or the attempt taken back by the lease-expiry sweep. The relay
or provider then holds the other email only, and the refused one is never "submitted".
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from console.models import Attempt, Intent
from console.transports.http import HttpTransport
from console.transports.smtp import SmtpTransport
from console.vocabulary import DATA_SENT, SUBMITTED, SUPPRESSED
from tests.support.orders import enqueue_orders
from tests.support.provider_server import start_provider, stop_provider
from tests.support.send_changes import suppress, sweep
from tests.support.smtp_relay import RawRelay

API_KEY = "re_test_mark_refusal"
TIMEOUT_SECONDS = 10.0  # a loaded machine is slow; nothing here waits for it to pass
PATHS = {
    "data": {"pipelining": False, "chunking": False},
    "data-pipelining": {"pipelining": True, "chunking": False},
    "bdat": {"pipelining": False, "chunking": True},
    "bdat-pipelining": {"pipelining": True, "chunking": True},
}


class SmtpPath:
    """A raw relay offering the extensions of one path, and the recipients it got bodies for."""

    def __init__(self, **extensions) -> None:
        self.relay = RawRelay(**extensions)

    def transport(self) -> SmtpTransport:
        return SmtpTransport(self.relay.url, timeout_seconds=TIMEOUT_SECONDS)

    def bodies_for(self) -> list[str]:
        return [_recipient(body) for body in self.relay.bodies]

    def stop(self) -> None:
        self.relay.stop()


class HttpPath:
    """A local HTTP server playing Resend's API, and the recipients it accepted."""

    def __init__(self) -> None:
        self.server = start_provider(API_KEY)

    def transport(self) -> HttpTransport:
        return HttpTransport(self.server.base_url, API_KEY, timeout_seconds=TIMEOUT_SECONDS)

    def bodies_for(self) -> list[str]:
        return sorted(send["payload"]["to"][0] for send in self.server.sends.values())

    def stop(self) -> None:
        stop_provider(self.server)


def _recipient(body: bytes) -> str:
    for line in body.split(b"\r\n"):
        if line.lower().startswith(b"to:"):
            return line[3:].strip().decode()
    raise AssertionError(f"no To: header in {body[:200]!r}")


@pytest.fixture(params=[*PATHS, "http"])
def path(request):
    started = HttpPath() if request.param == "http" else SmtpPath(**PATHS[request.param])
    yield started
    started.stop()


class BeforeMark:
    """Wrap a transport: run `change(email)` just before the worker is asked for the mark."""

    def __init__(self, inner, change) -> None:
        self.inner = inner
        self.change = change

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def send(self, email, on_stage):
        async def watched(staged, stage):
            if stage == DATA_SENT:
                self.change(staged)
            await on_stage(staged, stage)

        return await self.inner.send(email, watched)

    async def close(self) -> None:
        await self.inner.close()


def statuses(session_factory) -> dict[str, str]:
    with session_factory() as session:
        return dict(session.execute(select(Intent.recipient, Intent.status)).all())


def test_a_recipient_suppressed_before_the_mark_gets_no_body(
    path, engine, session_factory, make_worker
):
    enqueue_orders(session_factory, ["late@example.com", "ok@example.com"])
    transport = BeforeMark(
        path.transport(),
        lambda email: email.recipient == "late@example.com" and suppress(engine, email.recipient),
    )
    worker = make_worker(transport)

    worker.run_once()

    assert path.bodies_for() == ["ok@example.com"]
    assert statuses(session_factory) == {
        "late@example.com": SUPPRESSED,
        "ok@example.com": SUBMITTED,
    }


def test_an_attempt_swept_before_its_mark_gets_no_body(path, engine, session_factory, make_worker):
    enqueue_orders(session_factory, ["swept@example.com", "ok@example.com"])
    transport = BeforeMark(
        path.transport(),
        lambda email: email.recipient == "swept@example.com" and sweep(engine, email.attempt_id),
    )
    worker = make_worker(transport)

    worker.run_once()

    assert path.bodies_for() == ["ok@example.com"]
    assert statuses(session_factory)["ok@example.com"] == SUBMITTED
    assert statuses(session_factory)["swept@example.com"] != SUBMITTED
    with session_factory() as session:
        swept = session.scalars(
            select(Attempt).join(Intent).where(Intent.recipient == "swept@example.com")
        ).one()
    assert swept.stage != DATA_SENT, "the mark was refused"
