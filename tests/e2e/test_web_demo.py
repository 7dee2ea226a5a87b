"""`console demo`: the misbehaving capture server, and the whole demo run twice on one database."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from email.message import EmailMessage

import aiosmtplib
import httpx
import pytest
from sqlalchemy import create_engine, text

from console.demo.smtp_capture import (
    ACCEPT,
    GREYLISTED,
    HANGUP,
    REJECT,
    TEMPFAIL,
    DemoSMTPServer,
    behaviour_for,
)
from tests.support.commands import CONSOLE_BIN
from tests.support.demo_process import DemoProcess
from tests.support.pgcluster import free_port


@pytest.mark.parametrize(
    "recipient, times_seen, expected",
    [
        ("ada@example.com", 0, ACCEPT),
        ("TempFail.box@example.net", 3, TEMPFAIL),
        ("flaky.buyer@example.org", 0, GREYLISTED),
        ("flaky.buyer@example.org", 1, ACCEPT),
        ("reject.nobody@example.com", 0, REJECT),
        ("hangup.maybe@example.com", 0, HANGUP),
        ("someone@tempfail.example.com", 0, ACCEPT),  # only the local part counts
    ],
)
def test_capture_server_rules(recipient, times_seen, expected):
    assert behaviour_for(recipient, times_seen) == expected


def _message(to: str, message_id: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "shop@example.com"
    message["To"] = to
    message["Subject"] = f"hello {to}"
    message["Message-ID"] = message_id
    message.set_content("hello")
    return message


async def _send(port: int, to: str, message_id: str) -> str:
    client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, timeout=5)
    await client.connect()
    try:
        _, reply = await client.send_message(_message(to, message_id))
        return f"250 {reply}"
    except aiosmtplib.SMTPDataError as error:
        return f"{error.code} {error.message}"
    except aiosmtplib.SMTPServerDisconnected:
        return "disconnected"
    finally:
        client.close()


def test_capture_server_answers_over_real_smtp():
    import asyncio

    server = DemoSMTPServer(free_port()).start()
    try:
        port = server.controller.port
        answers = [
            asyncio.run(_send(port, to, message_id))
            for to, message_id in [
                ("ada@example.com", "<1@demo>"),
                ("tempfail.x@example.net", "<2@demo>"),
                ("flaky.y@example.org", "<3@demo>"),
                ("flaky.y@example.org", "<3@demo>"),
                ("reject.z@example.com", "<4@demo>"),
                ("hangup.w@example.com", "<5@demo>"),
            ]
        ]
    finally:
        server.stop()
    assert answers[0].startswith("250 2.0.0 Ok: queued as DEMO")
    assert answers[1].startswith("451 4.3.0")
    assert answers[2].startswith("451") and answers[3].startswith("250")
    assert answers[4].startswith("550 5.1.1")
    assert answers[5] == "disconnected"
    captured = [(m.recipient, m.message_id) for m in server.handler.captured]
    assert captured[0] == ("ada@example.com", "<1@demo>") and len(captured) == 6


def _log_in(base_url: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base_url, timeout=10)
    page = client.get("/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    form = {"username": username, "password": password, "csrf_token": token}
    assert client.post("/login", data=form).status_code == 302
    return client


def _statuses(engine) -> dict[str, int]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT status, count(*) FROM email_intent GROUP BY status"))
        statuses = dict(rows.all())
        retried = connection.execute(
            text(
                "SELECT count(*) FROM email_intent WHERE status = 'submitted' AND attempt_count > 1"
            )
        ).scalar()
    return {**statuses, "retried": retried}


@pytest.mark.slow
def test_demo_shows_every_status_and_runs_again_on_the_same_database(tmp_path):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    engine = create_engine(url)
    demo = DemoProcess(url)
    try:
        password = demo.wait_for(r"log in\s+operator / (\S+)").group(1)
        demo.wait_for(rf"console on http://127.0.0.1:{demo.port}")
        client = _log_in(f"http://127.0.0.1:{demo.port}", "operator", password)
        assert "Dashboard" in client.get("/").text
        wanted = {"submitted", "retried", "failed", "ambiguous", "suppressed", "dead", "pending"}
        seen: set[str] = set()
        deadline = time.monotonic() + 30
        while not wanted <= seen and time.monotonic() < deadline:
            seen |= {status for status, count in _statuses(engine).items() if count}
            time.sleep(0.3)
        assert wanted <= seen, seen
    finally:
        assert demo.stop() == 0, "\n".join(demo.lines)

    again = DemoProcess(url)
    try:
        password = again.wait_for(r"log in\s+operator / (\S+)").group(1)
        again.wait_for(rf"console on http://127.0.0.1:{again.port}")
        client = _log_in(f"http://127.0.0.1:{again.port}", "operator", password)
        assert "order:1001" in client.get("/intents?q=order:1001").text
    finally:
        assert again.stop() == 0, "\n".join(again.lines)
    with engine.connect() as connection:
        keys = connection.execute(
            text("SELECT count(*) FROM email_intent WHERE idempotency_key = :key"),
            {"key": "order:1001:confirmation"},
        ).scalar()
    engine.dispose()
    assert keys == 1, "the second run reuses the demo's intents"
    assert "Traceback" not in "\n".join(demo.lines + again.lines)


def test_demo_is_a_console_command():
    result = subprocess.run(
        [sys.executable, "-c", "from console.cli import main; main()", "demo", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--smtp-port" in result.stdout


@pytest.mark.parametrize("taken", ["console", "smtp"])
def test_demo_refuses_a_taken_port_in_one_line(tmp_path, taken):
    """A port something else listens on: one clear line, exit status 1, nothing started."""
    database = tmp_path / "demo.db"
    with socket.create_server(("127.0.0.1", 0)) as occupant:
        busy = occupant.getsockname()[1]
        port, smtp_port = (busy, free_port()) if taken == "console" else (free_port(), busy)
        environment = {**os.environ, "CONSOLE_DATABASE_URL": f"sqlite:///{database}"}
        result = subprocess.run(
            [CONSOLE_BIN or "console", "demo", "--port", str(port),
             "--smtp-port", str(smtp_port)],
            env=environment, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    option = "--port" if taken == "console" else "--smtp-port"
    what = "console" if taken == "console" else "SMTP capture"
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"Error: the {what} port {busy} on 127.0.0.1 is already in use: "
        f"stop what listens there or pass another {option}"
    ]
    assert "Traceback" not in result.stdout + result.stderr
    assert "log in" not in result.stdout, "no demo was started"
    assert not database.exists(), "the database was not touched"


QUIET_SECONDS = 10
BANNER = (
    r"^  console +http://",
    r"^  log in +operator / ",
    r"^  log in +admin / ",
    r"^  log in +support / ",
    r"curl -sS -X POST",
    r"^  demo traffic +a case notice",
)
# after the banner: the console's URL, the worker's warnings, the minute's activity line
AFTER_BANNER = (
    r"^console on http://127\.0\.0\.1:\d+ \(embedded worker running\)$",
    r"^\d\d:\d\d:\d\d (warning|error|critical) +\S",
    r"^\d\d:\d\d UTC  last minute: ",
)


def _attempt_numbers(engine) -> set[tuple[int, int]]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT intent_id, attempt_number FROM email_attempt"))
        return {(intent_id, number) for intent_id, number in rows}


def _wait_for_alert(engine, condition: str) -> None:
    query = text("SELECT count(*) FROM alert_state WHERE condition = :condition AND active")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with engine.connect() as connection:
            if connection.execute(query, {"condition": condition}).scalar():
                return
        time.sleep(0.2)
    raise AssertionError(f"the {condition} alert did not fire within 30 s")


@pytest.mark.slow
def test_the_demo_terminal_shows_the_banner_then_stays_quiet(tmp_path):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    engine = create_engine(url)
    demo = DemoProcess(url, CONSOLE_ALERT_INTERVAL_SECONDS="1")
    try:
        password = demo.wait_for(r"log in\s+admin / (\S+)").group(1)
        demo.wait_for(rf"console on http://127.0.0.1:{demo.port}")
        _wait_for_alert(engine, "dead_letter")  # order 997, too old when it failed: staged
        _wait_for_alert(engine, "sender_rate:bounce:7d")
        time.sleep(QUIET_SECONDS)
        client = _log_in(f"http://127.0.0.1:{demo.port}", "admin", password)
        duplicates = re.search(r'<p id="possible-duplicates">(.*?)</p>', client.get("/").text, re.S)
    finally:
        assert demo.stop() == 0, "\n".join(demo.lines)
    lines, terminal = demo.lines, "\n".join(demo.lines)
    for noise in ("alembic", "INFO", "WARNI ", "maximum number of running instances", "smtp  "):
        assert noise not in terminal, noise
    places = [next(n for n, line in enumerate(lines) if re.search(p, line)) for p in BANNER]
    assert places == sorted(places), terminal
    after = [line for line in lines[lines.index("  stop with Ctrl+C") + 1 :] if line]
    assert after, terminal
    for line in after:
        assert any(re.search(pattern, line) for pattern in AFTER_BANNER), line
    logged = {(int(i), int(n)) for i, n in re.findall(r"intent=(\d+) attempt=(\d+)", terminal)}
    assert logged <= _attempt_numbers(engine), "attempts named by their number"
    assert not [line for line in after if re.match(r"^\d\d:\d\d:\d\d error ", line)], terminal
    assert "retry_in" not in terminal
    engine.dispose()
    shown = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", duplicates.group(1)))
    assert "0 reported delivered twice" in shown and "last 24 h: 0 " in shown, shown
