"""What a search asks for: the search box, the status, lane, template and age filters."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping

from sqlalchemy import ColumnElement, or_

from console.core.whole_numbers import whole_number
from console.models import Intent
from console.store.sql import prefix_match
from console.vocabulary import LANES, STATUSES

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
            conditions.extend(age_conditions(self.age, now))
        return conditions


PREFIX_COLUMNS = (Intent.event, Intent.idempotency_key)


def _text_matches(q: str, dialect: str) -> list[ColumnElement[bool]]:
    """The one search box: event or key prefix, recipient, Message-ID, provider id, #id."""
    prefixes = [prefix_match(column, q, dialect) for column in PREFIX_COLUMNS]
    return prefixes + exact_matches(q)


def exact_matches(q: str) -> list[ColumnElement[bool]]:
    """The lookups of the search box that must match whole: recipient, Message-ID, ids."""
    matches = [Intent.provider_message_id == q]
    if "@" in q:
        local, _, domain = q.rpartition("@")
        bare = q.strip("<>")
        matches.append(Intent.recipient.in_({q, q.lower(), f"{local}@{domain.lower()}"}))
        matches.append(Intent.message_id.in_({q, f"<{bare}>"}))
    intent_id = whole_number(q.removeprefix("#"))
    if intent_id is not None:
        matches.append(Intent.id == intent_id)
    return matches


def age_conditions(age: str, now: dt.datetime) -> list[ColumnElement[bool]]:
    """Conditions on created_at for an age bucket of SEARCH_AGES."""
    _, youngest_seconds, oldest_seconds = SEARCH_AGES[age]
    conditions = [Intent.created_at <= now - dt.timedelta(seconds=youngest_seconds)]
    if oldest_seconds is not None:
        conditions.append(Intent.created_at > now - dt.timedelta(seconds=oldest_seconds))
    return conditions
