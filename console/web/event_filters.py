"""The event feed's filter form: read from query arguments, written back into links."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from console.events import (
    ACCEPTED,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    DELIVERED,
    MAX_EVENT_TYPE_LENGTH,
    NOT_SPAM,
    REJECTED,
    SET_UP_EVENTS,
)
from console.store.event_feed import MATCH_STATES, FeedFilters

EVENT_TYPES = (
    DELIVERED,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    ACCEPTED,
    REJECTED,
    NOT_SPAM,
    *SET_UP_EVENTS,
)
EVENT_SOURCES = ("ses", "webhook", "resend", "postmark", "mailgun", "sendgrid")
_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")


class InvalidEventFilter(ValueError):
    """An event filter has a value the console does not accept; the message names it."""


@dataclasses.dataclass(frozen=True)
class EventFilters(FeedFilters):
    """What the feed's filter form asks for."""

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> EventFilters:
        """Read filters from query arguments; InvalidEventFilter on a value that cannot be."""
        values = {name: (args.get(name) or "").strip() or None for name in ("type", "source")}
        for name, longest in (("type", MAX_EVENT_TYPE_LENGTH), ("source", 50)):
            value = values[name]
            if value and (len(value) > longest or not _NAME.match(value)):
                raise InvalidEventFilter(f"unknown event {name} {value[:40]!r}")
        match = (args.get("match") or "").strip() or None
        if match and match not in MATCH_STATES:
            raise InvalidEventFilter(f"unknown match state {match[:40]!r}")
        recipient = (args.get("recipient") or "").strip()[:320] or None
        return cls(recipient=recipient, match=match, **values)

    def as_args(self) -> dict[str, str]:
        """Return the non-empty filters as query arguments (for links)."""
        return {name: value for name, value in dataclasses.asdict(self).items() if value}
