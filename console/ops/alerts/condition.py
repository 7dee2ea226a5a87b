"""A condition an operator must act on: what every alert check returns."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from console.config import Settings


@dataclasses.dataclass(frozen=True)
class Condition:
    """A condition that holds now: its key, one line for humans, and opaque details."""

    key: str
    summary: str
    details: dict[str, Any]


# an alert check: the conditions that hold at `now`
Check = Callable[[Session, Settings, dt.datetime], list[Condition]]
