"""Amazon SES notifications, in both shapes SES publishes them.

The raw notification shape names its kind in ``notificationType``, the event
publishing shape in ``eventType``; the bodies (``bounce``, ``complaint``,
``delivery``, ``deliveryDelay``, ``send``, ``reject``, ``failure``, ``mail``)
are the same. What each kind means:

- ``Bounce``: one event per bounced recipient. In a Permanent bounce only a
  recipient with a 5.x.x status (or none) is bounced permanently; a 4.x.x one
  (action ``delayed``) is transient. Subtype ``OnAccountSuppressionList``
  means SES never tried: ``rejected``, suppressed as ``ses-account``.
- ``Complaint``: ``complained`` per recipient; feedback type ``not-spam`` is a
  ``not_spam`` fact; subtype ``OnAccountSuppressionList`` is as for bounces.
- ``Delivery`` → ``delivered``; ``DeliveryDelay`` → ``delayed``; ``Send`` →
  ``accepted``; ``Reject`` and ``Rendering Failure`` → ``rejected``, the
  reason kept in the diagnostic.
- ``Received`` (inbound mail sent to this topic by a receipt rule) is a set-up
  mistake: kept without its content, never matched.

Our reference comes back in the message tags (``mail.tags``, sent in
``X-SES-MESSAGE-TAGS``), in the event publishing shape only.

An event's time is the section's own timestamp, else ``mail.timestamp``, else
the SNS message's ``Timestamp``. A kind that names no recipients (or an empty
list) gives one event that keeps its type, subtype and time, about the one
address of ``mail.destination`` when there is exactly one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from console.events import (
    ACCEPTED,
    BOUNCE_TYPES,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    DELIVERED,
    INBOUND_MAIL,
    MAX_EVENT_TYPE_LENGTH,
    NOT_SPAM,
    PERMANENT,
    REJECTED,
    TOPIC_UNSUBSCRIBED,
    TRANSIENT,
    UNDETERMINED,
    EventRejected,
    NonFiniteNumber,
    ReportedEvent,
    clip,
    load_json,
    normalize_message_id,
    parse_timestamp,
    refuse_unstorable_text,
    single_address,
)
from console.events.metadata import reference_in

SOURCE = "ses"
MAX_UNPARSED_CHARACTERS = 10_000
ACCOUNT_SUPPRESSION = "OnAccountSuppressionList"
ACCOUNT_SUPPRESSION_REASON = "ses-account"
ACCOUNT_SUPPRESSED = (
    "the address is on the SES account-level suppression list: SES did not send the message"
)
INBOUND_NOT_MATCHED = (
    "inbound mail (SES Received) reached the events endpoint: remove this topic from the "
    "receipt rule; it is not about mail sent from here"
)
UNSUBSCRIBED_NOT_MATCHED = (
    "the SNS subscription of this endpoint was cancelled: no SES events arrive until it is "
    "subscribed again"
)
SUBTYPE_LIMIT = 50

Fields = dict[str, Any]


def parse_notification(
    sns_message_id: str, message: str, sns_timestamp: str | None = None
) -> list[ReportedEvent]:
    """Turn the ``Message`` of an SNS notification into one event per recipient."""
    sent_at = parse_timestamp(sns_timestamp)
    try:
        notification = load_json(message)
    except NonFiniteNumber as refusal:
        raise EventRejected(str(refusal)) from None
    except ValueError:
        notification = None
    if not isinstance(notification, dict):
        # e.g. the plain-text test message SES sends when a topic is set up
        payload = {"message": message[:MAX_UNPARSED_CHARACTERS]}
        return [
            ReportedEvent(SOURCE, sns_message_id, "unknown", occurred_at=sent_at, payload=payload)
        ]
    refuse_unstorable_text(notification)
    kind = notification.get("notificationType") or notification.get("eventType")
    mail = _section(notification, "mail")
    when = parse_timestamp(mail.get("timestamp")) or sent_at
    if kind == "Received":
        return [_inbound(sns_message_id, notification, when)]
    common = {**_mail_fields(mail), "payload": notification}
    parser = _PARSERS.get(kind)
    if parser is None:
        event_type = str(kind or "unknown").lower().replace(" ", "_")[:MAX_EVENT_TYPE_LENGTH]
        own = _section(notification, str(kind or "").lower())
        fields = {"event_type": event_type, "occurred_at": _time(own, when)}
        per_recipient = [{**fields, "recipient": single_address(mail.get("destination"))}]
    else:
        per_recipient = parser(notification, when, single_address(mail.get("destination")))
    return [
        ReportedEvent(
            SOURCE, _event_id(sns_message_id, index, len(per_recipient)), **common, **fields
        )
        for index, fields in enumerate(per_recipient)
    ]


def topic_unsubscribed(message: dict[str, Any]) -> ReportedEvent:
    """The record of a verified UnsubscribeConfirmation: the topic, without its token."""
    topic = message.get("TopicArn")
    return ReportedEvent(
        SOURCE,
        str(message.get("MessageId")),
        TOPIC_UNSUBSCRIBED,
        diagnostic=f"SNS topic {topic} unsubscribed this endpoint",
        occurred_at=parse_timestamp(message.get("Timestamp")),
        payload={
            "Type": message.get("Type"),
            "TopicArn": topic,
            "Timestamp": message.get("Timestamp"),
        },
        never_matched=UNSUBSCRIBED_NOT_MATCHED,
    )


def _inbound(sns_message_id: str, notification: dict[str, Any], when: dt.datetime | None):
    """A Received notification, kept without the mail's content or headers."""
    mail, receipt = _section(notification, "mail"), _section(notification, "receipt")
    summary = {
        "notificationType": "Received",
        "mail": {key: mail.get(key) for key in ("timestamp", "source", "destination")},
        "receipt": {key: receipt.get(key) for key in ("timestamp", "recipients", "action")},
    }
    return ReportedEvent(
        SOURCE,
        sns_message_id,
        INBOUND_MAIL,
        diagnostic="inbound mail notification (SES Received)",
        occurred_at=parse_timestamp(receipt.get("timestamp")) or when,
        payload=summary,
        never_matched=INBOUND_NOT_MATCHED,
    )


def _event_id(sns_message_id: str, index: int, count: int) -> str:
    """One id per recipient, the same on every redelivery of the notification."""
    return sns_message_id if count == 1 else f"{sns_message_id}#{index + 1}"


def _mail_fields(mail: dict[str, Any]) -> Fields:
    message_id = None
    for header in mail.get("headers") or []:
        if isinstance(header, dict) and str(header.get("name", "")).lower() == "message-id":
            message_id = header.get("value")
    if message_id is None:
        common_headers = mail.get("commonHeaders")
        message_id = common_headers.get("messageId") if isinstance(common_headers, dict) else None
    provider_message_id = mail.get("messageId")
    return {
        "provider_message_id": provider_message_id
        if isinstance(provider_message_id, str)
        else None,
        "message_id": normalize_message_id(message_id),
        "reference": reference_in(mail.get("tags")),
    }


def _section(notification: dict[str, Any], name: str) -> dict[str, Any]:
    section = notification.get(name)
    return section if isinstance(section, dict) else {}


def _time(section: dict[str, Any], when: dt.datetime | None) -> dt.datetime | None:
    return parse_timestamp(section.get("timestamp")) or when


def _address(entry: Any) -> str | None:
    """A listed recipient's address ("John <john@x>" gives john@x), as every event reads it."""
    if isinstance(entry, dict):
        entry = entry.get("emailAddress")
    return single_address(entry) if isinstance(entry, str) else None


def _per_recipient(
    entries: Any, one: Callable[[Any], Fields], destination: str | None
) -> list[Fields]:
    """One event per listed recipient; none listed: one event about the single destination."""
    if isinstance(entries, list) and entries:
        return [{**one(entry), "recipient": _address(entry)} for entry in entries]
    return [{**one(None), "recipient": destination}]


def _account_suppressed(subtype: str, occurred_at: dt.datetime | None) -> Fields:
    return {
        "event_type": REJECTED,
        "subtype": subtype,
        "diagnostic": ACCOUNT_SUPPRESSED,
        "suppress_as": ACCOUNT_SUPPRESSION_REASON,
        "occurred_at": occurred_at,
    }


def _bounces(notification: dict[str, Any], when, destination) -> list[Fields]:
    bounce = _section(notification, "bounce")
    kind = str(bounce.get("bounceType", "")).lower()
    subtype = clip(bounce.get("bounceSubType"), SUBTYPE_LIMIT)
    occurred_at = _time(bounce, when)

    def one(entry: Any) -> Fields:
        if subtype == ACCOUNT_SUPPRESSION:
            return _account_suppressed(subtype, occurred_at)
        return {
            "event_type": BOUNCED,
            "bounce_type": _bounce_type(kind, entry),
            "subtype": subtype,
            "diagnostic": _bounce_diagnostic(entry, bounce),
            "occurred_at": occurred_at,
        }

    return _per_recipient(bounce.get("bouncedRecipients"), one, destination)


def _bounce_type(kind: str, entry: Any) -> str:
    """SES's bounce type, except that a 4.x.x recipient of a Permanent bounce is transient."""
    if kind not in BOUNCE_TYPES:
        return UNDETERMINED
    status = clip(entry.get("status"), 20) if isinstance(entry, dict) else None
    if kind == PERMANENT and status is not None and not status.startswith("5"):
        return TRANSIENT
    return kind


def _bounce_diagnostic(entry: Any, bounce: dict[str, Any]) -> str | None:
    entry = entry if isinstance(entry, dict) else {}
    parts = [entry.get("status"), entry.get("diagnosticCode")]
    text = " ".join(str(part) for part in parts if part)
    return text or bounce.get("bounceSubType") or None


def _complaints(notification: dict[str, Any], when, destination) -> list[Fields]:
    complaint = _section(notification, "complaint")
    feedback_type = clip(complaint.get("complaintFeedbackType"), SUBTYPE_LIMIT)
    subtype = clip(complaint.get("complaintSubType"), SUBTYPE_LIMIT)
    occurred_at = _time(complaint, when)

    def one(entry: Any) -> Fields:
        if subtype == ACCOUNT_SUPPRESSION:
            return _account_suppressed(subtype, occurred_at)
        return {
            "event_type": NOT_SPAM if feedback_type == "not-spam" else COMPLAINED,
            "subtype": feedback_type,
            "diagnostic": feedback_type,
            "occurred_at": occurred_at,
        }

    return _per_recipient(complaint.get("complainedRecipients"), one, destination)


def _deliveries(notification: dict[str, Any], when, destination) -> list[Fields]:
    delivery = _section(notification, "delivery")
    smtp_response = delivery.get("smtpResponse")
    fields = {
        "event_type": DELIVERED,
        "diagnostic": smtp_response if isinstance(smtp_response, str) else None,
        "occurred_at": _time(delivery, when),
    }
    return _per_recipient(delivery.get("recipients"), lambda entry: fields, destination)


def _delays(notification: dict[str, Any], when, destination) -> list[Fields]:
    delay = _section(notification, "deliveryDelay")
    delay_type = clip(delay.get("delayType"), SUBTYPE_LIMIT)

    def one(entry: Any) -> Fields:
        entry = entry if isinstance(entry, dict) else {}
        parts = [delay_type, entry.get("status"), entry.get("diagnosticCode")]
        return {
            "event_type": DELAYED,
            "subtype": delay_type,
            "diagnostic": " ".join(str(part) for part in parts if part) or None,
            "occurred_at": _time(delay, when),
        }

    return _per_recipient(delay.get("delayedRecipients"), one, destination)


def _sends(notification: dict[str, Any], when, destination) -> list[Fields]:
    fields = {"event_type": ACCEPTED, "occurred_at": _time(_section(notification, "send"), when)}
    return [{**fields, "recipient": destination}]


def _rejects(notification: dict[str, Any], when, destination) -> list[Fields]:
    reason = _section(notification, "reject").get("reason")
    diagnostic = f"SES rejected the message: {reason or 'no reason given'}"
    return [{"event_type": REJECTED, "subtype": "Reject", "diagnostic": diagnostic,
             "occurred_at": when, "recipient": destination}]  # fmt: skip


def _rendering_failures(notification: dict[str, Any], when, destination) -> list[Fields]:
    failure = _section(notification, "failure")
    template, error = failure.get("templateName"), failure.get("errorMessage")
    diagnostic = f"SES could not render template {template}: {error or 'no reason given'}"
    return [{"event_type": REJECTED, "subtype": "Rendering Failure", "diagnostic": diagnostic,
             "occurred_at": when, "recipient": destination}]  # fmt: skip


_PARSERS: dict[Any, Callable[[dict[str, Any], Any, Any], list[Fields]]] = {
    "Bounce": _bounces,
    "Complaint": _complaints,
    "Delivery": _deliveries,
    "DeliveryDelay": _delays,
    "Send": _sends,
    "Reject": _rejects,
    "Rendering Failure": _rendering_failures,
}
