"""Several processes on one PostgreSQL: wake-up by LISTEN/NOTIFY, and a crash mid-run.

The real ``console`` processes (tests/support/console_processes.py) and the
bulk-loaded intents (tests/support/backlog.py) are shared with
``tests/bench/bench_scale.py``.
"""

from __future__ import annotations

import collections
import random
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from console.engine.pg_wakeup import NotifyListener
from console.models import Attempt, Intent
from console.outbox import enqueue
from console.store.database import make_engine
from console.vocabulary import AMBIGUOUS, FAILED, SUBMITTED
from tests.support.backlog import bulk_insert_intents, recipient
from tests.support.console_processes import ConsoleProcess, console_environment, worker_process
from tests.support.pgcluster import free_port
from tests.support.smtp_server import SubprocessSMTPServer, read_records

LOGIN = dict(to="ada@example.com", template="login-code", params={"code": "1"})


def test_a_committed_enqueue_wakes_a_listener_and_a_rolled_back_one_does_not(postgres_url):
    woken = threading.Event()
    listener = NotifyListener(postgres_url, on_notify=woken.set).start()
    engine = make_engine(postgres_url)
    try:
        assert listener.wait_listening(10)
        assert woken.wait(5)  # the wake-up given on (re)connecting
        woken.clear()
        with Session(engine) as session:
            enqueue(session, key="rolled-back", **LOGIN)
            session.rollback()
        assert not woken.wait(1.5)
        with Session(engine) as session:
            enqueue(session, key="committed", **LOGIN)
            assert not woken.wait(0.5), "a NOTIFY is delivered on commit, not before"
            session.commit()
        assert woken.wait(5)
    finally:
        listener.stop()
        engine.dispose()


# --- helpers ---------------------------------------------------------------------------


def serve_process(env: dict[str, str], workdir: Path, port: int) -> ConsoleProcess:
    return ConsoleProcess(["serve", "--port", str(port)], env, workdir)


def wait_for_http(url: str, timeout_seconds: float) -> int:
    """Return the HTTP status of `url` once it answers (an error status counts)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def status_counts(engine: Engine) -> collections.Counter[str]:
    with Session(engine) as session:
        rows = session.execute(select(Intent.status, func.count()).group_by(Intent.status))
        return collections.Counter(dict(rows.all()))


def wait_until(condition, timeout_seconds: float, every_seconds: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_seconds)
    return True


# --- the scale-out run -------------------------------------------------------------------

TOTAL_INTENTS = 8_000
ENQUEUED_DURING_RUN = 500  # through enqueue(): NOTIFY wakes the other processes
TRANSIENT_SHARE = 0.05  # 451 on the first attempt, then 250
PERMANENT_SHARE = 0.01  # 550
KILL_AFTER_SUBMITTED = 2_500
SETTLE_TIMEOUT_SECONDS = 150
SMTP_CONNECTIONS = 4  # per process: at most this many sends of the victim were in flight,
# and twice as many records written behind them (worker.loop.RECORDS_A_SENDER)


def scripted_replies(total: int, seed: int = 6) -> dict[str, list[str]]:
    """Script 5 % of the recipients to get 451 once, then 250, and 1 % to get 550,
    scattered over every domain."""
    rng = random.Random(seed)
    script = {}
    for number in range(1, total + 1):
        draw = rng.random()
        if draw < PERMANENT_SHARE:
            script[recipient(number)] = ["550"]
        elif draw < PERMANENT_SHARE + TRANSIENT_SHARE:
            script[recipient(number)] = ["451", "250"]
    return script


def enqueue_during_run(engine: Engine, first: int, count: int, per_transaction: int) -> None:
    for start in range(first, first + count, per_transaction):
        with Session(engine) as session:
            for number in range(start, min(start + per_transaction, first + count)):
                enqueue(
                    session,
                    key=f"scale:{number}",
                    to=recipient(number),
                    template="welcome",
                    params={"name": "Ada", "login_url": "https://shop.example.com/login"},
                )
            session.commit()
        time.sleep(0.05)


@pytest.fixture
def scripted_sink(tmp_path):
    """A subprocess SMTP server answering the 5 % / 1 % script, recording every body; it
    offers PIPELINING and CHUNKING, as Postfix does (MAIL+RCPT in one write, BDAT)."""
    script = scripted_replies(TOTAL_INTENTS)
    record_path = tmp_path / "smtp.jsonl"
    smtp = SubprocessSMTPServer.start(
        record_path=record_path, script=script, stall_seconds=1, pipelining=True, chunking=True
    )
    yield smtp, script, record_path
    smtp.stop()


@pytest.mark.slow
def test_three_serve_and_one_worker_process_share_postgresql_through_a_crash(
    postgres_url, tmp_path, scripted_sink
):
    smtp, script, record_path = scripted_sink
    engine = make_engine(postgres_url)
    env = console_environment(
        postgres_url,
        smtp.url,
        CONSOLE_POLL_SECONDS="0.2",
        CONSOLE_BATCH_SIZE="50",
        CONSOLE_SMTP_CONNECTIONS=str(SMTP_CONNECTIONS),
        CONSOLE_LEASE_SECONDS="30",  # the victim's claims come back after this
        CONSOLE_RETRY_BASE_SECONDS="0.5",
        CONSOLE_RETRY_CAP_SECONDS="1",
        CONSOLE_RETRY_FLOOR_SECONDS="0.2",
        CONSOLE_DOMAIN_BACKOFF_SECONDS="1",
        CONSOLE_METRICS_CACHE_SECONDS="0",
    )
    ports = [free_port() for _ in range(3)]
    processes = [serve_process(env, tmp_path, port) for port in ports]
    processes.append(worker_process(env, tmp_path))
    bulk_insert_intents(engine, 1, TOTAL_INTENTS - ENQUEUED_DURING_RUN)
    started = time.monotonic()
    try:
        for process in processes:
            process.start()
        late = threading.Thread(
            target=enqueue_during_run,
            args=(engine, TOTAL_INTENTS - ENQUEUED_DURING_RUN + 1, ENQUEUED_DURING_RUN, 100),
        )
        late.start()
        assert wait_until(lambda: status_counts(engine)[SUBMITTED] >= KILL_AFTER_SUBMITTED, 90), (
            f"too slow: {status_counts(engine)}"
        )
        victim = processes[0]
        victim_pid = victim.pid
        victim.kill()
        time.sleep(0.5)
        processes[0] = serve_process(env, tmp_path, ports[0]).start()
        late.join(60)

        def settled() -> bool:
            counts = status_counts(engine)
            return counts[SUBMITTED] + counts[FAILED] + counts[AMBIGUOUS] == TOTAL_INTENTS

        assert wait_until(settled, SETTLE_TIMEOUT_SECONDS), f"not settled: {status_counts(engine)}"
        elapsed_seconds = time.monotonic() - started
        health = [wait_for_http(f"http://127.0.0.1:{port}/healthz", 20) for port in ports]
        with urllib.request.urlopen(f"http://127.0.0.1:{ports[1]}/metrics", timeout=10) as page:
            metrics_text = page.read().decode()
    finally:
        for process in processes:
            process.stop()

    check_outcome(engine, record_path, script, victim_pid)
    assert health == [200, 200, 200]
    scraped = {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == "console_intents"
    }
    submitted = status_counts(engine)[SUBMITTED]
    assert scraped[(("lane", "bulk"), ("status", "submitted"))] == submitted
    print(
        f"\n{TOTAL_INTENTS} intents through 4 processes in {elapsed_seconds:.1f} s: "
        f"{dict(status_counts(engine))}"
    )
    engine.dispose()


def check_outcome(engine: Engine, record_path: Path, script: dict, victim_pid: int) -> None:
    """Every Message-ID at most once; every intent where its script says, or ambiguous
    only if the killed process held it."""
    received = collections.Counter(
        r.message_id for r in read_records(record_path) if r.result == "250"
    )
    assert max(received.values()) == 1, "a Message-ID reached the server twice"
    with Session(engine) as session:
        intents = session.execute(
            select(Intent.id, Intent.recipient, Intent.message_id, Intent.status)
        ).all()
        last_workers = dict(
            session.execute(select(Attempt.intent_id, Attempt.worker_id).order_by(Attempt.id)).all()
        )
    assert len(intents) == TOTAL_INTENTS
    counts = collections.Counter(status for *_, status in intents)
    assert set(counts) <= {SUBMITTED, FAILED, AMBIGUOUS}, counts
    for intent_id, address, message_id, status in intents:
        behaviours = script.get(address, ["250"])
        if status == AMBIGUOUS:
            assert f":{victim_pid}:" in last_workers[intent_id], "ambiguous without the kill"
        elif behaviours == ["550"]:
            assert status == FAILED, (address, status)
        else:
            assert status == SUBMITTED, (address, status)
            assert received[message_id] == 1, "submitted, but the server never accepted it"
    unknown_at_most = 3 * SMTP_CONNECTIONS
    assert counts[AMBIGUOUS] <= unknown_at_most, "more ambiguous than in flight and unrecorded"
