"""Amazon SES notifications, in both shapes SES publishes them.

The raw notification shape names its kind in ``notificationType``, the event
publishing shape in ``eventType``; the bodies (``bounce``, ``complaint``,
``delivery``, ``mail``) are the same. Each bounced, complained or delivered
recipient becomes one ReportedEvent; any other kind is kept as one event of
its own type, stored but not applied.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from console.events import (
    BOUNCE_TYPES,
    BOUNCED,
    COMPLAINED,
    DELIVERED,
    MAX_EVENT_TYPE_LENGTH,
    UNDETERMINED,
    ReportedEvent,
    normalize_message_id,
    parse_timestamp,
)

SOURCE = "ses"
MAX_UNPARSED_CHARACTERS = 10_000


def parse_notification(sns_message_id: str, message: str) -> list[ReportedEvent]:
    """Turn the ``Message`` of an SNS notification into one event per recipient."""
    try:
        notification = json.loads(message)
    except ValueError:
        notification = None
    if not isinstance(notification, dict):
        # e.g. the plain-text test message SES sends when a topic is set up
        payload = {"message": message[:MAX_UNPARSED_CHARACTERS]}
        return [ReportedEvent(SOURCE, sns_message_id, "unknown", payload=payload)]
    kind = notification.get("notificationType") or notification.get("eventType")
    parser = _PARSERS.get(kind)
    common = _mail_fields(notification)
    if parser is None:
        event_type = str(kind or "unknown").lower().replace(" ", "_")[:MAX_EVENT_TYPE_LENGTH]
        return [ReportedEvent(SOURCE, sns_message_id, event_type, payload=notification, **common)]
    per_recipient = parser(notification) or [{"event_type": _EVENT_TYPES[kind]}]
    return [
        ReportedEvent(
            SOURCE,
            _event_id(sns_message_id, index, len(per_recipient)),
            payload=notification,
            **common,
            **fields,
        )
        for index, fields in enumerate(per_recipient)
    ]


def _event_id(sns_message_id: str, index: int, count: int) -> str:
    """One id per recipient, the same on every redelivery of the notification."""
    return sns_message_id if count == 1 else f"{sns_message_id}#{index + 1}"


def _mail_fields(notification: dict[str, Any]) -> dict[str, Any]:
    mail = notification.get("mail")
    if not isinstance(mail, dict):
        return {}
    message_id = None
    for header in mail.get("headers") or []:
        if isinstance(header, dict) and str(header.get("name", "")).lower() == "message-id":
            message_id = header.get("value")
    if message_id is None:
        message_id = (mail.get("commonHeaders") or {}).get("messageId")
    provider_message_id = mail.get("messageId")
    return {
        "provider_message_id": provider_message_id
        if isinstance(provider_message_id, str)
        else None,
        "message_id": normalize_message_id(message_id),
    }


def _section(notification: dict[str, Any], name: str) -> dict[str, Any]:
    section = notification.get(name)
    return section if isinstance(section, dict) else {}


def _address(entry: Any) -> str | None:
    if isinstance(entry, dict):
        entry = entry.get("emailAddress")
    return entry.strip() if isinstance(entry, str) and entry.strip() else None


def _bounces(notification: dict[str, Any]) -> list[dict[str, Any]]:
    bounce = _section(notification, "bounce")
    bounce_type = str(bounce.get("bounceType", "")).lower()
    occurred_at = parse_timestamp(bounce.get("timestamp"))
    return [
        {
            "event_type": BOUNCED,
            "recipient": _address(entry),
            "bounce_type": bounce_type if bounce_type in BOUNCE_TYPES else UNDETERMINED,
            "diagnostic": _bounce_diagnostic(entry, bounce),
            "occurred_at": occurred_at,
        }
        for entry in bounce.get("bouncedRecipients") or []
    ]


def _bounce_diagnostic(entry: Any, bounce: dict[str, Any]) -> str | None:
    entry = entry if isinstance(entry, dict) else {}
    parts = [entry.get("status"), entry.get("diagnosticCode")]
    text = " ".join(str(part) for part in parts if part)
    return text or bounce.get("bounceSubType") or None


def _complaints(notification: dict[str, Any]) -> list[dict[str, Any]]:
    complaint = _section(notification, "complaint")
    feedback_type = complaint.get("complaintFeedbackType")
    occurred_at = parse_timestamp(complaint.get("timestamp"))
    return [
        {
            "event_type": COMPLAINED,
            "recipient": _address(entry),
            "diagnostic": feedback_type if isinstance(feedback_type, str) else None,
            "occurred_at": occurred_at,
        }
        for entry in complaint.get("complainedRecipients") or []
    ]


def _deliveries(notification: dict[str, Any]) -> list[dict[str, Any]]:
    delivery = _section(notification, "delivery")
    smtp_response = delivery.get("smtpResponse")
    occurred_at = parse_timestamp(delivery.get("timestamp"))
    return [
        {
            "event_type": DELIVERED,
            "recipient": _address(entry),
            "diagnostic": smtp_response if isinstance(smtp_response, str) else None,
            "occurred_at": occurred_at,
        }
        for entry in delivery.get("recipients") or []
    ]


_PARSERS: dict[Any, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    "Bounce": _bounces,
    "Complaint": _complaints,
    "Delivery": _deliveries,
}
_EVENT_TYPES = {"Bounce": BOUNCED, "Complaint": COMPLAINED, "Delivery": DELIVERED}
