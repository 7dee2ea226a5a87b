"""Read-only queries of the console: dashboard figures, search and one intent's timeline."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, and_, case, func, literal, or_, select, text, tuple_
from sqlalchemy.orm import Session
from sqlalchemy.sql.util import ClauseAdapter

from console.models import (
    AMBIGUOUS,
    DEAD,
    LANES,
    PENDING,
    STATUSES,
    SUBMITTED,
    Attempt,
    AuditEntry,
    Intent,
    ProviderEvent,
    Suppression,
    WorkerHeartbeat,
    utcnow,
)
from console.store.sender_rates import SenderRate, sender_rates

# name -> (label, youngest age in seconds, oldest age in seconds or None)
AGE_BUCKETS: dict[str, tuple[str, int, int | None]] = {
    "lt1m": ("under 1 min", 0, 60),
    "1to5m": ("1–5 min", 60, 300),
    "5to60m": ("5–60 min", 300, 3600),
    "gt1h": ("over 1 h", 3600, None),
}
# the search filter offers the dashboard's buckets and two wider ones
SEARCH_AGES: dict[str, tuple[str, int, int | None]] = {
    **AGE_BUCKETS,
    "lt1d": ("under 1 day", 0, 86400),
    "gt1d": ("over 1 day", 86400, None),
}
SUBMITTED_WINDOW_HOURS = 24
CHART_MINUTES = 60
FAILED_OUTCOMES = ("transient", "permanent", "ambiguous")
PAGE_SIZE = 50
RECENT_WINDOW = 5_000  # a broad prefix search first looks among this many newest intents


class InvalidFilter(ValueError):
    """A search filter has a value the console does not know; the message names it."""


@dataclasses.dataclass(frozen=True)
class SearchFilters:
    """What the search box and the filter menus ask for."""

    q: str = ""
    status: str | None = None
    lane: str | None = None
    template: str | None = None
    age: str | None = None

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> SearchFilters:
        """Read filters from query arguments; InvalidFilter on an unknown value."""
        values = {name: (args.get(name) or "").strip() or None for name in ("status", "lane")}
        values["template"] = (args.get("template") or "").strip() or None
        values["age"] = (args.get("age") or "").strip() or None
        if values["status"] and values["status"] not in STATUSES:
            raise InvalidFilter(f"unknown status {values['status']!r}")
        if values["lane"] and values["lane"] not in LANES:
            raise InvalidFilter(f"unknown lane {values['lane']!r}")
        if values["age"] and values["age"] not in SEARCH_AGES:
            raise InvalidFilter(f"unknown age {values['age']!r}")
        return cls(q=(args.get("q") or "").strip()[:320], **values)

    def as_args(self) -> dict[str, str]:
        """Return the non-empty filters as query arguments (for links)."""
        fields = dataclasses.asdict(self)
        return {name: value for name, value in fields.items() if value}

    def conditions(
        self, dialect: str, now: dt.datetime, *, with_text: bool = True
    ) -> list[ColumnElement[bool]]:
        """Return the WHERE conditions on email_intent these filters mean."""
        conditions: list[ColumnElement[bool]] = []
        if self.q and with_text:
            conditions.append(or_(*_text_matches(self.q, dialect)))
        if self.status:
            conditions.append(Intent.status == self.status)
        if self.lane:
            conditions.append(Intent.lane == self.lane)
        if self.template:
            conditions.append(Intent.template == self.template)
        if self.age:
            conditions.extend(_age_conditions(self.age, now))
        return conditions

    def branches(self, dialect: str) -> list[Branch]:
        """Split the search into queries whose union is the whole, each served by one index.

        The search box is an OR of lookups (event, key, recipient, ...): one query
        per lookup. A status without a lane: one query per lane, on the
        (status, lane, created_at) index. Otherwise a single query.
        """
        if self.q:
            return _text_branches(self.q, dialect)
        if self.status and not self.lane:
            return [Branch([Intent.lane == lane]) for lane in LANES]
        return [Branch([])]


def _prefix_match(column: Any, prefix: str, dialect: str) -> ColumnElement[bool]:
    """Match values starting with `prefix` in a way that uses the column's index.

    PostgreSQL's indexes use varchar_pattern_ops, which serve LIKE 'x%'; SQLite's
    LIKE ignores case and skips the index, so there it is a range on the BINARY index.
    """
    if dialect == "postgresql":
        return column.startswith(prefix, autoescape=True)
    if ord(prefix[-1]) >= 0x10FFFF:
        return and_(column >= prefix, func.substr(column, 1, len(prefix)) == prefix)
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    return and_(column >= prefix, column < upper)


@dataclasses.dataclass(frozen=True)
class Branch:
    """One query of a search; `may_be_broad` for a prefix that can match most rows."""

    conditions: list[ColumnElement[bool]]
    may_be_broad: bool = False


def _without_index(expression: Any) -> Any:
    """The same value, out of reach of any index (coalesce(x, x) is x)."""
    return func.coalesce(expression, expression)


PREFIX_COLUMNS = (Intent.event, Intent.idempotency_key)


def _text_branches(q: str, dialect: str) -> list[Branch]:
    prefixes = or_(*(_prefix_match(column, q, dialect) for column in PREFIX_COLUMNS))
    return [Branch([prefixes], may_be_broad=True)] + [Branch([m]) for m in _exact_matches(q)]


def _text_matches(q: str, dialect: str) -> list[ColumnElement[bool]]:
    """The one search box: event or key prefix, recipient, Message-ID, provider id, #id."""
    prefixes = [_prefix_match(column, q, dialect) for column in PREFIX_COLUMNS]
    return prefixes + _exact_matches(q)


def _exact_matches(q: str) -> list[ColumnElement[bool]]:
    matches = [Intent.provider_message_id == q]
    if "@" in q:
        local, _, domain = q.rpartition("@")
        bare = q.strip("<>")
        matches.append(Intent.recipient.in_({q, q.lower(), f"{local}@{domain.lower()}"}))
        matches.append(Intent.message_id.in_({q, f"<{bare}>"}))
    digits = q.removeprefix("#")
    if digits.isdigit() and len(digits) < 19:
        matches.append(Intent.id == int(digits))
    return matches


def _age_conditions(age: str, now: dt.datetime) -> list[ColumnElement[bool]]:
    _, youngest_seconds, oldest_seconds = SEARCH_AGES[age]
    conditions = [Intent.created_at <= now - dt.timedelta(seconds=youngest_seconds)]
    if oldest_seconds is not None:
        conditions.append(Intent.created_at > now - dt.timedelta(seconds=oldest_seconds))
    return conditions


@dataclasses.dataclass(frozen=True)
class IntentRow:
    id: int
    event: str | None
    idempotency_key: str
    recipient: str
    template: str
    status: str
    lane: str
    attempt_count: int
    created_at: dt.datetime
    next_attempt_at: dt.datetime


@dataclasses.dataclass(frozen=True)
class SearchPage:
    rows: list[IntentRow]
    next_after: str | None  # pass as `after` for the next page; None on the last page


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_CURSOR = re.compile(r"^(\d{1,20})-(\d{1,19})$")


def encode_cursor(created_at: dt.datetime, intent_id: int) -> str:
    """Return the keyset position just after this row: "<created_at in µs>-<id>"."""
    return f"{(created_at - _EPOCH) // dt.timedelta(microseconds=1)}-{intent_id}"


def decode_cursor(cursor: str) -> tuple[dt.datetime, int]:
    match = _CURSOR.match(cursor)
    if match is None:
        raise InvalidFilter(f"the page position {cursor!r} is not one this console made")
    created_at = _EPOCH + dt.timedelta(microseconds=int(match[1]))
    return created_at, int(match[2])


def search_intents(
    session: Session,
    filters: SearchFilters,
    *,
    after: str | None = None,
    limit: int = PAGE_SIZE,
    now: dt.datetime | None = None,
) -> SearchPage:
    """Return one page of matching intents, newest first, after the keyset position `after`.

    Rows are ordered by (created_at, id). Each branch of the search (see
    SearchFilters.branches) fetches one page in that order from its own index;
    the page is the newest rows of their union.
    """
    now = now or utcnow()
    dialect = _dialect(session)
    if dialect == "postgresql":  # a generic plan cannot use an index for LIKE $1
        session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
    conditions = filters.conditions(dialect, now, with_text=False)
    position = []
    if after:
        after_created_at, after_id = decode_cursor(after)
        position.append(Intent.created_at <= after_created_at)
        position.append(tuple_(Intent.created_at, Intent.id) < tuple_(after_created_at, after_id))
    found: dict[int, IntentRow] = {}
    for branch in filters.branches(dialect):
        rows = _branch_rows(session, conditions, position, branch, limit + 1)
        found.update((row.id, row) for row in rows)
    rows = sorted(found.values(), key=lambda row: (row.created_at, row.id), reverse=True)
    last = rows[limit - 1] if len(rows) > limit else None
    next_after = encode_cursor(last.created_at, last.id) if last else None
    return SearchPage(rows=rows[:limit], next_after=next_after)


def _branch_rows(
    session: Session, conditions: list, position: list, branch: Branch, limit: int
) -> list[IntentRow]:
    """The newest `limit` rows of one branch.

    A prefix may match most rows or a few: first look for a page among the
    RECENT_WINDOW newest intents (walking the created_at index); failing that,
    read every match through the prefixes' indexes and sort them (ordering by
    an unindexed created_at keeps the planner from walking created_at through
    matches clustered far in the past).
    """
    columns = [getattr(Intent, field.name) for field in dataclasses.fields(IntentRow)]
    newest = (Intent.created_at.desc(), Intent.id.desc())
    if branch.may_be_broad:
        # the row columns include every column the filters and the prefixes test
        recent = select(*columns).where(*position).order_by(*newest).limit(RECENT_WINDOW)
        window = recent.subquery()
        query = (
            select(window)
            .where(*_adapt(window, [*conditions, *branch.conditions]))
            .order_by(window.c.created_at.desc(), window.c.id.desc())
            .limit(limit)
        )
        rows = [IntentRow(*row) for row in session.execute(query)]
        if len(rows) == limit:
            return rows
        newest = (_without_index(Intent.created_at).desc(), Intent.id.desc())
    query = select(*columns).where(*conditions, *position, *branch.conditions)
    return [IntentRow(*row) for row in session.execute(query.order_by(*newest).limit(limit))]


def _adapt(subquery: Any, conditions: list) -> list:
    """Rewrite conditions on email_intent to refer to the same columns of `subquery`."""
    adapter = ClauseAdapter(subquery)
    return [adapter.traverse(condition) for condition in conditions]


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


@dataclasses.dataclass(frozen=True)
class ChartBar:
    minute: int  # 0 = the oldest minute shown, CHART_MINUTES - 1 = the current minute
    accepted: int
    failed: int


@dataclasses.dataclass(frozen=True)
class Dashboard:
    now: dt.datetime
    counts: dict[tuple[str, str], int]  # (status, lane) -> intents
    oldest_pending: dict[str, dt.datetime | None]  # lane -> created_at of the oldest
    age_buckets: dict[str, dict[str, int]]  # lane -> bucket name -> pending intents
    chart: list[ChartBar]
    last_tick_at: dt.datetime | None
    sender_rates: dict[tuple[str, str], SenderRate]  # (kind, window) -> rate

    def status_total(self, status: str) -> int:
        return sum(count for (s, _), count in self.counts.items() if s == status)

    def lane_total(self, lane: str) -> int:
        return sum(count for (_, la), count in self.counts.items() if la == lane)

    @property
    def ambiguous(self) -> int:
        return self.status_total(AMBIGUOUS)

    @property
    def dead(self) -> int:
        return self.status_total(DEAD)

    def oldest_pending_seconds(self, lane: str) -> float | None:
        oldest = self.oldest_pending.get(lane)
        return None if oldest is None else max(0.0, (self.now - oldest).total_seconds())


def dashboard(session: Session, now: dt.datetime | None = None) -> Dashboard:
    """Gather every figure of the dashboard in a handful of indexed queries."""
    now = now or utcnow()
    return Dashboard(
        now=now,
        counts=_status_lane_counts(session, now),
        oldest_pending={lane: _oldest_pending(session, lane) for lane in LANES},
        age_buckets={lane: _pending_age_buckets(session, lane, now) for lane in LANES},
        chart=_attempt_chart(session, now),
        last_tick_at=session.execute(select(func.max(WorkerHeartbeat.last_tick_at))).scalar(),
        sender_rates=sender_rates(session, now),
    )


def _status_lane_counts(session: Session, now: dt.datetime) -> dict[tuple[str, str], int]:
    """Count intents per status and lane, each an index range count.

    Submitted intents pile up without end, so they are counted over the last
    SUBMITTED_WINDOW_HOURS (by creation); every other status is counted in full.
    """
    others = [status for status in STATUSES if status != SUBMITTED]
    query = (
        select(Intent.status, Intent.lane, func.count())
        .where(Intent.status.in_(others))
        .group_by(Intent.status, Intent.lane)
    )
    counts = {(status, lane): count for status, lane, count in session.execute(query)}
    since = now - dt.timedelta(hours=SUBMITTED_WINDOW_HOURS)
    for lane in LANES:
        recent = select(func.count()).where(
            Intent.status == SUBMITTED, Intent.lane == lane, Intent.created_at >= since
        )
        counts[(SUBMITTED, lane)] = session.execute(recent).scalar_one()
    return {key: count for key, count in counts.items() if count}


def _oldest_pending(session: Session, lane: str) -> dt.datetime | None:
    query = select(func.min(Intent.created_at)).where(Intent.status == PENDING, Intent.lane == lane)
    return session.execute(query).scalar()


def _pending_age_buckets(session: Session, lane: str, now: dt.datetime) -> dict[str, int]:
    """Count pending intents of `lane` per age bucket, one indexed range count each."""
    buckets = {}
    for name in AGE_BUCKETS:
        query = select(func.count()).where(
            Intent.status == PENDING, Intent.lane == lane, *_age_conditions(name, now)
        )
        buckets[name] = session.execute(query).scalar_one()
    return buckets


def _minute_expression(dialect: str, since: dt.datetime) -> ColumnElement[int]:
    """Whole minutes between `since` and an attempt's start, computed by the database."""
    since_epoch = int(since.timestamp())
    if dialect == "postgresql":
        seconds = func.extract("epoch", Attempt.started_at) - since_epoch
        return func.floor(seconds / 60).cast(Attempt.attempt_number.type)
    epoch = func.cast(func.strftime("%s", Attempt.started_at), Attempt.attempt_number.type)
    return (epoch - literal(since_epoch)) // 60


def _attempt_chart(session: Session, now: dt.datetime) -> list[ChartBar]:
    """Attempts started per clock minute over the last hour (the last bar is this minute)."""
    since = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=CHART_MINUTES - 1)
    minute = _minute_expression(_dialect(session), since).label("minute")
    failed = case((Attempt.outcome.in_(FAILED_OUTCOMES), 1), else_=0)
    accepted = case((Attempt.outcome == "accepted", 1), else_=0)
    query = (
        select(minute, func.sum(accepted), func.sum(failed))
        .where(Attempt.started_at >= since)
        .group_by(minute)
    )
    per_minute = {int(m): (int(a or 0), int(f or 0)) for m, a, f in session.execute(query)}
    return [ChartBar(m, *per_minute.get(m, (0, 0))) for m in range(CHART_MINUTES)]


@dataclasses.dataclass(frozen=True)
class TimelineEntry:
    at: dt.datetime
    kind: str  # created | attempt | provider_event | suppression | operator
    title: str
    facts: list[tuple[str, Any]]  # label -> value, only the present ones
    actor: str | None = None
    event_id: int | None = None  # a provider event's own page


@dataclasses.dataclass(frozen=True)
class IntentDetail:
    intent: Intent
    timeline: list[TimelineEntry]
    suppression: Suppression | None
    attempt_count: int


def intent_detail(session: Session, intent_id: int) -> IntentDetail | None:
    """Return the intent and its whole story in time order, or None when unknown."""
    intent = session.get(Intent, intent_id)
    if intent is None:
        return None
    suppression = session.execute(
        select(Suppression).where(Suppression.recipient == intent.recipient.lower())
    ).scalar_one_or_none()
    attempts = session.execute(
        select(Attempt).where(Attempt.intent_id == intent_id).order_by(Attempt.id)
    ).scalars()
    events = session.execute(
        select(ProviderEvent).where(ProviderEvent.intent_id == intent_id)
    ).scalars()
    actions = session.execute(
        select(AuditEntry).where(AuditEntry.intent_id == intent_id).order_by(AuditEntry.id)
    ).scalars()
    timeline = [_created_entry(intent)]
    attempt_entries = [_attempt_entry(attempt) for attempt in attempts]
    timeline += attempt_entries
    timeline += [_provider_event_entry(event) for event in events]
    timeline += [_operator_entry(entry) for entry in actions]
    timeline += _suppression_entries(intent, suppression)
    timeline.sort(key=lambda entry: entry.at)
    return IntentDetail(intent, timeline, suppression, len(attempt_entries))


def _facts(*pairs: tuple[str, Any]) -> list[tuple[str, Any]]:
    return [(label, value) for label, value in pairs if value not in (None, "")]


def _created_entry(intent: Intent) -> TimelineEntry:
    title = f"Business event {intent.event}" if intent.event else "Enqueued"
    facts = _facts(
        ("key", intent.idempotency_key),
        ("template", f"{intent.template}@{intent.template_version}"),
        ("lane", intent.lane),
        ("purpose", intent.purpose),
        ("expires", intent.expires_at),
    )
    return TimelineEntry(intent.created_at, "created", title, facts)


def _attempt_entry(attempt: Attempt) -> TimelineEntry:
    outcome = attempt.outcome or f"in progress ({attempt.stage})"
    facts = _facts(
        ("code", attempt.reply_code),
        ("enhanced status", attempt.enhanced_status),
        ("reply", attempt.reply_text),
        ("error", attempt.error),
        ("provider id", attempt.provider_message_id),
        ("stage reached", attempt.stage),
        ("duration", f"{attempt.duration_ms} ms" if attempt.duration_ms is not None else None),
        ("worker", attempt.worker_id),
    )
    title = f"Attempt {attempt.attempt_number}: {outcome}"
    return TimelineEntry(attempt.started_at, "attempt", title, facts, actor=attempt.worker_id)


def _provider_event_entry(event: ProviderEvent) -> TimelineEntry:
    kind = f"{event.event_type} ({event.bounce_type})" if event.bounce_type else event.event_type
    facts = _facts(
        ("source", event.source),
        ("recipient", event.recipient),
        ("diagnostic", event.diagnostic),
        ("provider id", event.provider_message_id),
        ("received", event.received_at),
    )
    at = event.occurred_at or event.received_at
    title = f"Provider: {kind}"
    return TimelineEntry(at, "provider_event", title, facts, actor=event.source, event_id=event.id)


def _operator_entry(entry: AuditEntry) -> TimelineEntry:
    change = (
        f"{entry.before_status} → {entry.after_status}"
        if entry.before_status != entry.after_status
        else None
    )
    details = entry.details or {}
    facts = _facts(
        ("status", change),
        ("reason", entry.reason),
        *((str(key).replace("_", " "), value) for key, value in sorted(details.items())),
    )
    title = f"Operator: {entry.action.replace('_', ' ')}"
    return TimelineEntry(entry.created_at, "operator", title, facts, actor=entry.actor)


def _suppression_entries(intent: Intent, suppression: Suppression | None) -> list[TimelineEntry]:
    entries = []
    if suppression is not None:
        facts = _facts(("reason", suppression.reason), ("note", suppression.note))
        entries.append(
            TimelineEntry(
                suppression.created_at,
                "suppression",
                f"Recipient {suppression.recipient} suppressed",
                facts,
                actor=suppression.created_by,
            )
        )
    if intent.status == "suppressed":
        at = intent.updated_at or intent.created_at
        facts = _facts(("reason", intent.status_reason))
        entries.append(TimelineEntry(at, "suppression", "Held back: suppressed", facts))
    return entries


@dataclasses.dataclass(frozen=True)
class AuditPage:
    entries: list[AuditEntry]
    next_before: int | None


def audit_page(session: Session, *, before: int | None = None, limit: int = PAGE_SIZE) -> AuditPage:
    """Return audit entries newest first, keyset-paginated by id."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit + 1)
    if before is not None:
        query = query.where(AuditEntry.id < before)
    entries = list(session.execute(query).scalars())
    next_before = entries[limit - 1].id if len(entries) > limit else None
    return AuditPage(entries[:limit], next_before)


@dataclasses.dataclass(frozen=True)
class SuppressionPage:
    entries: list[Suppression]
    next_before: int | None


def suppression_page(
    session: Session, *, q: str = "", before: int | None = None, limit: int = PAGE_SIZE
) -> SuppressionPage:
    """Return suppressions newest first, optionally those whose address starts with `q`."""
    query = select(Suppression).order_by(Suppression.id.desc()).limit(limit + 1)
    if q:
        query = query.where(_prefix_match(Suppression.recipient, q.lower(), _dialect(session)))
    if before is not None:
        query = query.where(Suppression.id < before)
    entries = list(session.execute(query).scalars())
    next_before = entries[limit - 1].id if len(entries) > limit else None
    return SuppressionPage(entries[:limit], next_before)


def held_back_count(session: Session, recipient: str) -> int:
    """Count the intents for `recipient` that the suppression held back."""
    query = select(func.count()).where(
        Intent.status == "suppressed", func.lower(Intent.recipient) == recipient.lower()
    )
    return session.execute(query).scalar_one()
