"""Bounce and complaint rates on the dashboard, against the providers' limits."""

from __future__ import annotations

import datetime as dt
import itertools
import re

import pytest
from sqlalchemy import event, insert

from console.models import Intent, utcnow
from console.store.sender_rates import BOUNCE, COMPLAINT, CachedRates, SenderRate, sender_rates
from console.web import dashboard_figures as figures
from console.web.extensions import db

_numbers = itertools.count(1)


def submitted_rows(count: int, submitted_at: dt.datetime, **facts) -> list[dict]:
    """Rows of `count` intents submitted at `submitted_at`, with any provider facts."""
    rows = []
    for _ in range(count):
        number = next(_numbers)
        rows.append(
            dict(
                idempotency_key=f"rate:{number}",
                message_id=f"<rate.{number}@test.localhost>",
                recipient=f"r{number}@example.com",
                template="welcome",
                status="submitted",
                created_at=submitted_at - dt.timedelta(seconds=2),
                submitted_at=submitted_at,
                **facts,
            )
        )
    return rows


def add_mail(app, *row_lists: list[dict]) -> None:
    with app.app_context():
        db.session.execute(insert(Intent), [row for rows in row_lists for row in rows])
        db.session.commit()


def fill_windows(app, now: dt.datetime) -> None:
    """24 h: 100 submitted, 2 permanent bounces (at the 2 % limit), no complaint.
    7 days: 400 submitted, 5 permanent bounces (1.25 %), 2 complaints (0.5 %, over 0.3 %)."""
    hours = lambda n: now - dt.timedelta(hours=n)  # noqa: E731
    add_mail(
        app,
        submitted_rows(95, hours(1)),
        submitted_rows(2, hours(3), bounced_at=hours(2), bounce_type="permanent"),
        submitted_rows(1, hours(3), bounced_at=hours(1), bounce_type="transient"),
        submitted_rows(1, hours(3), bounced_at=hours(1), bounce_type="undetermined"),
        submitted_rows(1, hours(5), delivered_at=hours(4)),
        submitted_rows(295, hours(72)),
        submitted_rows(3, hours(72), bounced_at=hours(70), bounce_type="permanent"),
        submitted_rows(2, hours(72), complained_at=hours(48)),
        # submitted in the window, bounced later than a week after the other window
        submitted_rows(1000, hours(240)),
        submitted_rows(1, hours(240), bounced_at=hours(200), bounce_type="permanent"),
        submitted_rows(1, hours(240), complained_at=hours(190)),
    )


def test_rates_over_both_windows_count_permanent_bounces_and_complaints(app):
    now = utcnow()
    fill_windows(app, now)
    with app.app_context():
        rates = sender_rates(db.session, now)
    figures = {key: (rate.count, rate.submitted, rate.over_limit) for key, rate in rates.items()}
    assert figures == {
        (BOUNCE, "24h"): (2, 100, True),
        (BOUNCE, "7d"): (5, 400, False),
        (COMPLAINT, "24h"): (0, 100, False),
        (COMPLAINT, "7d"): (2, 400, True),
    }
    assert rates[(BOUNCE, "7d")].rate == pytest.approx(0.0125)


def test_dashboard_panel_without_mail_shows_no_rate(app, console_client):
    page = console_client("viewer").get("/").text
    assert 'id="sender-rates"' in page and "card-bad" not in page
    assert re.search(r'id="rate-bounce-24h" data-over-limit="no">\s*<span class="rate">–</span>'
                     r'\s*<a class="muted" [^>]*>0 of 0</a>', page)  # fmt: skip
    assert "(counted at most 1 min ago)" in page


def test_dashboard_panel_shows_rates_limits_and_the_over_limit_state(app, console_client):
    fill_windows(app, utcnow())
    panel = console_client("viewer").get("/", headers={"HX-Request": "true"}).text
    assert '<section class="card card-bad" id="sender-rates">' in panel
    section = panel.split('id="sender-rates"')[1]
    assert "over the providers' limit" in section.split("</h2>")[0]

    def cell(kind: str, window: str) -> str:
        match = re.search(rf'<td id="rate-{kind}-{window}"(.*?)</td>', section, re.S)
        return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", match.group(0))).strip(), match[1]

    text, attributes = cell("bounce", "24h")
    assert text == "2.00 % 2 of 100 over the limit" and 'class="rate-over"' in attributes
    text, attributes = cell("bounce", "7d")
    assert text == "1.25 % 5 of 400" and 'data-over-limit="no"' in attributes
    assert cell("complaint", "24h")[0] == "0.00 % 0 of 100"
    assert cell("complaint", "7d")[0] == "0.50 % 2 of 400 over the limit"
    assert "<td>under 2 %</td>" in section and "<td>under 0.3 %</td>" in section


@pytest.mark.parametrize(
    ("kind", "count", "submitted", "over"),
    [
        (BOUNCE, 199, 10_000, False),
        (BOUNCE, 200, 10_000, True),  # 2 % is not under 2 %
        (COMPLAINT, 29, 10_000, False),
        (COMPLAINT, 30, 10_000, True),
        (COMPLAINT, 1, 0, True),  # a complaint while nothing was sent
        (BOUNCE, 0, 0, False),
    ],
)
def test_limit_is_exact_at_the_boundary(kind, count, submitted, over):
    rate = SenderRate(kind, "24h", count, submitted)
    assert rate.over_limit is over
    assert rate.rate == (count / submitted if submitted else None)


def test_cached_rates_are_recounted_once_they_are_a_minute_old(app):
    now = utcnow()
    rates = CachedRates(max_age_seconds=60)
    add_mail(app, submitted_rows(10, now - dt.timedelta(hours=1)))
    with app.app_context():
        assert rates.get(db.session, now)[(BOUNCE, "24h")].submitted == 10
    add_mail(app, submitted_rows(5, now - dt.timedelta(hours=1)))
    with app.app_context():
        later = now + dt.timedelta(seconds=59)
        assert rates.get(db.session, later)[(BOUNCE, "24h")].submitted == 10, "still fresh"
        later = now + dt.timedelta(seconds=60)
        assert rates.get(db.session, later)[(BOUNCE, "24h")].submitted == 15, "recounted"
        add_mail(app, submitted_rows(1, now - dt.timedelta(hours=1)))
        earlier = now  # the clock went back: recount rather than trust a future count
        assert rates.get(db.session, earlier)[(BOUNCE, "24h")].submitted == 16


def test_every_rate_query_is_served_by_an_index(app):
    """Each count is a range scan of its own index, never a pass over the table."""
    with app.app_context():
        connection = db.session.connection()
        dialect = connection.dialect.name
        statements = []

        def capture(conn, cursor, statement, parameters, context, executemany):
            statements.append((statement, parameters))

        event.listen(connection, "before_cursor_execute", capture)
        try:
            figures.dashboard(db.session)  # the rates as the dashboard asks for them
        finally:
            event.remove(connection, "before_cursor_execute", capture)
        rate_statements = [
            (statement, parameters)
            for statement, parameters in statements
            if re.search(
                r"WHERE email_intent\.(submitted_at|bounced_at|complained_at) >=", statement
            )
        ]
        assert len(rate_statements) == 6  # two windows of three counts
        if dialect == "postgresql":  # a tiny table is cheaper to scan: ask for the index plan
            connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
        explain = "EXPLAIN" if dialect == "postgresql" else "EXPLAIN QUERY PLAN"
        plans = [
            " ".join(str(row) for row in connection.exec_driver_sql(f"{explain} {sql}", params))
            for sql, params in rate_statements
        ]
    indexes = (
        "ix_email_intent_submitted_at",
        "ix_email_intent_bounced",
        "ix_email_intent_complained",
    )
    for plan, index in zip(plans, [name for name in indexes for _ in range(2)], strict=True):
        assert index in plan, plan
        assert "Seq Scan" not in plan and "SCAN email_intent" not in plan, plan
