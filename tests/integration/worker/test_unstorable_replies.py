"""A relay's reply text that no database column can hold is stored readable, not lost.

aiosmtplib decodes a reply's bytes as UTF-8 with ``surrogateescape``: an old relay
answering in Latin-1 ("für") hands over lone surrogates, and a NUL byte comes through
as it is. Neither PostgreSQL's text nor SQLite's driver takes them; the record of an
accepted message must not fail on them (the attempt would look unsent and end up
ambiguous), nor a refusal's reason. Every record path runs: one record at a time, and
records grouped in one statement (PostgreSQL with four connections).
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from console.models import Attempt, Intent
from console.outbox import enqueue
from console.transports.smtp import SmtpTransport
from console.vocabulary import FAILED, SUBMITTED
from tests.support.smtp_server import ScriptedSMTPServer

REPLACEMENT = "\ufffd"
SCRIPT = {
    "latin@example.com": ["latin1:250 2.0.0 Ok: queued as {queue_id} für Sie"],
    "nul@example.com": ["250 2.0.0 Ok: queued as {queue_id}\x00 done"],
    "refused@example.com": ["latin1:550 5.1.1 Empfänger unbekannt"],
    "plain@example.com": ["250"],
}


@pytest.mark.parametrize("connections", [1, 4])
def test_undecodable_and_nul_reply_texts_are_recorded_with_their_outcome(
    session_factory, make_worker, connections
):
    with ScriptedSMTPServer(script=SCRIPT) as server:
        transport = SmtpTransport(server.url, connections=connections, timeout_seconds=5)
        worker = make_worker(transport, concurrency=connections, lease_seconds=60)
        ids = {}
        with session_factory() as session:
            for number, recipient in enumerate(SCRIPT):
                intent = enqueue(
                    session,
                    key=f"reply:{number}",
                    to=recipient,
                    template="login-code",
                    params={"code": "424242"},
                )
                ids[recipient] = intent.id
            session.commit()
        worker.run_once()
        worker.close()
        delivered = server.delivered_message_ids()

    with session_factory() as session:
        rows = session.execute(
            select(Intent.recipient, Intent.status, Intent.status_reason, Attempt.reply_text)
            .join(Attempt, Attempt.intent_id == Intent.id)
            .where(Attempt.finished_at.is_not(None))
        ).all()
    stored = {recipient: (status, reason, reply) for recipient, status, reason, reply in rows}
    assert set(stored) == set(SCRIPT), "every attempt recorded"
    assert stored["latin@example.com"][0] == SUBMITTED
    assert stored["latin@example.com"][2].endswith(f"f{REPLACEMENT}r Sie")
    assert stored["nul@example.com"][0] == SUBMITTED
    assert stored["nul@example.com"][2].endswith(f"{REPLACEMENT} done")
    status, reason, reply = stored["refused@example.com"]
    assert status == FAILED and f"Empf{REPLACEMENT}nger" in reply and "550" in reason
    assert stored["plain@example.com"][0] == SUBMITTED
    assert sum(delivered.values()) == 3, "each accepted body arrived once"
