"""What the worker checks at send time, against a real SMTP server on SQLite and PostgreSQL.

A relay's synchronous "mailbox unknown" suppresses the address like a hard bounce.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from console.models import Attempt, Intent, Suppression, utcnow
from console.transports.smtp import SmtpTransport
from console.vocabulary import CLAIMED, FAILED, SUPPRESSED
from tests.support.orders import enqueue_orders
from tests.support.smtp_server import ScriptedSMTPServer

TIMEOUT_SECONDS = 2.0


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer() as server:
        yield server


def enqueue_order(session_factory, key: str, to: str) -> int:
    [intent_id] = enqueue_orders(session_factory, [to], prefix=key)
    return intent_id


def send_all(make_worker, smtp_server, **options) -> None:
    transport = SmtpTransport(smtp_server.url, timeout_seconds=TIMEOUT_SECONDS)
    make_worker(transport, **options).run_once()


@pytest.mark.parametrize(
    ("behaviour", "suppresses"),
    [
        ("rcpt:550 5.1.1 <nobody@example.com>: Recipient address rejected", True),
        ("550 5.1.1 Mailbox unavailable: user unknown", True),  # after the body
        ("rcpt:553 5.1.10 Recipient address has null MX", True),
        ("rcpt:550 5.2.1 Mailbox disabled", True),
        # a policy refusal of this recipient fails it unsuppressed; "Relay access denied"
        # refuses our session instead (tests/integration/worker/test_session_refusals.py)
        ("rcpt:550 5.7.1 <nobody@example.com>: Recipient address rejected: Access denied", False),
        ("554 5.6.0 Message content rejected", False),
    ],
)
def test_a_refusal_of_the_mailbox_suppresses_it_and_others_only_fail(
    session_factory, make_worker, smtp_server, behaviour, suppresses
):
    smtp_server.script.set("nobody@example.com", [behaviour])
    intent_id = enqueue_order(session_factory, "order:1", "Nobody@Example.com")
    send_all(make_worker, smtp_server)
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == FAILED
        attempt = session.scalars(select(Attempt).where(Attempt.intent_id == intent_id)).one()
        entry = session.scalars(select(Suppression)).one_or_none()
    if not suppresses:
        assert entry is None
        return
    assert entry.recipient == "nobody@example.com"
    assert (entry.reason, entry.created_by, entry.source_attempt_id) == (
        "bounce",
        "smtp",
        attempt.id,
    )
    assert behaviour.removeprefix("rcpt:")[4:] in entry.note
    # the next mail to that address is suppressed at enqueue, never tried again
    later_id = enqueue_order(session_factory, "order:2", "nobody@example.com")
    with session_factory() as session:
        assert session.get(Intent, later_id).status == SUPPRESSED


def test_the_setting_turns_suppression_on_refusal_off(session_factory, make_worker, smtp_server):
    smtp_server.script.set("nobody@example.com", ["rcpt:550 5.1.1 user unknown"])
    intent_id = enqueue_order(session_factory, "order:1", "nobody@example.com")
    send_all(make_worker, smtp_server, suppress_refused_mailboxes=False)
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == FAILED
        assert session.scalars(select(Suppression)).all() == []


def test_a_recipient_suppressed_already_keeps_its_entry(session_factory, make_worker, smtp_server):
    smtp_server.script.set("nobody@example.com", ["rcpt:550 5.1.1 user unknown"])
    first = enqueue_order(session_factory, "order:1", "nobody@example.com")
    second = enqueue_order(session_factory, "order:2", "nobody@example.com")
    send_all(make_worker, smtp_server)
    with session_factory() as session:
        entries = session.scalars(select(Suppression)).all()
        statuses = {session.get(Intent, first).status, session.get(Intent, second).status}
    assert len(entries) == 1
    assert statuses <= {FAILED, SUPPRESSED}


class SuppressingMidBatch(SmtpTransport):
    """A real SMTP transport that, after its `after`-th send, has an operator suppress `address`."""

    def __init__(self, url: str, session_factory, *, after: int, address: str) -> None:
        super().__init__(url, timeout_seconds=TIMEOUT_SECONDS)
        self.session_factory, self.after, self.address = session_factory, after, address
        self.sends = 0

    async def send(self, email, on_stage):
        result = await super().send(email, on_stage)
        self.sends += 1
        if self.sends == self.after:
            with self.session_factory() as session:
                session.add(
                    Suppression(recipient=self.address, reason="complaint", created_at=utcnow())
                )
                session.commit()
        return result


def test_a_suppression_committed_during_a_batch_stops_the_later_sends_to_that_address(
    session_factory, make_worker, smtp_server
):
    victim = "victim@example.com"
    recipients = [f"buyer{n}@example.com" for n in range(50)]
    recipients[30] = recipients[40] = victim
    ids = [enqueue_order(session_factory, f"order:{n}", to) for n, to in enumerate(recipients)]
    transport = SuppressingMidBatch(smtp_server.url, session_factory, after=10, address=victim)
    report = make_worker(transport, batch_size=50).run_once()
    assert report.claimed == 50, "one batch: the suppression came after the claim"
    received = [message.recipient for message in smtp_server.received]
    assert victim not in received and len(received) == 48
    with session_factory() as session:
        for n in (30, 40):
            intent = session.get(Intent, ids[n])
            assert intent.status == SUPPRESSED, n
            attempt = session.scalars(select(Attempt).where(Attempt.intent_id == intent.id)).one()
            assert attempt.finished_at is not None and attempt.stage == CLAIMED, "closed unsent"
