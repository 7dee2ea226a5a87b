"""Holds in /metrics and in the alert job.

* ``console_held_intents{kind, held}`` — the pending intents waiting behind each hold
  in force (``kind``: lane, template or domain; ``held``: its name, ``name@N`` for one
  version of a template);
* ``hold_set:<id>:<days>`` — an alert condition while a hold has been set for a day or
  more: its key changes each day, so the targets are reminded once a day until released.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from console.config import Settings
from console.models import utcnow
from console.ops.alerts.condition import Condition
from console.store import holds

log = logging.getLogger(__name__)

HOLD_SET = "hold_set"
REMIND_EVERY = dt.timedelta(days=1)


def _held_name(selector: holds.Selector) -> str:
    return selector.spec


class HoldCollector(Collector):
    """The intents waiting behind each hold in force, read from the database at each scrape."""

    def __init__(
        self, session_factory: Callable[[], Session], clock: Callable[[], dt.datetime] = utcnow
    ) -> None:
        self._session_factory = session_factory
        self._clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        held = GaugeMetricFamily(
            "console_held_intents",
            "Pending intents waiting behind each hold in force.",
            labels=["kind", "held"],
        )
        try:
            with self._session_factory() as session:
                lines = holds.holds_in_force(session, self._clock())
        except SQLAlchemyError:
            log.warning("holds not readable for /metrics", exc_info=True)
            return
        for line in lines:
            held.add_metric([line.selector.kind, _held_name(line.selector)], line.waiting)
        yield held


def register_collector(registry, session_factory: Callable[[], Session]):
    """Add the holds' gauge to `registry`; return the registry."""
    registry.register(HoldCollector(session_factory))
    return registry


def hold_reminders(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    """One condition per hold set for a day or more, keyed by its age in whole days."""
    found = []
    for line in holds.holds_in_force(session, now):
        hold = line.hold
        days = (now - hold.held_at) // REMIND_EVERY
        if days < 1:
            continue
        summary = (
            f"{line.selector.notation()} has been held for {days} day(s), since "
            f"{hold.held_at:%Y-%m-%d %H:%M} UTC by {hold.held_by} ({hold.reason}): "
            f"{line.waiting} intent(s) waiting"
        )
        details = {"hold_id": hold.id, "held": line.selector.notation(), "days": days,
                   "waiting": line.waiting}  # fmt: skip
        found.append(Condition(f"{HOLD_SET}:{hold.id}:{days}", summary, details))
    return found
