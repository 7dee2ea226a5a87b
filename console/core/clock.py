"""The time every layer reads: aware, in UTC."""

from __future__ import annotations

import datetime as dt


def utcnow() -> dt.datetime:
    """Return the current time, timezone-aware, in UTC."""
    return dt.datetime.now(dt.UTC)
