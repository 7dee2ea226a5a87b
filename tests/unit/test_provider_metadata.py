"""Our reference in each provider's metadata channel: written by the serializer (or the HTTP
transport), read back by that provider's event parser; pure, no IO.

What each provider returns for a header is as its documentation says: Postmark
``X-PM-Metadata-<key>`` → ``Metadata`` ("Sending email with SMTP"), Mailgun
``X-Mailgun-Variables`` → ``user-variables`` ("Attaching Data to Messages"),
SendGrid ``X-SMTPAPI`` ``unique_args`` → top-level fields ("Unique arguments"),
SES ``X-SES-MESSAGE-TAGS`` → ``mail.tags`` ("Contents of event data"), Resend
``tags`` → ``data.tags``.
"""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import json
import re

import pytest

from console.config import ConfigError, load_enqueue_settings
from console.events import mailgun, postmark, resend, sendgrid, ses
from console.events.metadata import names_intent, parse_reference, reference_for
from console.mail.catalog import RenderedParts
from console.mail.serialize import serialize_message
from console.transports.base import OutgoingEmail
from console.transports.http import HttpTransport

MESSAGE_ID = "<5b1f0c2e9a@outbox.localhost>"
PARTS = RenderedParts(subject="Your code", text="Your code is 834201", html=None)
METADATA_HEADERS = ("X-PM-Metadata-outbox_ref", "X-Mailgun-Variables", "X-SMTPAPI",
                    "X-SES-MESSAGE-TAGS")  # fmt: skip


def message(provider: str | None, intent_id: int | None = 4711) -> email.message.Message:
    raw = serialize_message(
        mail_from="Outbox <noreply@outbox.localhost>",
        recipient="ada@example.com",
        message_id=MESSAGE_ID,
        parts=PARTS,
        date=dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC),
        provider=provider,
        intent_id=intent_id,
    )
    assert max(len(line) for line in raw.split(b"\r\n")) <= 78
    return email.message_from_bytes(raw, policy=email.policy.default)


def test_the_reference_names_one_intent_in_the_characters_every_provider_takes():
    ref = reference_for(4711, MESSAGE_ID)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,80}", ref)
    assert parse_reference(ref) == (4711, ref.split("-")[1])
    assert names_intent(ref, 4711, MESSAGE_ID)
    assert not names_intent(ref, 4712, MESSAGE_ID)
    assert not names_intent(ref, 4711, "<other@outbox.localhost>")
    assert len(reference_for(10**18, MESSAGE_ID)) <= 80, "Postmark's longest metadata value"


def test_without_a_provider_the_message_has_no_metadata_header():
    for parsed in (message(None), message("resend"), message("ses", intent_id=None)):
        assert not set(METADATA_HEADERS) & set(parsed.keys())


def returned_by(provider: str, parsed: email.message.Message) -> dict:
    """The metadata `provider`'s events carry for the header of `parsed`."""
    if provider == "postmark":
        return {"Metadata": {"outbox_ref": parsed["X-PM-Metadata-outbox_ref"]}}
    if provider == "mailgun":
        return {"user-variables": json.loads(parsed["X-Mailgun-Variables"])}
    if provider == "sendgrid":
        return json.loads(parsed["X-SMTPAPI"])["unique_args"]
    name, _, value = parsed["X-SES-MESSAGE-TAGS"].partition("=")
    return {"tags": {name: [value]}}


def parsed_event(provider: str, metadata: dict):
    """One of `provider`'s delivery events carrying `metadata`, through its parser."""
    if provider == "postmark":
        record = {"RecordType": "Delivery", "MessageID": "pm-1", "Recipient": "ada@example.com"}
        return postmark.parse_record(json.dumps({**record, **metadata}).encode())
    if provider == "mailgun":
        event = {"id": "mg-1", "event": "delivered", "recipient": "ada@example.com", **metadata}
        return mailgun.parse_event({"event-data": event})
    if provider == "sendgrid":
        item = {"event": "delivered", "sg_event_id": "sg-1", "email": "ada@example.com"}
        [event] = sendgrid.parse_batch(json.dumps([{**item, **metadata}]).encode())
        return event
    notification = {"eventType": "Delivery", "mail": {"messageId": "ses-1", **metadata},
                    "delivery": {"recipients": ["ada@example.com"]}}  # fmt: skip
    [event] = ses.parse_notification("sns-1", json.dumps(notification))
    return event


@pytest.mark.parametrize("provider", ["postmark", "mailgun", "sendgrid", "ses"])
def test_each_provider_header_comes_back_as_the_reference(provider):
    parsed = message(provider)
    present = [name for name in METADATA_HEADERS if parsed[name] is not None]
    assert len(present) == 1, "one header, the provider's own"
    assert "834201" not in parsed[present[0]], "never params or content"
    event = parsed_event(provider, returned_by(provider, parsed))
    assert event.reference == reference_for(4711, MESSAGE_ID)


def test_the_http_transport_sends_the_reference_as_a_resend_tag():
    outgoing = OutgoingEmail(
        intent_id=4711, attempt_id=1, message_id=MESSAGE_ID, idempotency_key="k",
        mail_from="noreply@outbox.localhost", envelope_from="noreply@outbox.localhost",
        recipient="ada@example.com", subject="s", text="t", html=None, created_at_epoch=0.0,
        as_bytes=lambda: b"",
    )  # fmt: skip
    tags = HttpTransport("https://api.resend.com", "re_key").payload(outgoing)["tags"]
    event = {"type": "email.delivered", "data": {"email_id": "re-1", "to": ["ada@example.com"],
             "tags": {tag["name"]: tag["value"] for tag in tags}}}  # fmt: skip
    assert resend.parse_event("msg_1", json.dumps(event).encode()).reference == reference_for(
        4711, MESSAGE_ID
    )


def test_the_provider_and_the_mailgun_window_are_settings():
    settings = load_enqueue_settings(
        {"CONSOLE_PROVIDER": " SendGrid ", "CONSOLE_MAILGUN_REPLAY_SECONDS": "3600"}
    )
    assert (settings.provider, settings.mailgun_replay_seconds) == ("sendgrid", 3600.0)
    assert load_enqueue_settings({}).mailgun_replay_seconds == 8 * 3600
    with pytest.raises(ConfigError, match="CONSOLE_PROVIDER"):
        load_enqueue_settings({"CONSOLE_PROVIDER": "sparkpost"})
