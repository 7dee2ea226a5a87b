"""What follows a record (here the suppression a 550 5.1.1 calls for) is awaited like the
record itself: while that write waits on the database, the other senders go on.

The test holds the suppression's row for the refused address in a transaction of its own
(an uncommitted insert of the same recipient), so the worker's insert waits for it; it
counts the bodies the relay receives while it holds the row, then lets go. Written in the
event loop's thread without an await, the wait stops every sender until the row is let
go. On SQLite a write is local work in the event loop's thread (there is no round trip
to overlap), so this is PostgreSQL's test.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import select, text

from console.models import Intent, Suppression
from console.outbox import enqueue
from console.transports.smtp import SmtpTransport
from console.vocabulary import FAILED, SUBMITTED
from tests.support.smtp_server import ScriptedSMTPServer

REFUSED = "gone@example.com"
OTHERS = 60
CONNECTIONS = 4
HOLD_SECONDS = 2.0
CODE = {"code": "424242"}


def test_a_suppression_waiting_on_the_database_does_not_stop_the_other_sends(
    postgres_url, make_worker
):
    from console.store.database import make_engine, make_session_factory

    engine = make_engine(postgres_url)
    factory = make_session_factory(engine)
    recipients = [REFUSED] + [f"reader{number}@example.com" for number in range(OTHERS)]
    with factory() as session:
        for number, to in enumerate(recipients):  # the refused one first
            enqueue(session, key=f"mail:{number}", to=to, template="login-code", params=CODE)
        session.commit()

    held, counted = threading.Event(), {}
    with ScriptedSMTPServer(script={REFUSED: ["550"]}) as server:

        def hold_the_row() -> None:
            with engine.connect() as connection:
                connection.execute(
                    text(
                        "INSERT INTO suppression (recipient, reason, created_by, created_at)"
                        " VALUES (:r, 'manual', 'test', now())"
                    ),
                    {"r": REFUSED},
                )
                held.set()
                _wait_for(lambda: len(server.received) >= 1)
                counted["at_hold"] = len(server.received)
                time.sleep(HOLD_SECONDS)
                counted["at_release"] = len(server.received)
                connection.rollback()

        holder = threading.Thread(target=hold_the_row)
        holder.start()
        held.wait(10)
        transport = SmtpTransport(server.url, connections=CONNECTIONS, timeout_seconds=10)
        worker = make_worker(
            transport,
            session_factory=factory,
            concurrency=CONNECTIONS,
            batch_size=OTHERS + 1,
        )
        worker.run_once()
        holder.join(30)
        worker.close()

    with factory() as session:
        statuses = dict(session.execute(select(Intent.recipient, Intent.status)).all())
        suppressed = session.scalars(select(Suppression.recipient)).all()
    engine.dispose()
    assert statuses.pop(REFUSED) == FAILED
    assert set(statuses.values()) == {SUBMITTED}
    assert suppressed == [REFUSED], "the suppression was written once the row was let go"
    sent_while_held = counted["at_release"] - counted["at_hold"]
    assert sent_while_held >= OTHERS // 2, (
        f"{sent_while_held} bodies left while the suppression waited: the senders stopped"
    )


def _wait_for(condition, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.005)
