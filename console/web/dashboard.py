"""The dashboard: queue figures, alerts and the last hour's chart, refreshed by htmx."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections.abc import Iterator, Sequence

from flask import Blueprint, Flask, current_app, render_template, request, url_for

from console.models import utcnow
from console.ops.alerts.checks import AMBIGUOUS_WAITING, DEAD_LETTER
from console.ops.metrics.delivery_figures import DashboardFigures
from console.ops.metrics.send_budget_figures import budget_figures, quota_notices
from console.state_tables import AlertState
from console.store import alerts, holds, intent_search, sender_rates
from console.store.dashboard_queries import SUBMITTED_WINDOW_HOURS, ChartBar
from console.store.delivery_facts import COMPLAINED, HARD_BOUNCED
from console.store.heartbeats import WorkerRow, recent_workers
from console.store.send_guards import active_deferrals, read_breakers
from console.vocabulary import CLOSED, STATUSES
from console.web import alert_words, display
from console.web.auth import role_required
from console.web.dashboard_figures import Dashboard, dashboard
from console.web.display import age_words, format_age, format_timestamp, plural, readable_text
from console.web.drills import last_drill_line
from console.web.extensions import current_settings, db
from console.web.guard_notices import domain_deferral_notices, lane_pause_notices
from console.web.holds import hold_until_words, holds_in_force

bp = Blueprint("dashboard", __name__)

REFRESH_SECONDS = 5  # Flask config DASHBOARD_REFRESH_SECONDS overrides it
WORKER_STALE_MIN_SECONDS = 60.0
# firing conditions the banner already shows with their counts and links
SHOWN_BY_COUNTS = (DEAD_LETTER, AMBIGUOUS_WAITING)
RATES_EXTENSION = "console.sender_rates"  # the process's CachedRates
DELIVERY_EXTENSION = "console.delivery_figures"  # latency and possible duplicates
CHART_WIDTH = 600
CHART_HEIGHT = 120


@dataclasses.dataclass(frozen=True)
class Alert:
    text: str
    link: str | None = None


def worker_stale_after_seconds(poll_seconds: float) -> float:
    """How long without a heartbeat before the worker counts as not ticking."""
    return max(WORKER_STALE_MIN_SECONDS, 10 * poll_seconds)


def worker_state(worker: WorkerRow, now: dt.datetime, stale_after: dt.timedelta) -> tuple[str, str]:
    """A worker's state on the dashboard, and the class of its badge: a clean stop is
    grey with its time, a silent heartbeat red."""
    if worker.stopped_at is not None:
        return f"stopped at {_time_of_day(worker.stopped_at, now)}", "muted"
    if worker.last_tick_at >= now - stale_after:
        return "alive", "status-submitted"
    return "stopped ticking", "status-failed"


def _time_of_day(moment: dt.datetime, now: dt.datetime) -> str:
    """The moment as "19:13 UTC" when it is today (UTC), else with its date."""
    shown = format_timestamp(moment)
    today = format_timestamp(now).split(" ", 1)[0]
    return shown.removeprefix(f"{today} ")


def dashboard_alerts(
    snapshot: Dashboard,
    stale_after_seconds: float,
    firing: Sequence[AlertState] = (),
    figures: alert_words.Figures | None = None,
) -> list[Alert]:
    """The conditions an operator must look at: dead letters, ambiguity, a silent worker,
    and the other alert conditions firing now (pending too long, breaker open, ...),
    each said with the figures as they are now."""
    alerts = []
    if snapshot.dead:
        link = url_for("intents.search", status="dead")
        alerts.append(Alert(f"{plural(snapshot.dead, 'dead letter')} to decide on", link))
    if snapshot.ambiguous:
        link = url_for("intents.search", status="ambiguous")
        waiting = plural(snapshot.ambiguous, "ambiguous send")
        alerts.append(Alert(f"{waiting} waiting for reconciliation", link))
    if snapshot.last_tick_at is None:
        alerts.append(Alert("No worker has ticked yet: is a worker running?"))
    else:
        silent_seconds = (snapshot.now - snapshot.last_tick_at).total_seconds()
        if silent_seconds > stale_after_seconds:
            alerts.append(Alert(f"The worker has not ticked for {format_age(silent_seconds)}"))
    for state in firing:
        if state.condition in SHOWN_BY_COUNTS or not state.summary:
            continue
        line = alert_words.alert_line(state, figures)
        if line:
            alerts.append(Alert(f"{line} (since {format_timestamp(state.fired_at)})"))
    return alerts


def hold_alerts(lines: Sequence[holds.HoldLine]) -> list[Alert]:
    """One line per hold in force, at the top of the dashboard: what is held, how many wait."""
    link = url_for("holds.index")
    return [
        Alert(
            f"Held: {line.selector.notation()} since {format_timestamp(line.hold.held_at)} by "
            f"{line.hold.held_by}, {hold_until_words(line.hold.until)}; "
            f"{plural(line.waiting, 'pending intent')} {'waits' if line.waiting == 1 else 'wait'}",
            link,
        )
        for line in lines
    ]


@dataclasses.dataclass(frozen=True)
class ChartBarShape:
    x: float
    width: float
    accepted_y: float
    accepted_height: float
    failed_y: float
    failed_height: float
    label: str


def chart_shapes(bars: list[ChartBar]) -> tuple[list[ChartBarShape], int]:
    """Lay out stacked bars (accepted below, failed on top) in the chart's box."""
    peak = max((bar.accepted + bar.failed for bar in bars), default=0)
    scale = (CHART_HEIGHT - 4) / peak if peak else 0
    slot = CHART_WIDTH / max(len(bars), 1)
    shapes = []
    for bar in bars:
        accepted_height = bar.accepted * scale
        failed_height = bar.failed * scale
        minutes_ago = len(bars) - 1 - bar.minute
        shapes.append(
            ChartBarShape(
                x=round(bar.minute * slot + 1, 1),
                width=round(slot - 2, 1),
                accepted_y=round(CHART_HEIGHT - accepted_height, 1),
                accepted_height=round(accepted_height, 1),
                failed_y=round(CHART_HEIGHT - accepted_height - failed_height, 1),
                failed_height=round(failed_height, 1),
                label=f"{minutes_ago} min ago: {bar.accepted} accepted, {bar.failed} failed",
            )
        )
    return shapes, peak


def _round_steps() -> Iterator[int]:
    """1, 2, 5, 10, 20, 50, 100, ..."""
    for magnitude in itertools.count():
        for multiple in (1, 2, 5):
            yield multiple * 10**magnitude


def chart_axis(peak: int, most_ticks: int = 4) -> list[tuple[int, float]]:
    """The y-axis ticks (value, y) of the chart: round steps (1, 2, 5 x 10^n) from 0 to the peak."""
    if peak <= 0:
        return [(0, float(CHART_HEIGHT))]
    step = next(step for step in _round_steps() if peak // step < most_ticks)
    scale = (CHART_HEIGHT - 4) / peak
    return [(value, round(CHART_HEIGHT - value * scale, 1)) for value in range(0, peak + 1, step)]


@bp.get("/")
@role_required("viewer")
def index():
    rates = current_app.extensions[RATES_EXTENSION]
    snapshot = dashboard(db.session, rates=rates)
    stale_after = worker_stale_after_seconds(current_settings().poll_seconds)
    shapes, peak = chart_shapes(snapshot.chart)
    firing = alerts.load_firing_alerts(db.session)
    breakers, deferrals = read_breakers(db.session), active_deferrals(db.session, utcnow())
    budget = budget_figures(db.session, current_settings(), utcnow())
    delivery = current_app.extensions[DELIVERY_EXTENSION].get(db.session, current_settings())
    figures = alert_words.Figures(db.session, current_settings(), snapshot, delivery, utcnow())
    context = dict(
        snapshot=snapshot,
        hold_alerts=hold_alerts(holds_in_force()),
        last_drill=last_drill_line(db.session, snapshot.now),
        alerts=dashboard_alerts(snapshot, stale_after, firing, figures)
        + [Alert(readable_text(notice)) for notice in lane_pause_notices(breakers, firing)]
        + [Alert(readable_text(notice)) for notice in domain_deferral_notices(deferrals)]
        + [Alert(readable_text(notice)) for notice in quota_notices(budget)],
        send_budget=budget,
        workers=recent_workers(db.session),
        worker_stale_after=dt.timedelta(seconds=stale_after),
        worker_state=lambda worker: worker_state(
            worker, snapshot.now, dt.timedelta(seconds=stale_after)
        ),
        paused_lanes={lane: state for lane, state in breakers.items() if state.state != CLOSED},
        deferrals=deferrals,
        statuses=STATUSES,
        age_buckets=age_words(intent_search.AGE_BUCKETS),
        submitted_window_hours=SUBMITTED_WINDOW_HOURS,
        chart=shapes,
        chart_peak=peak,
        chart_axis=chart_axis(peak),
        chart_width=CHART_WIDTH,
        chart_height=CHART_HEIGHT,
        accepted_last_hour=sum(bar.accepted for bar in snapshot.chart),
        failed_last_hour=sum(bar.failed for bar in snapshot.chart),
        rate_windows=sender_rates.RATE_WINDOWS,
        rate_limits=sender_rates.LIMIT_BASIS_POINTS,
        rate_kinds={sender_rates.BOUNCE: "permanent bounces", sender_rates.COMPLAINT: "complaints"},
        rate_facts={sender_rates.BOUNCE: HARD_BOUNCED, sender_rates.COMPLAINT: COMPLAINED},
        rates_over_limit=any(rate.over_limit for rate in snapshot.sender_rates.values()),
        rates_max_age_seconds=rates.max_age_seconds,
        delivery=delivery,
        delivery_max_age_seconds=current_app.extensions[DELIVERY_EXTENSION].max_age_seconds,
        refresh_seconds=current_app.config.get("DASHBOARD_REFRESH_SECONDS", REFRESH_SECONDS),
    )
    if request.htmx:
        return render_template("dashboard/_panel.html", **context)
    return render_template("dashboard/index.html", **context)


def init_app(app: Flask) -> None:
    """Register the dashboard and the display filters every page uses."""
    display.init_app(app)
    app.extensions[RATES_EXTENSION] = sender_rates.CachedRates()
    app.extensions[DELIVERY_EXTENSION] = DashboardFigures()
    app.register_blueprint(bp)
