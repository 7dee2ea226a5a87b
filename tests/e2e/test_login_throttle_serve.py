"""Two `console serve` processes behind one proxy share one count of failed logins."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import httpx
import pytest

from tests.support.commands import CONSOLE_BIN
from tests.support.pgcluster import free_port

ATTACKER = "203.0.113.66"
OPERATOR = "198.51.100.7"


def start_serve(env, tmp_path, name):
    port = free_port()
    log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed by the fixture
    process = subprocess.Popen(
        [CONSOLE_BIN, "serve", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, (tmp_path / f"{name}.log").read_text()
        try:
            httpx.get(f"{base}/login", timeout=2)
            return process, log, base
        except httpx.TransportError:
            assert time.monotonic() < deadline, "console serve did not start"
            time.sleep(0.2)


def attempt(base: str, username: str, password: str, address: str) -> httpx.Response:
    headers = {"X-Forwarded-For": address}
    with httpx.Client(base_url=base, headers=headers, timeout=20) as client:
        token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text)
        form = {"username": username, "password": password, "csrf_token": token.group(1)}
        return client.post("/login", data=form)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_two_serve_processes_share_the_count(db_url, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    env.update(
        CONSOLE_DATABASE_URL=db_url,
        CONSOLE_SECRET_KEY="throttle-test-" * 4,
        CONSOLE_TRUSTED_PROXIES="1",
        CONSOLE_SMTP_URL="smtp://127.0.0.1:9",
        CONSOLE_LOG_LEVEL="WARNING",
    )
    created = subprocess.run(
        [CONSOLE_BIN, "user", "create", "admin", "--role", "admin", "--password-stdin"],
        input="correct horse battery\n",
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    started = [start_serve(env, tmp_path, name) for name in ("first", "second")]
    try:
        (_, _, first), (_, _, second) = started
        for _ in range(4):
            assert attempt(first, "admin", "guess", ATTACKER).status_code in (401, 429)
        refused = attempt(second, "admin", "correct horse battery", ATTACKER)
        assert refused.status_code == 429, refused.text
        welcome = attempt(second, "admin", "correct horse battery", OPERATOR)
        assert welcome.status_code == 302
    finally:
        for process, log, _ in started:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
            log.close()
