"""Read whether an address is on the suppression list, as itself or as its keyed hash.

An erasure (``console forget``) keeps a suppressed address only as its keyed hash
(``console.core.address_hash``), so every check compares both forms. The key is
this process's secret key, set once at start-up with ``use_address_key`` (the
console does so in ``console.outbox.configure``). Without a key only the address
itself is compared: an application that enqueues without CONSOLE_SECRET_KEY
leaves the hashed form to the worker's checks before each send.
"""

from __future__ import annotations

import functools

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from console.core.address_hash import address_hash
from console.models import Suppression

_address_key = ""


def use_address_key(secret_key: str | None) -> None:
    """Compare suppressions with keyed hashes under `secret_key` from now on ('' or None: not)."""
    global _address_key
    _address_key = secret_key or ""


def recipient_forms(recipient: str) -> list[str]:
    """The forms of `recipient` the suppression list may hold: lower-cased, then its hash."""
    lowered = recipient.lower()
    if not _address_key:
        return [lowered]
    return [lowered, _hash_of(_address_key, lowered)]


@functools.lru_cache(maxsize=4096)  # the claim and the mark before the body ask for the same
def _hash_of(key: str, lowered: str) -> str:
    return address_hash(key, lowered)


def is_suppressed(session: Session, recipient: str) -> bool:
    """Return whether `recipient` is on the suppression list."""
    forms = recipient_forms(recipient)
    query = select(Suppression.id).where(Suppression.recipient.in_(forms)).limit(1)
    return session.execute(query).first() is not None


def is_suppressed_now(connection: Connection, recipient: str) -> bool:
    """Return whether `recipient` is on the list as of now: one indexed lookup.

    Ends its read at once, so a suppression committed later is seen by the next call
    (on SQLite an open read would keep seeing the old snapshot).
    """
    forms = recipient_forms(recipient)
    query = select(Suppression.id).where(Suppression.recipient.in_(forms)).limit(1)
    found = connection.execute(query).first() is not None
    connection.commit()
    return found
