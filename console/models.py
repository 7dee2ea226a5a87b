"""The tables of the product and their vocabularies.

Models are plain SQLAlchemy declarative classes, so application code can use
them with a plain ``Session`` and no Flask app context.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from console.core.clock import utcnow  # noqa: F401 - every layer above reads the time here
from console.events import SET_UP_EVENTS
from console.model_columns import ID, Base, UTCDateTime, check_in, partial_index
from console.vocabulary import BULK, LANES, PENDING, ROLES, STATUSES


class Intent(Base):
    """One logical email, created in the business transaction."""

    __tablename__ = "email_intent"

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    idempotency_key: Mapped[str] = mapped_column(String(255), unique=True)
    message_id: Mapped[str] = mapped_column(String(255), unique=True)
    event: Mapped[str | None] = mapped_column(String(255))
    recipient: Mapped[str] = mapped_column(String(320))
    template: Mapped[str] = mapped_column(String(100))
    template_version: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    params: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20), server_default=PENDING)
    status_reason: Mapped[str | None] = mapped_column(Text)
    lane: Mapped[str] = mapped_column(String(20), server_default=BULK)
    purpose: Mapped[str | None] = mapped_column(String(100))
    locale: Mapped[str | None] = mapped_column(String(35))
    recipient_account: Mapped[str | None] = mapped_column(String(255))  # e.g. "reviewer:29"
    attempt_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # a requeue of a capped intent: the worker may retry until attempt_count reaches this
    attempts_granted: Mapped[int | None] = mapped_column(Integer)
    next_attempt_at: Mapped[dt.datetime] = mapped_column(
        UTCDateTime, server_default=func.current_timestamp()
    )
    created_at: Mapped[dt.datetime] = mapped_column(
        UTCDateTime, server_default=func.current_timestamp()
    )
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    lease_token: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    submitted_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    provider_message_id: Mapped[str | None] = mapped_column(String(255))
    delivered_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    bounced_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    bounce_type: Mapped[str | None] = mapped_column(String(20))
    bounce_diagnostic: Mapped[str | None] = mapped_column(Text)
    complained_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    delayed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)  # first delay reported
    delay_reason: Mapped[str | None] = mapped_column(Text)
    # the provider will never send it (SES Reject, Rendering Failure, account suppression...)
    rejected_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    reject_reason: Mapped[str | None] = mapped_column(Text)  # kept by retention
    params_scrubbed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (
        CheckConstraint(check_in("status", STATUSES), name="status"),
        CheckConstraint(check_in("lane", LANES), name="lane"),
        Index("ix_email_intent_claim", "status", "lane", "next_attempt_at"),
        Index("ix_email_intent_status_lane_created", "status", "lane", "created_at"),
        Index("ix_email_intent_lease", "status", "lease_expires_at"),
        Index("ix_email_intent_created_at", "created_at"),
        Index(
            "ix_email_intent_event", "event", "id", postgresql_ops={"event": "varchar_pattern_ops"}
        ),
        Index(
            "ix_email_intent_key_prefix",
            "idempotency_key",
            postgresql_ops={"idempotency_key": "varchar_pattern_ops"},
        ),
        Index("ix_email_intent_recipient", "recipient"),
        Index("ix_email_intent_provider_message_id", "provider_message_id"),
        Index("ix_email_intent_template_created", "template", "created_at"),
        Index("ix_email_intent_submitted_at", "submitted_at"),
    )

    def __repr__(self) -> str:
        return f"<Intent {self.id} {self.idempotency_key!r} {self.status}>"


class Attempt(Base):
    """One try of a worker to hand an intent to the transport."""

    __tablename__ = "email_attempt"

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    intent_id: Mapped[int] = mapped_column(ForeignKey("email_intent.id", ondelete="CASCADE"))
    attempt_number: Mapped[int] = mapped_column(Integer)
    lease_token: Mapped[str] = mapped_column(String(64))
    worker_id: Mapped[str | None] = mapped_column(String(100))
    # claimed -> connecting -> envelope -> data_sent -> reply_read
    stage: Mapped[str] = mapped_column(String(20), server_default="claimed")
    started_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    outcome: Mapped[str | None] = mapped_column(String(20))
    reply_code: Mapped[int | None] = mapped_column(Integer)
    enhanced_status: Mapped[str | None] = mapped_column(String(20))
    reply_text: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    provider_message_id: Mapped[str | None] = mapped_column(String(255))
    duration_ms: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        Index("ix_email_attempt_intent_id", "intent_id"),
        Index("ix_email_attempt_provider_message_id", "provider_message_id"),
        Index("ix_email_attempt_started_at", "started_at"),
    )


class ProviderEvent(Base):
    """A fact reported by the provider after acceptance, stored as received."""

    __tablename__ = "provider_event"

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(50))
    source_event_id: Mapped[str] = mapped_column(String(255))
    event_type: Mapped[str] = mapped_column(String(30))
    bounce_type: Mapped[str | None] = mapped_column(String(20))
    subtype: Mapped[str | None] = mapped_column(String(50))  # bounce subtype, feedback type...
    recipient: Mapped[str | None] = mapped_column(String(320))
    diagnostic: Mapped[str | None] = mapped_column(Text)
    provider_message_id: Mapped[str | None] = mapped_column(String(255))
    message_id: Mapped[str | None] = mapped_column(String(255))
    intent_id: Mapped[int | None] = mapped_column(
        ForeignKey("email_intent.id", ondelete="SET NULL")
    )
    attempt_id: Mapped[int | None] = mapped_column(
        ForeignKey("email_attempt.id", ondelete="SET NULL")
    )
    occurred_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    received_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    matched_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    unmatched_reason: Mapped[str | None] = mapped_column(Text)  # why it waits; NULL once matched
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    __table_args__ = (
        UniqueConstraint("source", "source_event_id", name="uq_provider_event_source_event"),
        Index("ix_provider_event_provider_message_id", "provider_message_id"),
        Index("ix_provider_event_message_id", "message_id"),
        Index("ix_provider_event_intent_id", "intent_id"),
        Index("ix_provider_event_unmatched", "matched_at", "received_at"),
        Index("ix_provider_event_received_at", "received_at"),
    )


class Suppression(Base):
    """An address that must not receive mail."""

    __tablename__ = "suppression"

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    recipient: Mapped[str] = mapped_column(String(320), unique=True)  # lower-cased
    reason: Mapped[str] = mapped_column(String(30))  # bounce | complaint | manual
    note: Mapped[str | None] = mapped_column(Text)
    source_event_id: Mapped[int | None] = mapped_column(
        ForeignKey("provider_event.id", ondelete="SET NULL")
    )
    # the attempt a relay refused as "mailbox unknown", for suppressions made at send time
    source_attempt_id: Mapped[int | None] = mapped_column(
        ForeignKey("email_attempt.id", ondelete="SET NULL")
    )
    created_by: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class OperatorUser(Base):
    """A person who logs in to the console."""

    __tablename__ = "operator_user"

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(100), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(20))
    active: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    last_login_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # kept in each login session; raised to end every session of the user (logout, new password)
    session_generation: Mapped[int] = mapped_column(Integer, server_default=text("0"))

    __table_args__ = (CheckConstraint(check_in("role", ROLES), name="role"),)

    # Flask-Login protocol
    @property
    def is_active(self) -> bool:
        return bool(self.active)

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def is_anonymous(self) -> bool:
        return False

    def get_id(self) -> str:
        return str(self.id)


class AuditEntry(Base):
    """One operator action: who, what, when, before and after."""

    __tablename__ = "audit_entry"

    id: Mapped[int] = mapped_column(ID, primary_key=True, autoincrement=True)
    actor: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(50))
    intent_id: Mapped[int | None] = mapped_column(
        ForeignKey("email_intent.id", ondelete="SET NULL")
    )
    target: Mapped[str | None] = mapped_column(String(320))
    reason: Mapped[str | None] = mapped_column(Text)
    before_status: Mapped[str | None] = mapped_column(String(20))
    after_status: Mapped[str | None] = mapped_column(String(20))
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index("ix_audit_entry_intent_id", "intent_id"),
        Index("ix_audit_entry_created_at", "created_at"),
    )


# Unscrubbed and untrimmed rows only, so retention finds its next batch at once.
partial_index(
    "ix_email_intent_unscrubbed", Intent.created_at, where=Intent.params_scrubbed_at.is_(None)
)
partial_index(
    "ix_provider_event_untrimmed",
    ProviderEvent.received_at,
    where=ProviderEvent.payload.is_not(None),
)
# Reports about an endpoint's set-up only (events.SET_UP_EVENTS), for their alerts.
partial_index(
    "ix_provider_event_set_up",
    ProviderEvent.event_type,
    ProviderEvent.received_at,
    where=ProviderEvent.event_type.in_(SET_UP_EVENTS),
)
# Pending retries only, for the claim: they go before first attempts (store.claims).
partial_index(
    "ix_email_intent_retry_due",
    Intent.lane,
    Intent.next_attempt_at,
    where=text("status = 'pending' AND attempt_count > 0"),
)
# Bounced and complained intents only, for the dashboard's sender rates.
partial_index(
    "ix_email_intent_bounced",
    Intent.bounced_at,
    Intent.bounce_type,
    where=Intent.bounced_at.is_not(None),
)
partial_index(
    "ix_email_intent_complained", Intent.complained_at, where=Intent.complained_at.is_not(None)
)


# The worker's and operations' own state (heartbeats, alerts, breakers, deferrals) and the
# webhooks' used request keys live in console.state_tables; importing it here registers
# those tables on Base.metadata.
from console import state_tables  # noqa: E402, F401
