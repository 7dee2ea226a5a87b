"""Structured logs: JSON lines, only known fields, never a credential."""

from __future__ import annotations

import io
import json
import logging

import pytest

from console import logs
from console.config import ConfigError, load_settings
from tests.support.commands import CONSOLE_BIN


@pytest.fixture
def captured():
    """Configure the product's logging into a buffer; restore the root logger after."""
    root = logging.getLogger()
    saved_level, saved_handlers = root.level, list(root.handlers)
    buffer = io.StringIO()
    handler = logs.configure_logging(
        secrets=["s3cr3t-api-key", "https://hooks.example.com/T0/B0/xyzzy"],
        level="INFO",
        stream=buffer,
    )
    yield buffer
    root.removeHandler(handler)
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)


def lines(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_each_record_is_one_json_object_with_known_fields(captured):
    log = logging.getLogger("console.test.logs.fields")
    log.info(
        "attempt finished",
        extra={"intent_id": 7, "attempt_id": 31, "outcome": "transient", "retry_in_seconds": 12.5},
    )
    (entry,) = lines(captured)
    assert entry["msg"] == "attempt finished"
    assert entry["level"] == "info" and entry["logger"] == "console.test.logs.fields"
    assert entry["intent_id"] == 7 and entry["attempt_id"] == 31
    assert entry["outcome"] == "transient" and entry["retry_in_seconds"] == 12.5
    assert entry["ts"].endswith("+00:00")


def test_fields_outside_the_allow_list_are_not_written(captured):
    log = logging.getLogger("console.test.logs.allow")
    log.info(
        "rendered",
        extra={
            "intent_id": 1,
            "params": {"code": "991177"},
            "body": "Dear Ada",
            "recipient": "a@b.c",
        },
    )
    text = captured.getvalue()
    assert "991177" not in text and "Dear Ada" not in text and "a@b.c" not in text
    assert lines(captured)[0]["intent_id"] == 1


@pytest.mark.parametrize(
    "message",
    [
        "connecting to smtp://mailer:hunter2hunter2@relay.example.com:587",
        "retrying smtps://mailer:hunter2hunter2@relay.example.com?starttls=1",
        "login failed password=hunter2hunter2 for mailer",
        "header token: hunter2hunter2",
    ],
)
def test_credentials_in_messages_are_redacted(captured, message):
    logging.getLogger("console.test.logs.redact").warning(message)
    entry = lines(captured)[0]
    assert "hunter2hunter2" not in entry["msg"]
    assert logs.REDACTED in entry["msg"]


def test_registered_secrets_are_redacted_in_messages_fields_and_tracebacks(captured):
    log = logging.getLogger("console.test.logs.secret")
    try:
        raise RuntimeError("provider refused key s3cr3t-api-key")
    except RuntimeError:
        log.exception(
            "alert to https://hooks.example.com/T0/B0/xyzzy failed",
            extra={"target": "https://hooks.example.com/T0/B0/xyzzy"},
        )
    text = captured.getvalue()
    assert "s3cr3t-api-key" not in text and "xyzzy" not in text
    entry = lines(captured)[0]
    assert "RuntimeError" in entry["exc"] and entry["target"] == logs.REDACTED


def test_settings_secrets_cover_smtp_and_database_passwords(tmp_path):
    settings = load_settings(
        {
            "CONSOLE_DATABASE_URL": "postgresql://app:dbpass-77@db.internal/console",
            "CONSOLE_SECRET_KEY": "session-key-123" * 3,
            "CONSOLE_SMTP_URL": "smtp://mailer:smtp-pass-99@relay.example.com:587",
        },
        instance_path=tmp_path,
    )
    expected = {"dbpass-77", "session-key-123" * 3, "smtp-pass-99"}
    assert expected <= set(logs.settings_secrets(settings))


def test_configure_twice_keeps_one_product_handler(captured):
    logs.configure_logging(level="INFO", stream=captured)
    logs.configure_logging(level="INFO", stream=captured)
    logging.getLogger("console.test.logs.twice").info("once")
    assert len(lines(captured)) == 1


def test_bad_level_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="log level"):
        logs.configure_logging(level="LOUD", stream=io.StringIO())
    with pytest.raises(ConfigError, match="CONSOLE_LOG_LEVEL"):
        load_settings({"CONSOLE_LOG_LEVEL": "LOUD"}, instance_path=tmp_path)


def test_the_level_comes_from_the_settings(tmp_path):
    assert load_settings({}, instance_path=tmp_path).log_level == "INFO"
    settings = load_settings({"CONSOLE_LOG_LEVEL": "debug"}, instance_path=tmp_path)
    assert settings.log_level == "DEBUG"


# --- the real worker, a real SMTP server: nothing private reaches the logs -------------

SMTP_PASSWORD = "smtp-Pass-Quokka-4417"
DATABASE_PASSWORD = "db-Pass-Wombat-9911"
SECRET_KEY = "session-Key-Narwhal-5150-of-the-private-sort"
PRIVATE = dict(
    customer_name="Zanzibar-Customer-Name",
    order_number="ORD-Secret-8841",
    total="777.77-TOTAL",
    items=[{"quantity": 3, "name": "Glow-Widget-Private", "price": "12.34-PRICE"}],
)
BODY_TEXT = ("Thank you for your order", "We will write again when it ships", "is confirmed")
RECIPIENTS = (
    "zelda.private@example.com",
    "retry.private@example.com",
    "bounce.private@example.com",
)


def _with_password(url: str, password: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(password=password).render_as_string(hide_password=False)


def _wait_until_settled(engine, deadline_seconds: float) -> dict[str, str]:
    import time

    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from console.models import Intent

    deadline = time.monotonic() + deadline_seconds
    while True:
        with Session(engine) as session:
            statuses = dict(session.execute(select(Intent.recipient, Intent.status)).all())
        if set(statuses.values()) <= {"submitted", "failed"} or time.monotonic() > deadline:
            return statuses
        time.sleep(0.2)


def test_a_real_send_logs_ids_and_outcomes_but_no_secret_body_or_param(postgres_url, tmp_path):
    import os
    import signal
    import subprocess

    from sqlalchemy.orm import Session

    from console.outbox import enqueue
    from console.store.database import make_engine
    from tests.support.smtp_server import ScriptedSMTPServer

    database_url = _with_password(postgres_url, DATABASE_PASSWORD)  # trust auth ignores it
    engine = make_engine(postgres_url)
    script = {RECIPIENTS[1]: ["451", "250"], RECIPIENTS[2]: ["550"]}
    with ScriptedSMTPServer(script=script, auth=("mailer", SMTP_PASSWORD)) as server:
        with Session(engine) as session:
            for number, recipient in enumerate(RECIPIENTS):
                enqueue(
                    session,
                    key=f"order:{number}",
                    to=recipient,
                    template="order-confirmation",
                    params=PRIVATE,
                )
            session.commit()
        env = {
            **os.environ,
            "CONSOLE_DATABASE_URL": database_url,
            "CONSOLE_SECRET_KEY": SECRET_KEY,
            "CONSOLE_SMTP_URL": server.url,
            "CONSOLE_LOG_LEVEL": "DEBUG",
            "CONSOLE_POLL_SECONDS": "0.2",
            "CONSOLE_RETRY_BASE_SECONDS": "0.2",
            "CONSOLE_RETRY_CAP_SECONDS": "0.4",
            "CONSOLE_RETRY_FLOOR_SECONDS": "0.1",
        }
        assert SMTP_PASSWORD in server.url
        worker = subprocess.Popen(
            [CONSOLE_BIN, "worker"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            statuses = _wait_until_settled(engine, deadline_seconds=30)
        finally:
            worker.send_signal(signal.SIGTERM)
            stdout, stderr = worker.communicate(timeout=30)
        delivered = server.delivered_message_ids()
    engine.dispose()

    assert statuses == {
        RECIPIENTS[0]: "submitted",
        RECIPIENTS[1]: "submitted",
        RECIPIENTS[2]: "failed",
    }
    assert len(delivered) == 2, "the server got the bodies, so they were really rendered"
    captured = stdout + stderr
    entries = [json.loads(line) for line in captured.splitlines() if line.strip()]
    outcomes = {entry.get("outcome") for entry in entries if entry.get("intent_id")}
    assert {"accepted", "transient", "permanent"} <= outcomes
    assert any(entry.get("retry_in_seconds") is not None for entry in entries)
    forbidden = [SMTP_PASSWORD, DATABASE_PASSWORD, SECRET_KEY, *BODY_TEXT, *RECIPIENTS]
    forbidden += [str(value) for value in PRIVATE.values() if not isinstance(value, list)]
    forbidden += [str(value) for value in PRIVATE["items"][0].values() if value != 3]
    leaked = [text for text in forbidden if text in captured]
    assert leaked == []


@pytest.mark.parametrize(
    "error",
    [
        "(sqlite3.OperationalError) database is locked\n[SQL: INSERT INTO suppression "
        "(recipient, reason) VALUES (?, ?)]\n[parameters: ('ann.private@example.com', "
        "'ann [asked] twice')]\n(Background on this error at: https://sqlalche.me/e/21/e3q8)",
        "psycopg.errors.UniqueViolation: duplicate key value violates unique constraint\n"
        "DETAIL:  Key (recipient)=(ann.private@example.com) already exists.",
        "psycopg.errors.CheckViolation: new row violates check constraint\n"
        "DETAIL:  Failing row contains (1, ann.private@example.com, ann asked twice).",
        "psycopg.errors.InvalidTextRepresentation: invalid input syntax for type bigint: "
        '"ann.private@example.com"',
    ],
)
def test_database_errors_lose_their_parameters_and_row_values(captured, error):
    log = logging.getLogger("console.test.logs.database")
    try:
        raise RuntimeError(error)
    except RuntimeError:
        log.exception("recording failed: %s", error)
    text = captured.getvalue()
    assert "ann.private" not in text and "asked twice" not in text
    assert logs.ROW_DATA_REDACTED in lines(captured)[0]["msg"]


def test_a_batch_writes_one_info_line_and_no_line_per_acceptance(session_factory, captured):
    from console.transports.memory import MemoryTransport
    from tests.support.orders import enqueue_orders
    from tests.support.workers import build_worker

    enqueue_orders(session_factory, ["a@example.com", "b@example.com", "c@example.com"])
    worker = build_worker(session_factory, MemoryTransport())
    try:
        worker.run_once()
    finally:
        worker.close()
    entries = [e for e in lines(captured) if e["logger"] == "console.worker.loop"]
    (batch,) = [e for e in entries if e["msg"].startswith("batch sent")]
    assert batch["count"] == 3 and "submitted=3" in batch["msg"] and "elapsed_ms" in batch
    assert not [e for e in entries if "intent_id" in e], "acceptances stay at DEBUG"
