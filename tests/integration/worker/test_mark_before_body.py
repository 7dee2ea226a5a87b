"""The body leaves only after its data_sent mark is committed, and never when the mark is
refused: on SQLite and PostgreSQL, one and four connections, with a real SMTP server.

Each case changes the database between the claim and the mark (the envelope stage):
the recipient suppressed, or the attempt taken back by the lease-expiry sweep. Each
body's mark is read back from another connection at the moment the transport is told
it may send the body.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select, text

from console.models import Attempt, Intent
from console.transports.smtp import SmtpTransport
from console.vocabulary import DATA_SENT, ENVELOPE, SUBMITTED, SUPPRESSED
from tests.support.orders import enqueue_orders
from tests.support.send_changes import suppress, sweep
from tests.support.smtp_server import ScriptedSMTPServer

CONNECTIONS = [1, 4]


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer() as server:
        yield server


class AtEnvelope(SmtpTransport):
    """An SMTP transport that runs `before_mark(email)` at the envelope stage and reads
    each attempt's stage back when the worker lets the body go."""

    def __init__(self, url, engine, before_mark=None, **options) -> None:
        super().__init__(url, timeout_seconds=10.0, **options)  # a loaded machine is slow
        self.engine = engine
        self.before_mark = before_mark
        self.stage_when_body_allowed: dict[int, str] = {}

    async def send(self, email, on_stage):
        async def watched(staged, stage):
            if stage == ENVELOPE and self.before_mark is not None:
                self.before_mark(staged)
            await on_stage(staged, stage)
            if stage == DATA_SENT:  # the transport sends the body once this returns
                with self.engine.connect() as connection:
                    found = connection.execute(
                        text("SELECT stage FROM email_attempt WHERE id = :id"),
                        {"id": staged.attempt_id},
                    )
                    self.stage_when_body_allowed[staged.attempt_id] = found.scalar_one()

        return await super().send(email, watched)


@pytest.mark.parametrize("connections", CONNECTIONS)
def test_every_body_leaves_after_its_mark_is_committed(
    engine, session_factory, make_worker, smtp_server, connections
):
    recipients = [f"r{n}@example.com" for n in range(8)]
    enqueue_orders(session_factory, recipients)
    transport = AtEnvelope(smtp_server.url, engine, connections=connections)
    worker = make_worker(transport, concurrency=connections)

    worker.run_once()

    assert len(smtp_server.received) == len(recipients)
    assert set(transport.stage_when_body_allowed.values()) == {DATA_SENT}
    assert len(transport.stage_when_body_allowed) == len(recipients)


@pytest.mark.parametrize("connections", CONNECTIONS)
def test_a_recipient_suppressed_after_the_claim_gets_no_body(
    engine, session_factory, make_worker, smtp_server, connections
):
    enqueue_orders(session_factory, ["late@example.com", "ok@example.com"])
    transport = AtEnvelope(
        smtp_server.url,
        engine,
        lambda email: email.recipient == "late@example.com" and suppress(engine, email.recipient),
        connections=connections,
    )
    worker = make_worker(transport, concurrency=connections)

    worker.run_once()

    assert [r.recipient for r in smtp_server.received] == ["ok@example.com"]
    with session_factory() as session:
        statuses = dict(session.execute(select(Intent.recipient, Intent.status)).all())
    assert statuses == {"late@example.com": SUPPRESSED, "ok@example.com": SUBMITTED}


@pytest.mark.parametrize("connections", CONNECTIONS)
def test_an_attempt_swept_before_its_mark_gets_no_body(
    engine, session_factory, make_worker, smtp_server, connections
):
    enqueue_orders(session_factory, ["swept@example.com", "ok@example.com"])
    transport = AtEnvelope(
        smtp_server.url,
        engine,
        lambda email: email.recipient == "swept@example.com" and sweep(engine, email.attempt_id),
        connections=connections,
    )
    worker = make_worker(transport, concurrency=connections)

    worker.run_once()

    assert [r.recipient for r in smtp_server.received] == ["ok@example.com"]
    with session_factory() as session:
        swept = session.scalars(
            select(Attempt).join(Intent).where(Intent.recipient == "swept@example.com")
        ).one()
    assert swept.stage != DATA_SENT, "the mark was refused"
