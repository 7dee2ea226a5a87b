"""Operators' holds: a lane, a template (every version or ``name@N``) or a recipient domain
whose pending intents the claim skips until the hold is released or its ``until`` passes.

Held intents keep their place: nothing about them changes while they wait, so on
release they go out in their original order. A release expires those that stopped
being useful while held, naming the hold in their reason. The functions never
commit; the caller does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping

from sqlalchemy import and_, bindparam, exists, func, literal, or_, select, update
from sqlalchemy.orm import Session

from console.core.lifecycle import IntentFacts, TemplateRules, useful_until
from console.models import Intent
from console.state_tables import (
    HOLD_DOMAIN,
    HOLD_KINDS,
    HOLD_LANE,
    HOLD_TEMPLATE,
    IntentHold,
)
from console.store.actions import ActionRefused, StaleAction, required_reason
from console.store.audit import audit_values, write_audit
from console.store.intents import wake_workers
from console.vocabulary import EXPIRED, LANES, PENDING

HOLD = IntentHold.__table__.c
INTENT = Intent.__table__.c
_TEMPLATE_SPEC = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]{0,99})(?:@(?P<version>[1-9]\d{0,5}))?$")
_DOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?(?:\.[a-z0-9-]{1,63})+$")


class UnknownTarget(ActionRefused):
    """The selector names no lane, template or domain the console knows."""


@dataclasses.dataclass(frozen=True)
class Selector:
    """What one hold stops: a lane, a template (version None: every version) or a domain."""

    kind: str
    value: str
    version: int | None = None

    @classmethod
    def parse(cls, kind: str, text: str) -> Selector:
        """Read ``lane NAME``, ``template NAME[@N]`` or ``domain DOMAIN``; UnknownTarget if bad."""
        text = (text or "").strip()
        if kind == HOLD_LANE:
            if text not in LANES:
                raise UnknownTarget("lane_unknown", text=text, lanes=LANES)
            return cls(HOLD_LANE, text)
        if kind == HOLD_TEMPLATE:
            match = _TEMPLATE_SPEC.match(text)
            if not match:
                raise UnknownTarget("template_spec_unreadable", text=text)
            version = int(match["version"]) if match["version"] else None
            return cls(HOLD_TEMPLATE, match["name"], version)
        if kind == HOLD_DOMAIN:
            domain = text.lower().removeprefix("@").rstrip(".")
            if not _DOMAIN.match(domain):
                raise UnknownTarget("domain_invalid", text=text)
            return cls(HOLD_DOMAIN, domain)
        raise UnknownTarget("hold_kind_unknown", kinds=HOLD_KINDS)

    @property
    def spec(self) -> str:
        """What follows the kind: ``critical``, ``password-reset@2``, ``example.com``."""
        return self.value if self.version is None else f"{self.value}@{self.version}"

    def notation(self) -> str:
        """The selector as ``console hold`` takes it and ``parse`` reads it back:
        ``lane critical``, ``template password-reset@2``, ``domain example.com``."""
        return f"{self.kind} {self.spec}"


def selector_of(hold: IntentHold) -> Selector:
    return Selector(hold.kind, hold.value, hold.template_version)


def _in_force(now: dt.datetime):
    return and_(HOLD.released_at.is_(None), or_(HOLD.until.is_(None), HOLD.until > now))


def _holds_intent(intent=INTENT):
    """A hold's selector matches the intent's template (and version) or recipient domain."""
    return or_(
        and_(
            HOLD.kind == HOLD_TEMPLATE,
            HOLD.value == intent.template,
            or_(HOLD.template_version.is_(None), HOLD.template_version == intent.template_version),
        ),
        and_(
            HOLD.kind == HOLD_DOMAIN,
            func.lower(intent.recipient).like(literal("%@") + HOLD.value),
        ),
    )


def lane_held(lane: str, now: dt.datetime):
    """A hold in force stops `lane` (not correlated: evaluated once per claim)."""
    return exists().where(_in_force(now), HOLD.kind == HOLD_LANE, HOLD.value == lane)


def intent_held(now: dt.datetime):
    """A hold in force stops the intent's template or recipient domain (correlated)."""
    return exists().where(_in_force(now), _holds_intent())


def _matching(selector: Selector):
    """The intents `selector` names, as a WHERE clause on email_intent."""
    if selector.kind == HOLD_LANE:
        return INTENT.lane == selector.value
    if selector.kind == HOLD_TEMPLATE:
        clause = INTENT.template == selector.value
        if selector.version is not None:
            clause = and_(clause, INTENT.template_version == selector.version)
        return clause
    return func.lower(INTENT.recipient).like(f"%@{selector.value}")


def active_hold(session: Session, selector: Selector, now: dt.datetime) -> IntentHold | None:
    """Return the hold in force with exactly `selector`, if any."""
    query = select(IntentHold).where(
        _in_force(now),
        HOLD.kind == selector.kind,
        HOLD.value == selector.value,
        HOLD.template_version.is_(None)
        if selector.version is None
        else HOLD.template_version == selector.version,
    )
    return session.scalars(query.limit(1)).first()


def place_hold(
    session: Session,
    selector: Selector,
    *,
    actor: str,
    reason: str | None,
    now: dt.datetime,
    until: dt.datetime | None = None,
) -> IntentHold:
    """Hold `selector` from now (until `until`, if given); audited. ActionRefused if held."""
    reason = required_reason(reason)
    if until is not None and until <= now:
        raise ActionRefused("hold_ends_in_the_past", until=until)
    existing = active_hold(session, selector, now)
    if existing is not None:
        raise StaleAction(
            "already_held", held=selector.notation(), since=existing.held_at, by=existing.held_by
        )
    hold = IntentHold(
        kind=selector.kind,
        value=selector.value,
        template_version=selector.version,
        reason=reason,
        held_by=actor,
        held_at=now,
        until=until,
    )
    session.add(hold)
    session.flush()
    details = {"hold_id": hold.id, "until": until.isoformat() if until else None}
    write_audit(
        session,
        [
            audit_values(
                actor=actor, action="hold", now=now, reason=reason,
                target=selector.notation(), details=details,
            )
        ],
    )  # fmt: skip
    return hold


@dataclasses.dataclass(frozen=True)
class Released:
    selector: Selector
    waiting: int  # pending intents it held, due again now
    expired: int  # intents that stopped being useful while held, now expired


def release_hold(
    session: Session,
    hold_id: int,
    *,
    actor: str,
    reason: str | None,
    now: dt.datetime,
    max_ages: Mapping[str, float] | None = None,
) -> Released:
    """End hold `hold_id`; expire what it held past its expiry or its template's max age
    (`max_ages`: template name → seconds), naming the hold; audited. ActionRefused if not held."""
    reason = (reason or "").strip() or None
    if reason is not None:
        reason = required_reason(reason)
    hold = session.get(IntentHold, hold_id)
    ended = update(IntentHold).where(HOLD.id == hold_id, _in_force(now))
    if (
        hold is None
        or session.execute(ended.values(released_at=now, released_by=actor)).rowcount != 1
    ):
        raise StaleAction("hold_gone")
    selector = selector_of(hold)
    expired = _expire_held(session, hold, now, max_ages or {})
    waiting = waiting_behind(session, selector)
    write_audit(
        session,
        [
            audit_values(
                actor=actor, action="release", now=now, reason=reason,
                target=selector.notation(),
                details={"hold_id": hold_id, "waiting": waiting, "expired": expired},
            )
        ],
    )  # fmt: skip
    if waiting:
        wake_workers(session)
    return Released(selector, waiting, expired)


def _expire_held(
    session: Session, hold: IntentHold, now: dt.datetime, max_ages: Mapping[str, float]
) -> int:
    """Expire the pending intents `hold` held that stopped being useful; return how many."""
    may_have_expired = INTENT.expires_at <= now
    if max_ages:
        may_have_expired = or_(may_have_expired, INTENT.template.in_(list(max_ages)))
    candidates = session.execute(
        select(INTENT.id, INTENT.template, INTENT.created_at, INTENT.expires_at).where(
            INTENT.status == PENDING, _matching(selector_of(hold)), may_have_expired
        )
    )
    rows = []
    for intent_id, template, created_at, expires_at in candidates:
        rules = TemplateRules(max_age_seconds=max_ages.get(template))
        deadline = useful_until(IntentFacts(created_at, expires_at, 0, rules))
        if deadline is not None and now >= deadline:
            reason = (
                f"not sent: no longer useful after {deadline.isoformat()}, while held"
                f" ({selector_of(hold).notation()}: {hold.reason})"
            )
            rows.append(dict(b_id=intent_id, b_reason=reason))
    if rows:
        statement = (
            update(Intent.__table__)
            .where(INTENT.id == bindparam("b_id"), INTENT.status == PENDING)
            .values(status=EXPIRED, status_reason=bindparam("b_reason"), updated_at=now)
        )
        session.connection().execute(statement, rows)
    return len(rows)


def waiting_behind(session: Session, selector: Selector) -> int:
    """Count the pending intents `selector` names."""
    query = (
        select(func.count())
        .select_from(Intent)
        .where(INTENT.status == PENDING, _matching(selector))
    )
    return session.execute(query).scalar_one()


@dataclasses.dataclass(frozen=True)
class HoldLine:
    """A hold in force and how many pending intents wait behind it."""

    hold: IntentHold
    waiting: int

    @property
    def selector(self) -> Selector:
        return selector_of(self.hold)


def holds_in_force(session: Session, now: dt.datetime) -> list[HoldLine]:
    """Every hold in force, oldest first, with the intents waiting behind each."""
    holds = session.scalars(select(IntentHold).where(_in_force(now)).order_by(HOLD.held_at))
    return [HoldLine(hold, waiting_behind(session, selector_of(hold))) for hold in holds]


def holds_on(
    holds: list[HoldLine], *, lane: str, template: str, version: int, recipient: str
) -> list[HoldLine]:
    """Those of `holds` that stop an intent of this lane, template version and recipient."""
    domain = recipient.rpartition("@")[2].lower()

    def stops(selector: Selector) -> bool:
        if selector.kind == HOLD_LANE:
            return selector.value == lane
        if selector.kind == HOLD_TEMPLATE:
            return selector.value == template and selector.version in (None, version)
        return selector.value == domain

    return [line for line in holds if stops(line.selector)]
