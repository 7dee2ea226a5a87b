"""The keys of signed webhook requests already recorded, shared by every process.

A provider's signature carries a time, and a request older than the provider's window is refused
by its verifier. Within the window, the key of each request (Mailgun's token, Svix's id and time,
SendGrid's time and body digest) is inserted in the same transaction as the request's events: a
key already there is a replay, whichever process or restart it reaches, and whatever body it
carries. A request refused or rolled back leaves no key, so the provider's retry of it is
accepted. Only a digest of the key is stored; each row is kept until its ``expires_at`` and then
deleted by the retention job.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable

from sqlalchemy import delete, select, tuple_
from sqlalchemy.orm import Session

from console.state_tables import WebhookReplayKey


def replay_key_digest(key: str) -> str:
    """The stored form of a request's key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def claim_replay_key(
    session: Session, *, source: str, key: str, now: dt.datetime, keep_seconds: float
) -> bool:
    """Insert the request's key in the caller's transaction; False when it was recorded before.

    Never commits. Two requests with one key in flight at once: the second waits for the
    first's transaction, and is a replay once it commits.
    """
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    statement = (
        insert(WebhookReplayKey)
        .values(
            source=source,
            key_digest=replay_key_digest(key),
            expires_at=now + dt.timedelta(seconds=keep_seconds),
        )
        .on_conflict_do_nothing(index_elements=["source", "key_digest"])
        .returning(WebhookReplayKey.source)
    )
    return session.execute(statement).scalar_one_or_none() is not None


def delete_expired_replay_keys(
    session_factory: Callable[[], Session], now: dt.datetime, batch_size: int
) -> int:
    """Delete up to `batch_size` keys whose time is over; commits. Return how many."""
    with session_factory() as session, session.begin():
        expired = (
            select(WebhookReplayKey.source, WebhookReplayKey.key_digest)
            .where(WebhookReplayKey.expires_at < now)
            .order_by(WebhookReplayKey.expires_at)
            .limit(batch_size)
        )
        keys = tuple_(WebhookReplayKey.source, WebhookReplayKey.key_digest)
        deleted = session.execute(
            delete(WebhookReplayKey).where(keys.in_(expired.subquery().select())),
            execution_options={"synchronize_session": False},
        )
        return deleted.rowcount
