"""The tables of the product's own running state: worker heartbeats, alerts, lane breakers,
domain deferrals, operators' holds, failed logins, the send budget, the keys of signed
webhook requests already recorded and the drills' summaries. Not part of the application's
contract: only the worker, the console, its jobs and ``console drill`` read and write them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Boolean, CheckConstraint, Float, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from console.model_columns import Base, UTCDateTime, check_in
from console.vocabulary import BREAKER_STATES, CLOSED


class WorkerHeartbeat(Base):
    """The last tick of each worker, so any process can tell whether workers run."""

    __tablename__ = "worker_heartbeat"

    worker_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    host: Mapped[str | None] = mapped_column(String(255))
    pid: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    last_tick_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    version: Mapped[str | None] = mapped_column(String(64))  # the product version it runs
    stopped_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)  # None: runs or crashed


class AlertState(Base):
    """One alert condition: whether it fires, since when, and whether targets were told."""

    __tablename__ = "alert_state"

    condition: Mapped[str] = mapped_column(String(100), primary_key=True)
    active: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    summary: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    fired_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    cleared_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    webhook_due: Mapped[str | None] = mapped_column(String(20))  # "firing" | "resolved"
    webhook_claimed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    webhook_sent_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)


class DomainDeferral(Base):
    """A recipient domain that asked us to slow down: nothing is sent to it until the end time."""

    __tablename__ = "domain_deferral"

    domain: Mapped[str] = mapped_column(String(255), primary_key=True)  # lower-cased
    deferred_until: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    reply_code: Mapped[int | None] = mapped_column(Integer)  # the reply that completed the run
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


HOLD_LANE, HOLD_TEMPLATE, HOLD_DOMAIN = "lane", "template", "domain"
HOLD_KINDS = (HOLD_LANE, HOLD_TEMPLATE, HOLD_DOMAIN)


class IntentHold(Base):
    """An operator's hold on a lane, a template (one version or all) or a recipient domain:
    its pending intents are not claimed while it is set (not released, `until` not passed)."""

    __tablename__ = "intent_hold"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(20))
    value: Mapped[str] = mapped_column(String(255))  # lane, template name, lower-cased domain
    template_version: Mapped[int | None] = mapped_column(Integer)  # None: every version
    reason: Mapped[str] = mapped_column(Text)
    held_by: Mapped[str] = mapped_column(String(100))
    held_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    released_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    released_by: Mapped[str | None] = mapped_column(String(100))

    __table_args__ = (CheckConstraint(check_in("kind", HOLD_KINDS), name="kind"),)


class LaneBreaker(Base):
    """The circuit breaker of one lane, shared by every worker process."""

    __tablename__ = "lane_breaker"

    lane: Mapped[str] = mapped_column(String(20), primary_key=True)
    state: Mapped[str] = mapped_column(String(20), server_default=CLOSED)
    trips: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    failure_rate: Mapped[float | None] = mapped_column(Float)
    opened_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    resume_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    probe_owner: Mapped[str | None] = mapped_column(String(100))
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (CheckConstraint(check_in("state", BREAKER_STATES), name="state"),)


class LoginFailureCount(Base):
    """Failed logins of one (username, client address) pair, or of one address (username "")."""

    __tablename__ = "login_failure_count"

    username: Mapped[str] = mapped_column(String(100), primary_key=True)  # normalised; "": all
    address: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer)
    first_failure_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)  # of the current count
    last_failure_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, index=True)
    retry_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)  # no login tried before


class SendBudget(Base):
    """The token bucket of the send rate shared by every worker (console.core.token_bucket).

    Times are seconds since the epoch; `taken` holds what the last claim got.
    """

    __tablename__ = "send_budget"

    name: Mapped[str] = mapped_column(String(20), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    refilled_at: Mapped[float] = mapped_column(Float)
    factor: Mapped[float] = mapped_column(Float, server_default=text("1"))
    slowed_at: Mapped[float] = mapped_column(Float, server_default=text("0"))
    taken: Mapped[int] = mapped_column(Integer, server_default=text("0"))


class SendCount(Base):
    """Messages claimed for sending in one hour (its start, seconds since the epoch)."""

    __tablename__ = "send_count"

    hour_start: Mapped[int] = mapped_column(Integer, primary_key=True)
    sent: Mapped[int] = mapped_column(Integer)


class WebhookReplayKey(Base):
    """One signed request recorded: its provider, the digest of its key, and until when."""

    __tablename__ = "webhook_replay_key"

    source: Mapped[str] = mapped_column(String(20), primary_key=True)
    key_digest: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256, hex
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, index=True)


class DrillRun(Base):
    """One run of ``console drill --record``: when, which version and configuration, and
    each drill's result (drill, template, expected, observed, passed, seconds)."""

    __tablename__ = "drill_run"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ran_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, index=True)
    version: Mapped[str] = mapped_column(String(64))
    configuration: Mapped[str] = mapped_column(String(64))  # digest of the settings drilled
    database: Mapped[str] = mapped_column(String(255))  # where it ran: "scratch SQLite" or a URL
    held: Mapped[int] = mapped_column(Integer)
    total: Mapped[int] = mapped_column(Integer)
    results: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
