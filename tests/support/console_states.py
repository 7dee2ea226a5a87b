"""One database holding every state a console page can show, and the words no page may show.

`add_every_state(session)` writes intents in each status with the attempts, reasons and
events the worker and the providers leave (raw ISO times and second counts in the stored
reasons, exception names in the errors), holds with and without an end, a deferred domain,
an open breaker, firing alerts with the summaries they fired with, workers, suppressions
and audit entries. `page_problems(text)` lists what a page's words must never contain.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

from sqlalchemy.orm import Session

from console.events import ReportedEvent
from console.models import Attempt, AuditEntry, Intent, Suppression, utcnow
from console.outbox import enqueue
from console.state_tables import AlertState, DomainDeferral, LaneBreaker, WorkerHeartbeat
from console.store import holds
from console.store.provider_events import record_events

ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}|\d{2}:\d{2}:\d{2}\.\d+|[+-]00:00\b")
BARE_SECONDS = re.compile(r"\b(?:[6-9]\d|\d{3,})(?:\.\d+)? s\b")
EXCEPTION_NAME = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Disconnected|Refused|Exception)\b")
DOUBLED = re.compile(r"\.\.(?!\.)|(?<!\.)\.\.\.(?!\.)|\. \.|,,|;;|: :|\s[.;,]\s")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclasses.dataclass
class States:
    """The ids of what `add_every_state` wrote, by what they show."""

    intents: dict[str, int]
    event_ids: list[int]


def _intent(session: Session, name: str, status: str, *, template: str = "order-confirmation",
            to: str | None = None, **columns) -> int:  # fmt: skip
    params = {"customer_name": "Ada", "order_number": name, "total": "9.00",
              "items": [{"quantity": 1, "name": "Lamp", "price": "9.00"}]}  # fmt: skip
    if template == "password-reset":
        params = {"name": "Ada", "reset_url": "https://shop.example.com/reset/1"}
    intent = enqueue(
        session, key=f"state:{name}:mail", event=f"state:{name}", to=to or f"{name}@example.com",
        template=template, params=params,
    )  # fmt: skip
    session.flush()
    session.query(Intent).filter_by(id=intent.id).update({"status": status, **columns})
    return intent.id


def _attempt(session: Session, intent_id: int, number: int, at: dt.datetime, **columns) -> None:
    values = {"stage": "reply_read", "duration_ms": 12, **columns}
    session.add(Attempt(intent_id=intent_id, attempt_number=number, lease_token=f"t{intent_id}",
                        worker_id="web-1:4242:ab12", started_at=at, finished_at=at,
                        **values))  # fmt: skip


def _intents(session: Session, now: dt.datetime) -> dict[str, int]:
    hour_ago = now - dt.timedelta(hours=1)
    ids = {
        "pending": _intent(session, "pending", "pending", attempt_count=2,
                           next_attempt_at=now + dt.timedelta(minutes=4)),
        "held": _intent(session, "held", "pending", lane="bulk"),
        "deferred": _intent(session, "deferred", "pending", to="ada@slow.example.net",
                            lane="critical"),
        "sending": _intent(session, "sending", "sending", attempt_count=1,
                           lease_expires_at=now + dt.timedelta(seconds=30)),
        "submitted": _intent(session, "submitted", "submitted", attempt_count=1,
                             submitted_at=now - dt.timedelta(minutes=5),
                             provider_message_id="relay-1"),
        "ambiguous": _intent(session, "ambiguous", "ambiguous", attempt_count=1,
                             status_reason="no reply after the body was sent at data_sent "
                             "(SMTPServerDisconnected: Unexpected EOF received)"),
        "failed": _intent(session, "failed", "failed", attempt_count=1,
                          status_reason="permanent 550 5.1.1 at reply_read (user unknown)"),
        "dead": _intent(session, "dead", "dead", attempt_count=1,
                        created_at=now - dt.timedelta(days=2),
                        status_reason="gave up after 172801 s; last: 451 4.3.0 temporary "
                        "failure at data_sent (try again later)"),
        "expired": _intent(session, "expired", "expired", template="password-reset",
                           created_at=hour_ago, status_reason="not sent: no longer useful "
                           f"after {(hour_ago + dt.timedelta(minutes=30)).isoformat()}"),
        "suppressed": _intent(session, "suppressed", "suppressed", to="gone@example.com",
                              status_reason="recipient is on the suppression list"),
        "cancelled": _intent(session, "cancelled", "cancelled",
                             status_reason="a newer reset link was requested"),
    }  # fmt: skip
    return ids


def _attempts(session: Session, ids: dict[str, int], now: dt.datetime) -> None:
    earlier = now - dt.timedelta(minutes=3)
    for number in (1, 2):
        _attempt(session, ids["pending"], number, earlier, outcome="transient", reply_code=451,
                 enhanced_status="4.7.1", reply_text="4.7.1 Greylisted, try again later",
                 error="SMTPDataError: (451, '4.7.1 Greylisted, try again later')")  # fmt: skip
    _attempt(session, ids["ambiguous"], 1, earlier, outcome="ambiguous", stage="data_sent",
             error="SMTPServerDisconnected: Unexpected EOF received")  # fmt: skip
    _attempt(session, ids["failed"], 1, earlier, outcome="permanent", reply_code=550,
             enhanced_status="5.1.1",
             reply_text="5.1.1 Mailbox unavailable: user unknown")  # fmt: skip
    _attempt(session, ids["dead"], 1, earlier, outcome="transient", reply_code=451,
             error="SMTPReadTimeoutError: Timed out waiting for server response")  # fmt: skip
    _attempt(session, ids["submitted"], 1, earlier, outcome="accepted", reply_code=250,
             reply_text="2.0.0 Ok: queued as DEMOE520B3A9000023",
             provider_message_id="relay-1")  # fmt: skip
    _attempt(session, ids["sending"], 1, now, stage="data_sent")


def _events(session: Session, now: dt.datetime) -> None:
    record_events(session, [
        ReportedEvent(source="webhook", source_event_id="state-delivered", event_type="delivered",
                      recipient="submitted@example.com", provider_message_id="relay-1",
                      occurred_at=now - dt.timedelta(minutes=2)),
        ReportedEvent(source="webhook", source_event_id="state-stranger", event_type="delivered",
                      recipient="stranger@example.com", provider_message_id="NOT-OURS-7"),
        ReportedEvent(source="ses", source_event_id="state-bounce", event_type="bounced",
                      recipient="gone@example.com", bounce_type="permanent",
                      diagnostic="smtp; 550 5.1.1 user unknown"),
    ], now=now)  # fmt: skip


def _guards(session: Session, now: dt.datetime) -> None:
    holds.place_hold(
        session,
        holds.Selector("lane", "bulk"),
        actor="olga",
        reason="provider maintenance",
        now=now - dt.timedelta(minutes=20),
    )
    holds.place_hold(
        session,
        holds.Selector("template", "welcome"),
        actor="olga",
        reason="broken link",
        now=now,
        until=now + dt.timedelta(hours=6),
    )
    session.add(
        DomainDeferral(
            domain="slow.example.net",
            reply_code=421,
            updated_at=now,
            deferred_until=now + dt.timedelta(minutes=11),
        )
    )
    session.add(LaneBreaker(lane="critical", state="open", trips=1, failure_rate=0.8,
                            opened_at=now, resume_at=now + dt.timedelta(minutes=2)))  # fmt: skip


def _alerts(session: Session, now: dt.datetime) -> None:
    fired = now - dt.timedelta(minutes=30)
    summaries = {
        "sender_rate:complaint:24h": "complaint rate over the 24h window is 1/16 (limit 0.3 %)",
        "pending_age:order-confirmation": "oldest pending order-confirmation mail is "
        "173190 s old (target 3600 s)",
        "inbound_mail_at_events_endpoint": "inbound mail is arriving at the events endpoint "
        "(3 in the last 3600 s): give inbound mail a topic of its own",
        "hold_set:1:1": "lane bulk has been held for 1 day(s): 3 intent(s) waiting",
        "provider_auth": "the provider refused our credentials (535) 2 time(s): check the "
        "configuration",
    }
    for condition, summary in summaries.items():
        session.add(AlertState(condition=condition, active=True, summary=summary, fired_at=fired,
                               details={"lane": "bulk"}))  # fmt: skip


def _people(session: Session, ids: dict[str, int], now: dt.datetime) -> None:
    session.add_all([
        WorkerHeartbeat(worker_id="web-1:4242:ab12", host="web-1", pid=4242, version="0.1.0",
                        started_at=now - dt.timedelta(hours=2), last_tick_at=now),
        WorkerHeartbeat(worker_id="web-2:99:cd34", host="web-2", pid=99, version="0.1.0",
                        started_at=now - dt.timedelta(days=1),
                        last_tick_at=now - dt.timedelta(minutes=30)),
        Suppression(recipient="asked@example.com", reason="manual", note="asked by phone",
                    created_by="olga", created_at=now),
        AuditEntry(actor="olga", action="requeue", intent_id=ids["expired"], reason="try again",
                   before_status="expired", after_status="pending",
                   created_at=now - dt.timedelta(minutes=1)),
    ])  # fmt: skip


def add_every_state(session: Session, now: dt.datetime | None = None) -> States:
    """Write every state the pages show (no commit); return the ids written."""
    now = now or utcnow()
    ids = _intents(session, now)
    _attempts(session, ids, now)
    _events(session, now)
    _guards(session, now)
    _alerts(session, now)
    _people(session, ids, now)
    session.flush()
    from console.models import ProviderEvent

    event_ids = [row.id for row in session.query(ProviderEvent.id)]
    return States(ids, event_ids)


def pages(states: States) -> list[str]:
    """Every GET page of the console, with the states' intents and events."""
    listed = [
        "/", "/intents", "/intents?q=state-pending", "/intents?q=nothing-like-this",
        "/intents?status=dead", "/events", "/events?match=unmatched", "/templates",
        "/templates/order-confirmation", "/suppressions", "/holds", "/audit", "/users",
        "/account", "/erasure", "/suppressions/removed?recipient=gone@example.com",
        "/intents/bulk?action=requeue&status=dead&preview=abcdefgh12345678",
    ]  # fmt: skip
    listed += [f"/intents/{intent_id}" for intent_id in states.intents.values()]
    return listed + [f"/events/{event_id}" for event_id in states.event_ids]


def page_problems(text: str) -> list[str]:
    """What the visible words of a page must never hold, each named with its context."""
    problems = []
    for name, pattern in (
        ("raw ISO time", ISO_TIME),
        ("bare seconds", BARE_SECONDS),
        ("exception name", EXCEPTION_NAME),
        ("doubled punctuation", DOUBLED),
    ):
        problems += [f"{name}: …{text[max(0, m.start() - 40):m.end() + 40]}…"
                     for m in pattern.finditer(text)]  # fmt: skip
    return problems


def repeated_sentences(block: str) -> list[str]:
    """Sentences said twice within one paragraph, flash or list item."""
    said = [part.strip() for part in SENTENCE_END.split(block) if len(part.strip()) > 12]
    return sorted({sentence for sentence in said if said.count(sentence) > 1})
