"""A worker's own /metrics port answers only a request carrying CONSOLE_METRICS_TOKEN, when set.

The server that ``console worker`` starts on ``CONSOLE_WORKER_METRICS_PORT``,
asked over a real HTTP connection on 127.0.0.1.
"""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from console.config import load_settings
from console.ops.metrics.prometheus import start_metrics_server
from tests.conftest import TEST_SECRET_KEY
from tests.support.pgcluster import free_port

TOKEN = "metrics-token-5b1e9c"


def metrics_server(db_url, session_factory, tmp_path, **extra: str):
    environment = {
        "CONSOLE_DATABASE_URL": db_url,
        "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
        "CONSOLE_WORKER_METRICS_PORT": str(free_port()),
        **extra,
    }
    settings = load_settings(environment, instance_path=tmp_path)
    return start_metrics_server(settings, session_factory), settings.worker_metrics_port


@pytest.fixture
def guarded(db_url, session_factory, tmp_path):
    server, port = metrics_server(db_url, session_factory, tmp_path, CONSOLE_METRICS_TOKEN=TOKEN)
    yield port
    server.shutdown()
    server.server_close()


@pytest.fixture
def open_port(db_url, session_factory, tmp_path):
    server, port = metrics_server(db_url, session_factory, tmp_path)
    yield port
    server.shutdown()
    server.server_close()


def get(port: int, authorization: str | None = None, path: str = "/metrics"):
    """The status, headers and body of one GET to this machine's `port`."""
    headers = {} if authorization is None else {"Authorization": authorization}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers, refused.read()


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", TOKEN],
)
def test_without_the_token_the_worker_port_answers_401(guarded, authorization):
    status, headers, body = get(guarded, authorization)
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert b"console_" not in body


@pytest.mark.parametrize("written", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"Bearer  {TOKEN} "])
def test_with_the_token_the_worker_port_serves_metrics(guarded, written):
    status, headers, body = get(guarded, written)
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert b"console_intents" in body


def test_without_the_setting_the_worker_port_stays_open(open_port):
    status, _, body = get(open_port)
    assert status == 200 and b"console_intents" in body


def test_other_paths_still_answer_404_with_the_token(guarded):
    assert get(guarded, f"Bearer {TOKEN}", path="/healthz")[0] == 404
