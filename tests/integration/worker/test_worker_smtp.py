"""The worker against a real scripted SMTP server, tick by tick, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import logging
import ssl
from types import SimpleNamespace

import pytest
from sqlalchemy import select

from console.models import Attempt, Intent, Suppression, utcnow
from console.outbox import enqueue
from console.state_tables import WorkerHeartbeat
from console.transports.smtp import SmtpTransport
from console.vocabulary import (
    AMBIGUOUS,
    CANCELLED,
    DEAD,
    EXPIRED,
    FAILED,
    PENDING,
    SUBMITTED,
    SUPPRESSED,
)
from console.worker.decisions import EligibilityPolicy
from tests.support.commands import CONSOLE_BIN
from tests.support.smtp_server import ScriptedSMTPServer

TIMEOUT_SECONDS = 1.0  # a connect on a loaded machine can take half a second
FIRST_RETRY_SECONDS = 15  # random() = 0.5 of the 30 s base window
ORDER = dict(
    template="order-confirmation",
    params={
        "customer_name": "Ada",
        "order_number": "A-1",
        "items": [{"quantity": 1, "name": "Tea", "price": "3.00"}],
        "total": "3.00",
    },
)
LOGIN = dict(template="login-code", params={"code": "424242"})


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer(stall_seconds=TIMEOUT_SECONDS * 4) as server:
        yield server


@pytest.fixture
def make_smtp_worker(make_worker, smtp_server):
    """``make_worker`` sending to the scripted SMTP server unless given another transport."""

    def build(*, connections=1, max_attempts=3, eligibility=None, transport=None, batch_size=50):
        transport = transport or SmtpTransport(
            smtp_server.url, connections=connections, timeout_seconds=TIMEOUT_SECONDS
        )
        return make_worker(
            transport,
            max_attempts=max_attempts,
            batch_size=batch_size,
            lease_seconds=60,
            concurrency=connections,
            eligibility=eligibility,
        )

    return build


def add(session_factory, key, to, spec=ORDER, **options) -> int:
    with session_factory() as session:
        intent = enqueue(session, key=key, to=to, **spec, **options)
        session.commit()
        return intent.id


def load(session_factory, intent_id):
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        attempts = session.scalars(
            select(Attempt).where(Attempt.intent_id == intent_id).order_by(Attempt.id)
        ).all()
        return intent, attempts


# behaviour -> (status, stage reached, outcome, reply code, retried in seconds)
BEHAVIOURS = {
    "250": (SUBMITTED, "reply_read", "accepted", 250, None),
    "421": (PENDING, "data_sent", "transient", 421, FIRST_RETRY_SECONDS),
    "450": (PENDING, "data_sent", "transient", 450, FIRST_RETRY_SECONDS),
    "451": (PENDING, "data_sent", "transient", 451, FIRST_RETRY_SECONDS),
    "452": (PENDING, "data_sent", "transient", 452, FIRST_RETRY_SECONDS),
    "550": (FAILED, "data_sent", "permanent", 550, None),
    "553": (FAILED, "data_sent", "permanent", 553, None),
    "554": (FAILED, "data_sent", "permanent", 554, None),
    "rcpt:550": (FAILED, "envelope", "permanent", 550, None),
    "rcpt:451": (PENDING, "envelope", "transient", 451, FIRST_RETRY_SECONDS),
    "rcpt:stall": (PENDING, "envelope", "transient", None, FIRST_RETRY_SECONDS),
    "stall": (AMBIGUOUS, "data_sent", "ambiguous", None, None),
    "hangup": (AMBIGUOUS, "data_sent", "ambiguous", None, None),
}


# what the relay offers: (PIPELINING: MAIL and RCPT in one write, CHUNKING: the body by BDAT)
EXTENSIONS = {"plain": (False, False), "pipelining": (True, False), "chunking": (True, True)}


@pytest.mark.parametrize("extensions", list(EXTENSIONS))
@pytest.mark.parametrize("behaviour", list(BEHAVIOURS))
def test_each_server_behaviour_ends_in_the_designed_state(
    behaviour, extensions, session_factory, smtp_server, make_smtp_worker, clock
):
    status, stage, outcome, code, retry_seconds = BEHAVIOURS[behaviour]
    handler = smtp_server.handler
    handler.offer_pipelining, handler.offer_chunking = EXTENSIONS[extensions]
    smtp_server.script.set("ada@example.com", [behaviour])
    intent_id = add(session_factory, "order:A-1", "ada@example.com")

    report = make_smtp_worker().run_once()

    assert report.claimed == 1
    intent, attempts = load(session_factory, intent_id)
    assert intent.status == status
    assert intent.attempt_count == 1 and len(attempts) == 1
    attempt = attempts[0]
    assert (attempt.stage, attempt.outcome, attempt.reply_code) == (stage, outcome, code)
    assert attempt.finished_at == clock.now and attempt.lease_token
    assert intent.lease_token is None and intent.lease_expires_at is None
    if retry_seconds is None:
        assert intent.next_attempt_at <= clock.now
    else:
        assert intent.next_attempt_at == clock.now + dt.timedelta(seconds=retry_seconds)
    if status == SUBMITTED:
        queue_id = smtp_server.received[0].queue_id
        assert intent.provider_message_id == queue_id == attempt.provider_message_id
        assert attempt.reply_text == f"2.0.0 Ok: queued as {queue_id}"
        assert attempt.enhanced_status == "2.0.0"
        assert intent.submitted_at == clock.now
    elif code is not None:
        assert attempt.enhanced_status == attempt.reply_text.split()[0]
        assert str(code) in intent.status_reason
    if stage == "data_sent":  # the body reached the server
        assert [r.message_id for r in smtp_server.received] == [intent.message_id]


def test_transient_failures_retry_with_the_same_message_id_until_accepted(
    session_factory, smtp_server, make_smtp_worker, clock
):
    smtp_server.script.set("ada@example.com", ["451", "rcpt:450", "250"])
    intent_id = add(session_factory, "order:A-1", "ada@example.com")
    worker = make_smtp_worker()

    worker.run_once()
    first, _ = load(session_factory, intent_id)
    assert first.next_attempt_at == clock.now + dt.timedelta(seconds=15)
    clock.advance(14)
    assert worker.run_once().claimed == 0, "not due before its next_attempt_at"
    clock.advance(1)
    worker.run_once()
    second, _ = load(session_factory, intent_id)
    assert second.status == PENDING and second.attempt_count == 2
    assert second.next_attempt_at == clock.now + dt.timedelta(seconds=30)  # window doubled
    clock.advance(30)
    worker.run_once()

    final, attempts = load(session_factory, intent_id)
    assert final.status == SUBMITTED and final.attempt_count == 3
    assert [a.outcome for a in attempts] == ["transient", "transient", "accepted"]
    assert [a.attempt_number for a in attempts] == [1, 2, 3]
    assert len({a.lease_token for a in attempts}) == 3, "a fresh lease token per attempt"
    bodies = [r for r in smtp_server.received if r.recipient == "ada@example.com"]
    assert {r.message_id for r in bodies} == {final.message_id}
    assert smtp_server.delivered_message_ids()[final.message_id] == 1


def test_attempt_cap_dead_letters_with_the_last_reason_logged_at_error(
    session_factory, smtp_server, make_smtp_worker, clock, caplog
):
    smtp_server.script.set("ada@example.com", ["452"])
    intent_id = add(session_factory, "order:A-1", "ada@example.com")
    worker = make_smtp_worker(max_attempts=3)
    for _ in range(3):
        worker.run_once()
        clock.advance(3600)

    intent, attempts = load(session_factory, intent_id)
    assert intent.status == DEAD and intent.attempt_count == 3 and len(attempts) == 3
    assert "3 attempts" in intent.status_reason and "452" in intent.status_reason
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any(getattr(r, "decision", None) == DEAD for r in errors)
    assert worker.run_once().claimed == 0


def test_one_batch_reuses_one_connection(session_factory, smtp_server, make_smtp_worker):
    ids = [add(session_factory, f"order:{n}", f"buyer{n}@example.com") for n in range(5)]
    make_smtp_worker().run_once()
    assert smtp_server.connections_opened == 1
    assert all(load(session_factory, i)[0].status == SUBMITTED for i in ids)


def test_some_recipients_refused_in_one_batch(session_factory, smtp_server, make_smtp_worker):
    smtp_server.script.set("gone@example.com", ["rcpt:550"])
    smtp_server.script.set("full@example.com", ["rcpt:452"])
    refused = add(session_factory, "order:1", "gone@example.com")
    accepted = add(session_factory, "order:2", "ada@example.com")
    deferred = add(session_factory, "order:3", "full@example.com")
    also_accepted = add(session_factory, "order:4", "bob@example.com")

    report = make_smtp_worker().run_once()

    assert report.claimed == 4
    statuses = [load(session_factory, i)[0].status for i in (refused, accepted, deferred)]
    assert statuses == [FAILED, SUBMITTED, PENDING]
    assert load(session_factory, also_accepted)[0].status == SUBMITTED
    assert len(smtp_server.delivered_message_ids()) == 2
    assert smtp_server.connections_opened == 1, "a refusal is followed by RSET, not a hang-up"
    assert smtp_server.handler.commands["RSET"] == 2


def test_connections_setting_bounds_concurrent_connections(
    session_factory, smtp_server, make_smtp_worker
):
    ids = [add(session_factory, f"order:{n}", f"buyer{n}@example.com") for n in range(12)]
    make_smtp_worker(connections=3).run_once()
    assert smtp_server.connections_opened == 3
    assert all(load(session_factory, i)[0].status == SUBMITTED for i in ids)


def test_critical_lane_is_claimed_first_and_the_batch_is_bounded(
    session_factory, smtp_server, make_smtp_worker
):
    bulk = [add(session_factory, f"order:{n}", f"buyer{n}@example.com") for n in range(4)]
    critical = add(session_factory, "login:1", "ada@example.com", LOGIN)
    report = make_smtp_worker(batch_size=2).run_once()
    assert report.claimed == 2
    assert load(session_factory, critical)[0].status == SUBMITTED
    assert [load(session_factory, i)[0].status for i in bulk] == [SUBMITTED] + [PENDING] * 3


def test_ambiguity_policy_resend_sends_a_login_code_again(
    session_factory, smtp_server, make_smtp_worker, clock
):
    smtp_server.script.set("ada@example.com", ["hangup", "250"])
    intent_id = add(session_factory, "login:1", "ada@example.com", LOGIN)
    worker = make_smtp_worker()
    worker.run_once()
    after_hangup, _ = load(session_factory, intent_id)
    assert after_hangup.status == PENDING, "login-code: a duplicate is better than none"
    clock.advance(FIRST_RETRY_SECONDS)
    worker.run_once()
    intent, attempts = load(session_factory, intent_id)
    assert intent.status == SUBMITTED
    assert [a.outcome for a in attempts] == ["ambiguous", "accepted"]
    assert smtp_server.delivered_message_ids()[intent.message_id] == 2


def test_expiry_suppression_and_eligibility_are_rechecked_at_claim(
    session_factory, smtp_server, make_smtp_worker, clock
):
    login = add(session_factory, "login:1", "ada@example.com", LOGIN)
    soon = add(
        session_factory,
        "order:1",
        "bob@example.com",
        expires_at=clock.now + dt.timedelta(minutes=5),
    )
    suppressed = add(session_factory, "order:2", "Eve@Example.com")
    ineligible = add(session_factory, "order:3", "carl@example.com", purpose="verify-email")
    broken = add(session_factory, "order:4", "dan@example.com", purpose="broken-check")
    with session_factory() as session:
        session.add(
            Suppression(recipient="eve@example.com", reason="complaint", created_at=utcnow())
        )
        session.commit()

    def explode(intent, session):
        raise RuntimeError("the application's check is down")

    def already_verified(intent, session):  # the application's own query, on the session
        [recipient] = session.execute(select(Intent.recipient).where(Intent.id == intent.id)).one()
        return f"address already verified: {recipient}"

    checks = {"verify-email": already_verified}
    worker = make_smtp_worker(eligibility=EligibilityPolicy({**checks, "broken-check": explode}))
    clock.advance(601)  # past the login code's 10-minute max age
    worker.run_once()

    expected = {login: EXPIRED, soon: EXPIRED, suppressed: SUPPRESSED, ineligible: CANCELLED}
    expected[broken] = PENDING
    for intent_id, status in expected.items():
        intent, attempts = load(session_factory, intent_id)
        assert intent.status == status, intent_id
        assert intent.attempt_count == 0 and attempts == [], "nothing was attempted"
    reason = load(session_factory, ineligible)[0].status_reason
    assert "address already verified: carl@example.com" in reason
    broken_intent = load(session_factory, broken)[0]
    assert (
        broken_intent.next_attempt_at > clock.now and "RuntimeError" in broken_intent.status_reason
    )
    assert smtp_server.received == []


def test_eligibility_checks_load_from_the_configured_module(tmp_path, monkeypatch):
    from console.config import load_settings
    from console.worker.decisions import EligibilityError

    (tmp_path / "shop_checks.py").write_text(
        "def unverified_only(intent, session):\n"
        "    return 'already verified' if intent.params.get('verified') else None\n"
        "ELIGIBILITY_CHECKS = {'verify-email': unverified_only}\n"
    )
    (tmp_path / "no_checks.py").write_text("CHECKS = {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    environ = {
        "CONSOLE_DATABASE_URL": "sqlite://",
        "CONSOLE_SECRET_KEY": "k" * 32,
        "CONSOLE_ELIGIBILITY_MODULE": "shop_checks",
    }
    settings = load_settings(environ, instance_path=tmp_path)
    policy = EligibilityPolicy.from_module(settings.eligibility_module)
    verified = SimpleNamespace(purpose="verify-email", params={"verified": True})
    other_purpose = SimpleNamespace(purpose="newsletter", params={"verified": True})
    assert policy.reason_not_to_send(verified, session=None) == "already verified"
    assert policy.reason_not_to_send(other_purpose, session=None) is None
    for name, complaint in [("no_such_module", "cannot import"), ("no_checks", "must define")]:
        with pytest.raises(EligibilityError, match=complaint):
            EligibilityPolicy.from_module(name)


def test_each_tick_writes_the_heartbeat(session_factory, make_smtp_worker, clock):
    worker = make_smtp_worker()
    worker.run_once()
    clock.advance(5)
    worker.run_once()
    with session_factory() as session:
        beat = session.get(WorkerHeartbeat, worker.worker_id)
    assert beat.last_tick_at == clock.now and beat.started_at < beat.last_tick_at
    host, pid, suffix = worker.worker_id.split(":")
    assert beat.host == host and beat.pid == int(pid) and suffix


# --- TLS and AUTH (one backend is enough: this is the transport, not the store) ---


def _self_signed(tmp_path):
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)

    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert_path, key_path)
    client_context = ssl.create_default_context(cafile=str(cert_path))
    return server_context, client_context


@pytest.mark.parametrize("extensions", ["plain", "chunking"])
@pytest.mark.parametrize("mode", ["smtps", "starttls"])
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_tls_and_auth(mode, extensions, tmp_path, session_factory, make_smtp_worker):
    server_context, client_context = _self_signed(tmp_path)
    tls = (
        {"tls_context": server_context} if mode == "smtps" else {"starttls_context": server_context}
    )
    pipelining, chunking = EXTENSIONS[extensions]
    options = dict(auth=("mailer", "s3cret"), pipelining=pipelining, chunking=chunking)
    with ScriptedSMTPServer(**options, **tls) as server:
        assert server.url.startswith("smtps://" if mode == "smtps" else "smtp://")
        transport = SmtpTransport(server.url, timeout_seconds=2, tls_context=client_context)
        intent_id = add(session_factory, "order:1", "ada@example.com")
        make_smtp_worker(transport=transport).run_once()
        assert load(session_factory, intent_id)[0].status == SUBMITTED
        assert len(server.received) == 1


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_refused_credentials_are_a_transient_alert_not_the_recipients_fault(
    session_factory, make_smtp_worker, caplog
):
    with ScriptedSMTPServer(auth=("mailer", "right")) as server:
        url = server.url.replace(":right@", ":wrong@")
        transport = SmtpTransport(url, timeout_seconds=2)
        intent_id = add(session_factory, "order:1", "ada@example.com")
        make_smtp_worker(transport=transport).run_once()
    intent, attempts = load(session_factory, intent_id)
    assert intent.status == PENDING
    # a refusal of our session: the intent waits, not charged as an attempt (issue 14)
    assert attempts == [] and intent.attempt_count == 0 and "535" in intent.status_reason
    assert any(r.levelno == logging.ERROR for r in caplog.records)
    assert "wrong" not in caplog.text


# --- the embedded worker of `console serve` ---


def test_an_enqueue_in_this_process_wakes_the_embedded_worker_at_once(
    session_factory, smtp_server, make_worker
):
    import time

    from console.worker.running import EmbeddedWorker

    transport = SmtpTransport(smtp_server.url, timeout_seconds=TIMEOUT_SECONDS)
    worker = make_worker(transport, clock=utcnow)  # a thread of its own: the real time
    embedded = EmbeddedWorker(worker, poll_seconds=600).start()  # polling alone would wait 10 min
    try:
        deadline = time.monotonic() + 10
        while embedded.runs == 0 or embedded._busy.is_set():  # its first run, at start, over
            assert time.monotonic() < deadline, "the first run did not end"
            time.sleep(0.02)
        intent_id = add(session_factory, "login:1", "ada@example.com", LOGIN)  # commits: wakes
        while load(session_factory, intent_id)[0].status != SUBMITTED:
            assert time.monotonic() < deadline, "the enqueue did not wake the worker"
            time.sleep(0.02)
        assert embedded.running
    finally:
        embedded.shutdown()
    assert not embedded.running


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_console_serve_serves_the_console_and_sends_queued_mail(db_url, smtp_server, tmp_path):
    import os
    import signal
    import subprocess
    import time
    import urllib.request

    from console.store.database import make_engine, make_session_factory
    from tests.support.pgcluster import free_port

    port = free_port()
    env = {
        **os.environ,
        "CONSOLE_DATABASE_URL": db_url,
        "CONSOLE_SECRET_KEY": "test" * 8,
        "CONSOLE_SMTP_URL": smtp_server.url,
        "CONSOLE_POLL_SECONDS": "0.2",
    }
    with open(tmp_path / "serve.log", "wb") as log:
        process = subprocess.Popen(
            [CONSOLE_BIN, "serve", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    engine = make_engine(db_url)
    try:
        session_factory = make_session_factory(engine)
        intent_id = add(session_factory, "order:1", "ada@example.com")
        deadline = time.monotonic() + 30
        while load(session_factory, intent_id)[0].status != SUBMITTED:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert b'"scheduler": "running"' in response.read().replace(b'":"', b'": "')
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0
    finally:
        if process.poll() is None:
            process.kill()
        engine.dispose()
    assert [r.message_id for r in smtp_server.received] == [
        load(make_session_factory(make_engine(db_url)), intent_id)[0].message_id
    ]
