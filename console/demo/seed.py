"""The demo's own rows beside its mail: written once, however often the demo starts.

A database the demo takes as its own carries its mark, a one-row table of its
own (``console_demo``); the demo writes only into a database it made, one that
bears that mark, or one that holds none of an application's rows yet.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Column, Connection, MetaData, Table, insert, inspect, select
from sqlalchemy.orm import Session

from console.model_columns import UTCDateTime
from console.models import AuditEntry, Intent, OperatorUser, ProviderEvent, Suppression

DEMO_MARK = Table("console_demo", MetaData(), Column("made_at", UTCDateTime, nullable=False))
# an application's accounts and mail: a database holding any of these is not the demo's
APPLICATION_ROWS = (Intent, OperatorUser, Suppression, ProviderEvent, AuditEntry)


def suppress_once(
    session: Session, recipient: str, *, reason: str, note: str, now: dt.datetime
) -> None:
    """Put `recipient` on the suppression list unless it is there already (no commit)."""
    query = select(Suppression.id).where(Suppression.recipient == recipient)
    if session.execute(query).first() is not None:
        return
    session.add(Suppression(recipient=recipient, reason=reason, note=note, created_at=now))
    session.flush()


def bears_demo_mark(connection: Connection) -> bool:
    """Whether the demo took this database as its own before."""
    return inspect(connection).has_table(DEMO_MARK.name)


def holds_application_rows(connection: Connection) -> bool:
    """Whether any account, intent, suppression, provider event or audit entry is stored."""
    tables = set(inspect(connection).get_table_names())
    return any(
        connection.execute(select(model.id).limit(1)).first() is not None
        for model in APPLICATION_ROWS
        if model.__tablename__ in tables
    )


def mark_as_demo(session: Session, now: dt.datetime) -> None:
    """Mark the session's database as the demo's own, once (no commit)."""
    DEMO_MARK.create(session.connection(), checkfirst=True)
    if session.execute(select(DEMO_MARK.c.made_at).limit(1)).first() is None:
        session.execute(insert(DEMO_MARK).values(made_at=now))
