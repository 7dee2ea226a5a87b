"""The worker against a real Postfix 3.7 (a private instance on 127.0.0.1, see
tests/support/postfix.py): delivered mail parses without a defect, each refusal is
classified by what it blames, SIZE is refused before DATA, one connection carries a run
with refusals in it, and a relay without SMTPUTF8 fails only the non-ASCII address.

Postfix comes from apt (tests/run.sh installs it, "Local only"); without it these tests
skip, unless CONSOLE_TEST_REQUIRE_POSTFIX=1 (.ci/run) makes that a failure.
"""

from __future__ import annotations

import email.policy
import os

import pytest
from sqlalchemy import select

from console.models import Attempt, Intent, Suppression
from console.outbox import enqueue
from console.state_tables import AlertState
from console.store.send_guards import read_breakers
from console.transports.smtp import SmtpTransport
from console.vocabulary import CLOSED, FAILED, OPEN, PENDING, SUBMITTED
from console.worker.guard import GuardPolicy
from tests.support import postfix

REQUIRE_POSTFIX = os.environ.get("CONSOLE_TEST_REQUIRE_POSTFIX") == "1"
TIMEOUT_SECONDS = 10.0
LONG_NAME = "Zoë Ünal of the Köln office, who asked for a welcome with a long subject line"
ASCII_NAME = "Ada Lovelace of the Analytical Engine Society, who likes her subjects long"

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


@pytest.fixture(scope="module")
def relay():
    if not postfix.installed():
        message = "Postfix is NOT installed (bash tests/run.sh installs it): test SKIPPED"
        if REQUIRE_POSTFIX:
            pytest.fail(message + " and CONSOLE_TEST_REQUIRE_POSTFIX=1", pytrace=False)
        pytest.skip(message)
    instance = postfix.start_instance(message_size_limit=20_000)
    try:
        yield instance
    finally:
        postfix.remove(instance)


def add(session_factory, key, to, template="welcome", **params) -> int:
    params = params or {"name": "Ada", "login_url": "https://shop.example/login"}
    with session_factory() as session:
        intent = enqueue(session, key=key, to=to, template=template, params=params)
        session.commit()
        return intent.id


def intent(session_factory, intent_id) -> Intent:
    with session_factory() as session:
        return session.get(Intent, intent_id)


def firing(session_factory) -> dict[str, str]:
    with session_factory() as session:
        rows = session.scalars(select(AlertState).where(AlertState.active.is_(True))).all()
        return {row.condition: row.summary for row in rows}


def worker_for(make_worker, relay, **transport_options):
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS, **transport_options)
    return make_worker(transport, guard_policy=GuardPolicy(), max_attempts=3), transport


def assert_parses_clean(message: email.message.EmailMessage) -> None:
    """No defect in the message, its parts or our headers (a UTF-8 local part in To: is
    RFC 6532 content that the email package reports, so To: is then only read back)."""
    for part in message.walk():
        assert part.defects == [], part.defects
    names = ["From", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type"]
    if str(message["To"]).isascii():
        names.append("To")
    for name in names:
        assert message[name] is not None and message[name].defects == (), name


def test_one_connection_carries_refusals_and_delivered_mail_parses_clean(
    relay, session_factory, make_worker
):
    url = "https://shop.example/login"
    ids = {
        "ada": add(session_factory, "welcome:ada", "ada@example.com"),
        "nouser": add(session_factory, "welcome:nouser", "nouser@example.com"),
        "busy": add(session_factory, "welcome:busy", "busy@example.com"),
        "long": add(session_factory, "w:long", "bob@example.org", name=LONG_NAME, login_url=url),
        "ascii": add(session_factory, "w:ascii", "cy@example.com", name=ASCII_NAME, login_url=url),
        "utf8": add(session_factory, "welcome:utf8", "zoë@example.com"),
    }
    connections_before = relay.connections()
    worker, transport = worker_for(make_worker, relay)
    worker.run_once()

    status = {name: intent(session_factory, i).status for name, i in ids.items()}
    assert status == {
        "ada": SUBMITTED,
        "nouser": FAILED,  # 550 5.1.1: the recipient
        "busy": PENDING,  # 450 4.2.0: try again later
        "long": SUBMITTED,
        "ascii": SUBMITTED,
        "utf8": SUBMITTED,  # SMTPUTF8 offered
    }
    nouser = intent(session_factory, ids["nouser"])
    assert "550" in nouser.status_reason and "5.1.1" in nouser.status_reason
    with session_factory() as session:
        assert session.scalars(select(Suppression.recipient)).all() == ["nouser@example.com"]
        assert read_breakers(session)["bulk"].state == CLOSED
    assert relay.connections() - connections_before == 1, "refusals did not cost a connection"
    assert transport.reconnects == 0
    worker.close()  # QUIT
    disconnect = relay.last_session_summary()
    assert "rset=2" in disconnect and "quit=1" in disconnect, disconnect

    delivered = relay.delivered_by_message_id(4)
    for name in ("ada", "long", "ascii", "utf8"):
        message = delivered[intent(session_factory, ids[name]).message_id]
        assert_parses_clean(message)
    long_subject = delivered[intent(session_factory, ids["long"]).message_id]
    assert long_subject["Subject"] == f"Welcome, {LONG_NAME}"
    ascii_message = delivered[intent(session_factory, ids["ascii"]).message_id]
    assert ascii_message["Subject"] == f"Welcome, {ASCII_NAME}"
    raw_subject = ascii_message.as_bytes(policy=email.policy.SMTP).split(b"Subject:", 1)[1]
    assert b"=?" not in raw_subject.split(b"\r\n\r\n")[0].split(b"\nDate:")[0]
    assert delivered[intent(session_factory, ids["utf8"]).message_id]["To"] == "zoë@example.com"


def test_a_helo_name_the_relay_refuses_pauses_the_lane_and_names_the_reply(
    relay, session_factory, make_worker
):
    ids = [add(session_factory, f"welcome:{n}", f"user{n}@example.com") for n in range(3)]
    worker, _ = worker_for(make_worker, relay, ehlo_name="vm")
    for _ in range(4):  # more ticks than the attempt cap
        worker.run_once()

    for intent_id in ids:
        waiting = intent(session_factory, intent_id)
        assert waiting.status == PENDING and waiting.attempt_count == 0
    with session_factory() as session:
        assert session.scalars(select(Attempt)).all() == []
        assert read_breakers(session)["bulk"].state == OPEN
    summary = firing(session_factory)["relay_refused:bulk"]
    assert "504 5.5.2" in summary and "Helo command rejected" in summary


def test_a_message_over_the_size_limit_fails_before_data(relay, session_factory, make_worker):
    big = add(
        session_factory,
        "welcome:big",
        "big@example.com",
        name="x" * 30_000,
        login_url="https://shop.example/login",
    )
    small = add(session_factory, "welcome:small", "small@example.com")
    worker, _ = worker_for(make_worker, relay)
    worker.run_once()

    failed = intent(session_factory, big)
    assert failed.status == FAILED and "SIZE" in failed.status_reason
    assert intent(session_factory, small).status == SUBMITTED
    with session_factory() as session:
        attempt = session.scalars(select(Attempt).where(Attempt.intent_id == big)).one()
    assert attempt.stage == "envelope", "refused before DATA"
    assert failed.message_id not in relay.log(), "the body never reached the relay"


def test_a_relay_without_smtputf8_fails_the_address_with_one_alert(
    relay, session_factory, make_worker, clock
):
    relay.set(smtputf8=False)
    try:
        zoe = add(session_factory, "welcome:zoe", "zoë@example.com")
        jose = add(session_factory, "welcome:jose", "josé@example.org")
        ada = add(session_factory, "welcome:ada2", "ada2@example.com")
        worker, _ = worker_for(make_worker, relay)
        clock.advance(60)  # the reload took real time: the intents are due by the test's clock
        worker.run_once()
    finally:
        relay.set(smtputf8=True)

    assert intent(session_factory, zoe).status == FAILED, intent(session_factory, zoe).status_reason
    assert "SMTPUTF8" in intent(session_factory, zoe).status_reason
    assert intent(session_factory, jose).status == FAILED
    assert intent(session_factory, ada).status == SUBMITTED
    alerts = firing(session_factory)
    assert list(alerts) == [f"smtputf8_missing:127.0.0.1:{relay.port}"]
