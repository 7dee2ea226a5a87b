"""Console page latency on a million intents, on SQLite and PostgreSQL.

Fills a fresh database with a realistic mix (30 days of mail: mostly submitted,
a few of those bounced or complained about, some failed, dead, expired,
suppressed and cancelled; the last hours with pending, sending and ambiguous
work; attempts for the recent part), then
requests the dashboard, searches, intent pages and the provider event feed
(`/events`, newest first and filtered; one event for every tenth submitted
intent, a few unmatched) through the Flask test client and prints p50/p95 per
page. Target: p95 <= 200 ms each. The dashboard is measured as served (sender
rates counted at most a minute before) and with the rates recounted at every
request. Exports (`/intents/export.csv`, `.jsonl`) are streamed: for them the
time to the first byte of the body is measured.

    python -m tests.bench.bench_console                 # both backends, 1,000,000 intents
    python -m tests.bench.bench_console --backend sqlite --rows 200000
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine, select, text

from console.app import create_app
from console.models import Intent, utcnow
from console.store import intent_search
from console.store.accounts import create_user
from console.store.database import make_engine
from console.store.sender_rates import CachedRates
from console.web.dashboard import RATES_EXTENSION
from console.web.extensions import db
from tests.conftest import migrate_to_head
from tests.support import pgcluster

DAYS_OF_MAIL = 30
RECENT_ROWS = 20_000  # the last hours: where pending, sending and ambiguous intents are
ATTEMPT_ROWS = 50_000  # the most recent intents get an attempt row
TARGET_P95_MS = 200.0
PARAMS = """'{"code": "123456"}'"""

STATUS_CASE = """
CASE WHEN n > :rows - :recent THEN
  CASE WHEN n % 1000 < 300 THEN 'pending' WHEN n % 1000 < 310 THEN 'sending'
       WHEN n % 1000 < 330 THEN 'ambiguous' WHEN n % 1000 < 350 THEN 'failed'
       ELSE 'submitted' END
ELSE
  CASE WHEN n % 1000 < 2 THEN 'pending' WHEN n % 1000 < 5 THEN 'ambiguous'
       WHEN n % 1000 < 25 THEN 'failed' WHEN n % 1000 < 30 THEN 'dead'
       WHEN n % 1000 < 40 THEN 'expired' WHEN n % 1000 < 50 THEN 'suppressed'
       WHEN n % 1000 < 55 THEN 'cancelled' ELSE 'submitted' END
END"""
TEMPLATE_CASE = """
CASE WHEN n % 5 = 0 THEN 'login-code' WHEN n % 3 = 0 THEN 'welcome'
     WHEN n % 3 = 1 THEN 'order-confirmation' ELSE 'case-assigned' END"""
ATTEMPTS_CASE = """
CASE status WHEN 'submitted' THEN 1 WHEN 'failed' THEN 3 WHEN 'dead' THEN 8
            WHEN 'ambiguous' THEN 1 WHEN 'pending' THEN n % 3 ELSE 0 END"""
# provider facts of submitted intents: 0.6 % permanent bounces, 0.2 % transient, 0.1 % complaints
BOUNCE_TYPE_CASE = """
CASE WHEN status = 'submitted' AND n % 1000 BETWEEN 60 AND 65 THEN 'permanent'
     WHEN status = 'submitted' AND n % 1000 BETWEEN 66 AND 67 THEN 'transient' END"""
COMPLAINED_CASE = "status = 'submitted' AND n % 1000 = 70"
OUTCOME_CASE = """
CASE status WHEN 'submitted' THEN 'accepted' WHEN 'failed' THEN 'permanent'
            WHEN 'dead' THEN 'transient' WHEN 'ambiguous' THEN 'ambiguous'
            WHEN 'pending' THEN 'transient' END"""


def _intent_select(created_at: str, params: str, numbers: str) -> str:
    """SELECT one email_intent row per n of `numbers`; `created_at`, `params` are SQL."""
    return f"""
SELECT 'order:' || n || ':' || 'confirmation', '<' || n || '@bench.localhost>', 'order:' || n,
       'customer' || (n % 50000) || '@example.com', {TEMPLATE_CASE}, 1,
       {params}, status, CASE WHEN n % 5 = 0 THEN 'critical' ELSE 'bulk' END,
       {ATTEMPTS_CASE}, {created_at}, {created_at}, {created_at}, 'relay-' || n,
       CASE WHEN status = 'submitted' THEN {created_at} END,
       CASE WHEN {BOUNCE_TYPE_CASE} IS NOT NULL THEN {created_at} END, {BOUNCE_TYPE_CASE},
       CASE WHEN {COMPLAINED_CASE} THEN {created_at} END
FROM (SELECT n, {STATUS_CASE} AS status FROM {numbers}) AS numbered"""


INTENT_COLUMNS = """(idempotency_key, message_id, event, recipient, template, template_version,
 params, status, lane, attempt_count, next_attempt_at, created_at, updated_at,
 provider_message_id, submitted_at, bounced_at, bounce_type, complained_at)"""
ATTEMPTS_INSERT = f"""
INSERT INTO email_attempt (intent_id, attempt_number, lease_token, worker_id, stage,
  started_at, finished_at, outcome, reply_code, reply_text, provider_message_id, duration_ms)
SELECT id, 1, 'bench', 'bench-worker', 'reply_read', created_at, created_at, {OUTCOME_CASE},
       250, '250 2.0.0 Ok: queued', provider_message_id, 40
FROM email_intent WHERE id > :rows - :attempts AND status NOT IN ('sending', 'suppressed')"""
# provider events: one for every tenth submitted intent, one in ten of those unmatched
EVENTS_INSERT = """
INSERT INTO provider_event (source, source_event_id, event_type, bounce_type, recipient,
  provider_message_id, intent_id, occurred_at, received_at, matched_at, unmatched_reason)
SELECT 'webhook', 'bench-' || id,
       CASE WHEN id % 1000 = 60 THEN 'bounced' WHEN id % 1000 = 70 THEN 'complained'
            ELSE 'delivered' END,
       CASE WHEN id % 1000 = 60 THEN 'permanent' END, recipient, provider_message_id,
       CASE WHEN id % 100 = 50 THEN NULL ELSE id END, created_at, created_at,
       CASE WHEN id % 100 = 50 THEN NULL ELSE created_at END,
       CASE WHEN id % 100 = 50 THEN 'no attempt carries this provider message id' END
FROM email_intent WHERE status = 'submitted' AND id % 10 = 0"""


def fill_sqlite(engine: Engine, rows: int, now: dt.datetime) -> None:
    seconds = f"CAST((:rows - n) * {DAYS_OF_MAIL * 86400.0} / :rows AS INTEGER)"
    created_at = f"strftime('%Y-%m-%d %H:%M:%S', :now, '-' || {seconds} || ' seconds') || '.000000'"
    insert = f"""
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < :rows)
INSERT INTO email_intent {INTENT_COLUMNS} {_intent_select(created_at, PARAMS, "seq")}"""
    params = dict(rows=rows, recent=RECENT_ROWS, attempts=ATTEMPT_ROWS)
    naive_now = now.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S")
    with engine.begin() as connection:
        connection.execute(text(insert), {**params, "now": naive_now})
        connection.execute(text(ATTEMPTS_INSERT), params)
        connection.execute(text(EVENTS_INSERT))


def fill_postgresql(engine: Engine, rows: int, now: dt.datetime) -> None:
    seconds = f"((:rows - n) * {DAYS_OF_MAIL * 86400.0} / :rows)"
    created_at = f"(CAST(:now AS timestamptz) - make_interval(secs => {seconds}))"
    numbers = "generate_series(1, :rows) AS series(n)"
    select_rows = _intent_select(created_at, f"CAST({PARAMS} AS json)", numbers)
    insert = f"INSERT INTO email_intent {INTENT_COLUMNS} {select_rows}"
    params = dict(rows=rows, recent=RECENT_ROWS, attempts=ATTEMPT_ROWS)
    with engine.begin() as connection:
        connection.execute(text(insert), {**params, "now": now})
        connection.execute(text(ATTEMPTS_INSERT), params)
        connection.execute(text(EVENTS_INSERT))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE"))


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def deep_cursors(rows: int, rng: random.Random) -> list[str]:
    """Keyset positions of random intents, as the "next page" links carry them."""
    ids = [rng.randrange(1000, rows) for _ in range(50)]
    found = db.session.execute(select(Intent.created_at, Intent.id).where(Intent.id.in_(ids)))
    return [intent_search.encode_cursor(created_at, intent_id) for created_at, intent_id in found]


def page_requests(
    rows: int, rng: random.Random, cursors: list[str], rates: CachedRates
) -> dict[str, Callable]:
    """Each measured page: a name and a function returning the next URL to ask for."""
    recent_ids = range(rows - RECENT_ROWS, rows + 1)

    def customer() -> str:
        return f"customer{rng.randrange(50000)}@example.com"

    def dashboard_recounting_rates() -> str:
        rates.forget()
        return "/"

    return {
        "dashboard": lambda: "/",
        "dashboard, rates recounted": dashboard_recounting_rates,
        "search: event": lambda: f"/intents?q=order:{rng.randrange(1, rows)}",
        "search: key prefix": lambda: f"/intents?q=order:{rng.randrange(10, 99)}",
        "search: typing 'order:'": lambda: "/intents?q=order:",
        "search: 1-digit prefix": lambda: f"/intents?q=order:{rng.randrange(1, 9)}",
        "search: 1-digit, failed": lambda: f"/intents?q=order:{rng.randrange(1, 9)}&status=failed",
        "search: recipient": lambda: f"/intents?q=customer{rng.randrange(50000)}@example.com",
        "search: Message-ID": lambda: f"/intents?q=<{rng.randrange(1, rows)}@bench.localhost>",
        "search: provider id": lambda: f"/intents?q=relay-{rng.randrange(1, rows)}",
        "list: all, page 1": lambda: "/intents",
        "list: all, deep page": lambda: f"/intents?after={rng.choice(cursors)}",
        "list: template": lambda: "/intents?template=password-reset",
        "list: ambiguous": lambda: "/intents?status=ambiguous",
        "list: submitted bulk": lambda: "/intents?status=submitted&lane=bulk",
        "list: pending 5-60 min": lambda: "/intents?status=pending&age=5to60m",
        "detail (recent)": lambda: f"/intents/{rng.choice(recent_ids)}",
        "detail (old)": lambda: f"/intents/{rng.randrange(1, rows - RECENT_ROWS)}",
        "events: newest first": lambda: "/events",
        "events: bounced": lambda: "/events?type=bounced",
        "events: unmatched": lambda: "/events?match=unmatched",
        "events: recipient": lambda: f"/events?recipient={customer()}",
    }


def export_requests(rows: int, rng: random.Random) -> dict[str, Callable]:
    """Each measured export (a streamed body): a name and a function returning its URL."""
    return {
        "export csv: all": lambda: "/intents/export.csv",
        "export csv: event": lambda: f"/intents/export.csv?q=order:{rng.randrange(1, rows)}",
        "export csv: failed": lambda: "/intents/export.csv?status=failed",
        "export jsonl: recipient": lambda: (
            f"/intents/export.jsonl?q=customer{rng.randrange(50000)}@example.com"
        ),
    }


def _sampled(next_url: Callable, repeat: int, timed: Callable) -> tuple[float, float]:
    for _ in range(3):  # warm caches and prepared plans
        timed(next_url())
    samples = [timed(next_url()) for _ in range(repeat)]
    return statistics.median(samples), percentile(samples, 0.95)


def _page_ms(client) -> Callable[[str], float]:
    """Time one page, whole."""

    def timed(target: str) -> float:
        started = time.perf_counter()
        response = client.get(target)
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, (target, response.status_code)
        return elapsed

    return timed


def _streamed_ms(client, lines: int = 0) -> Callable[[str], float]:
    """Time a streamed export up to its first byte (or its first `lines` lines), drop the rest."""

    def timed(target: str) -> float:
        started = time.perf_counter()
        response = client.get(target, buffered=False)
        assert response.status_code == 200, (target, response.status_code)
        seen = b""
        for chunk in response.iter_encoded():
            seen += chunk
            if seen and seen.count(b"\n") >= lines:
                break
        elapsed = (time.perf_counter() - started) * 1000
        assert seen, target
        response.close()
        return elapsed

    return timed


def measure(url: str, rows: int, repeat: int) -> dict[str, tuple[float, float]]:
    app = create_app({"CONSOLE_DATABASE_URL": url, "CONSOLE_SECRET_KEY": "bench" * 7})
    rng = random.Random(7)
    with app.app_context():
        create_user(db.session, "bench", "bench-password", "operator")
        db.session.commit()
        cursors = deep_cursors(rows, rng)
    client = app.test_client()
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "bench"
    login = {"username": "bench", "password": "bench-password", "csrf_token": "bench"}
    assert client.post("/login", data=login).status_code == 302
    results = {}
    rates = app.extensions[RATES_EXTENSION]
    for name, next_url in page_requests(rows, rng, cursors, rates).items():
        results[name] = _sampled(next_url, repeat, _page_ms(client))
    for name, next_url in export_requests(rows, rng).items():
        results[name + " (1st byte)"] = _sampled(next_url, repeat, _streamed_ms(client))
        first_row = 2 if ".csv" in next_url() else 1  # the CSV's header row comes first
        results[name + " (1st row)"] = _sampled(next_url, repeat, _streamed_ms(client, first_row))
    with app.app_context():
        db.engine.dispose()
    return results


def report(backend: str, rows: int, fill_seconds: float, results: dict) -> None:
    print(f"\n{backend}: {rows:,} intents (filled in {fill_seconds:.0f} s)")
    print(f"  {'page':<38}{'p50 ms':>9}{'p95 ms':>9}")
    for name, (p50, p95) in results.items():
        flag = "" if p95 <= TARGET_P95_MS else f"  over the {TARGET_P95_MS:.0f} ms target"
        print(f"  {name:<38}{p50:>9.1f}{p95:>9.1f}{flag}")


def run_backend(backend: str, rows: int, repeat: int, workdir: Path) -> None:
    now = utcnow()
    cluster = None
    if backend == "sqlite":
        url = f"sqlite:///{workdir / 'bench.db'}"
    else:
        cluster = pgcluster.start_cluster(durable=True)
        url = pgcluster.create_database(cluster, "bench")
    try:
        migrate_to_head(url)
        engine = make_engine(url)
        started = time.perf_counter()
        (fill_sqlite if backend == "sqlite" else fill_postgresql)(engine, rows, now)
        fill_seconds = time.perf_counter() - started
        engine.dispose()
        report(backend, rows, fill_seconds, measure(url, rows, repeat))
    finally:
        if cluster is not None:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=40, help="requests per page kind")
    args = parser.parse_args()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    workdir = Path(tempfile.mkdtemp(prefix="bench-console."))
    try:
        for backend in backends:
            run_backend(backend, args.rows, args.repeat, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
