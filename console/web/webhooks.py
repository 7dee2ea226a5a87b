"""Provider event endpoints: SES through SNS, the generic webhook, and native providers.

``/webhooks/ses`` (SNS signatures), ``/webhooks/generic`` (our HMAC),
``/webhooks/resend`` (Svix signatures), ``/webhooks/postmark`` (HTTP basic
auth), ``/webhooks/mailgun`` (Mailgun's HMAC and token), ``/webhooks/sendgrid``
(ECDSA). Each is authenticated by its provider's scheme, not by a session, so
they are exempt from CSRF; one whose secret is not configured answers 503.
Each answers 2xx only after the transactions holding the events commit (a large
batch in chunks of CHUNK_EVENTS, each idempotent); any failure before that
answers 4xx/5xx and the provider delivers again, which stores nothing twice. A signed
request whose key was already recorded (``console.store.webhook_replay_keys``, shared
by every process) is refused with 409.

No post/redirect/get here: these POSTs come from providers' servers, not from a
form in a browser, and their status code is the answer the provider acts on.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from flask import Blueprint, current_app, jsonify, request

from console.events import (
    EventRejected,
    ReportedEvent,
    mailgun,
    postmark,
    resend,
    sendgrid,
    ses,
    sns,
    webhook,
)
from console.models import utcnow
from console.store import webhook_replay_keys
from console.store.provider_events import RecordSummary, record_events
from console.web.extensions import current_settings, db
from console.web.security import csrf_exempt

log = logging.getLogger(__name__)

bp = Blueprint("webhooks", __name__, url_prefix="/webhooks")
csrf_exempt(bp)

MAX_BODY_BYTES = 512 * 1024  # an SNS message is at most 256 KiB
MAX_BATCH_BYTES = 4 * 1024 * 1024  # a SendGrid batch (SendGrid posts up to about 768 KiB)
CERTIFICATES_EXTENSION = "console.sns_certificates"  # a sns.CertificateCache
SUBSCRIBE_VISITOR_EXTENSION = "console.sns_subscribe_visitor"  # a sns.UrlVisitor
CHUNK_EVENTS = 500  # events a transaction: a large batch never holds the database for long


def _body(limit: int = MAX_BODY_BYTES) -> bytes:
    body = request.stream.read(limit + 1)
    if len(body) > limit:
        raise EventRejected(f"the body is larger than {limit} bytes", 413)
    return body


def _sns_verifier() -> sns.SnsVerifier:
    certificates = current_app.extensions.setdefault(CERTIFICATES_EXTENSION, sns.CertificateCache())
    return sns.SnsVerifier(current_settings().sns_topic_arns, certificates)


def _not_configured(*variables: str):
    names = " and ".join(variables)
    return jsonify(error=f"the webhook is not configured: set {names}"), 503


def _record(
    events: list[ReportedEvent],
    *,
    replay_key: tuple[str, str, float] | None = None,
    refuse_duplicates: bool = False,
):
    """Record verified events and answer 200 once committed; refuse a replayed request.

    Events are committed CHUNK_EVENTS at a time, so other writers get the database
    between chunks; each chunk is idempotent (UNIQUE source event ids). A signed
    request is a replay when its `replay_key` (provider, key, window in seconds)
    was recorded before: the key is kept with the last chunk, so a request that
    failed part-way is accepted again and completes. An unsigned one
    (`refuse_duplicates`) is a replay when every event it carries was recorded before.
    """
    now = utcnow()
    chunks = [events[i : i + CHUNK_EVENTS] for i in range(0, len(events), CHUNK_EVENTS)] or [[]]
    total = RecordSummary()
    for number, chunk in enumerate(chunks, start=1):
        if number == len(chunks) and replay_key is not None:
            _claim_key(*replay_key, now)
        summary = record_events(db.session, chunk, now=now)
        db.session.commit()
        total = _added(total, summary)
    if refuse_duplicates and total.duplicates and not total.inserted:
        return jsonify(error="already recorded, do not retry", **total.as_dict()), 409
    return jsonify(status="recorded", **total.as_dict()), 200


def _added(left: RecordSummary, right: RecordSummary) -> RecordSummary:
    return RecordSummary(
        inserted=left.inserted + right.inserted,
        duplicates=left.duplicates + right.duplicates,
        matched=left.matched + right.matched,
    )


# A signed request already recorded: 409, but 406 for Mailgun, which retries every other
# answer for hours (a redelivery whose first 200 was lost would keep coming).
REPLAY_STATUS = {mailgun.SOURCE: mailgun.NOT_ACCEPTABLE}


def _claim_key(provider: str, key: str, window_seconds: float, now: dt.datetime) -> None:
    """Keep the key for twice the window (a time that far ahead is accepted too)."""
    claimed = webhook_replay_keys.claim_replay_key(
        db.session, source=provider, key=key, now=now, keep_seconds=2 * window_seconds
    )
    if not claimed:
        status = REPLAY_STATUS.get(provider, 409)
        raise EventRejected("this signed request was already received", status)


@bp.post("/ses")
def receive_sns():
    """Verify an SNS message; confirm a subscription or record the SES events it carries."""
    message = sns.parse_message(_body())
    _sns_verifier().verify(message)
    kind = message["Type"]
    if kind == sns.SUBSCRIPTION_CONFIRMATION:
        visit = current_app.extensions.get(SUBSCRIBE_VISITOR_EXTENSION, sns.visit_over_https)
        sns.confirm_subscription(message, visit)
        log.info("SNS subscription confirmed", extra={"target": message["TopicArn"]})
        return jsonify(status="confirmed"), 200
    if kind == sns.UNSUBSCRIBE_CONFIRMATION:
        log.error("SNS topic unsubscribed this endpoint", extra={"target": message["TopicArn"]})
        return _record([ses.topic_unsubscribed(message)])
    return _record(
        ses.parse_notification(message["MessageId"], message["Message"], message.get("Timestamp"))
    )


@bp.post("/generic")
def receive_generic():
    """Verify the HMAC of a generic event and record it once; a replayed id is refused."""
    settings = current_settings()
    if not settings.webhook_secret:
        return _not_configured("CONSOLE_WEBHOOK_SECRET")
    body = _body()
    webhook.verify_signature(
        secret=settings.webhook_secret,
        timestamp=request.headers.get(webhook.TIMESTAMP_HEADER),
        signature=request.headers.get(webhook.SIGNATURE_HEADER),
        body=body,
        now_epoch_seconds=time.time(),
        tolerance_seconds=settings.webhook_tolerance_seconds,
    )
    summary = record_events(db.session, [webhook.parse_event(body)])
    db.session.commit()
    if summary.duplicates:
        return jsonify(error="this event id was already recorded", **summary.as_dict()), 409
    return jsonify(status="recorded", **summary.as_dict()), 200


@bp.post("/resend")
def receive_resend():
    """Verify a Resend (Svix) signature and record the event."""
    settings = current_settings()
    if not settings.resend_webhook_secret:
        return _not_configured("CONSOLE_RESEND_WEBHOOK_SECRET")
    body = _body()
    headers = resend.svix_headers(request.headers)
    resend.verify(
        secret=settings.resend_webhook_secret,
        message_id=headers["id"],
        timestamp=headers["timestamp"],
        signature=headers["signature"],
        body=body,
        now_epoch_seconds=time.time(),
        tolerance_seconds=settings.webhook_tolerance_seconds,
    )
    events = resend.parse_events(str(headers["id"]), body)
    key = f"{headers['id']}.{headers['timestamp']}"
    return _record(events, replay_key=(resend.SOURCE, key, settings.webhook_tolerance_seconds))


@bp.post("/postmark")
def receive_postmark():
    """Check Postmark's basic-auth credentials and record the record it posts."""
    settings = current_settings()
    if not (settings.postmark_webhook_user and settings.postmark_webhook_password):
        return _not_configured("CONSOLE_POSTMARK_WEBHOOK_USER", "CONSOLE_POSTMARK_WEBHOOK_PASSWORD")
    try:
        postmark.check_credentials(
            request.headers.get("Authorization"),
            user=settings.postmark_webhook_user,
            password=settings.postmark_webhook_password,
        )
    except EventRejected as error:
        reply = _refuse(error)
        reply[0].headers["WWW-Authenticate"] = postmark.REALM
        return reply
    return _record([postmark.parse_record(_body())], refuse_duplicates=True)


@bp.post("/mailgun")
def receive_mailgun():
    """Verify Mailgun's signature block, refuse a used token, and record the event."""
    settings = current_settings()
    if not (settings.mailgun_signing_key or settings.mailgun_parent_signing_key):
        return _not_configured("CONSOLE_MAILGUN_SIGNING_KEY")
    data = mailgun.read_body(_body())
    window = settings.mailgun_replay_seconds
    token = mailgun.verify(
        data,
        signing_key=settings.mailgun_signing_key,
        parent_signing_key=settings.mailgun_parent_signing_key,
        now_epoch_seconds=time.time(),
        tolerance_seconds=window,
    )
    return _record([mailgun.parse_event(data)], replay_key=(mailgun.SOURCE, token, window))


@bp.post("/sendgrid")
def receive_sendgrid():
    """Verify SendGrid's ECDSA signature and record each event of the batch once."""
    settings = current_settings()
    if not settings.sendgrid_public_key:
        return _not_configured("CONSOLE_SENDGRID_PUBLIC_KEY")
    body = _body(MAX_BATCH_BYTES)
    timestamp = request.headers.get(sendgrid.TIMESTAMP_HEADER)
    sendgrid.verify(
        public_key=settings.sendgrid_public_key,
        signature=request.headers.get(sendgrid.SIGNATURE_HEADER),
        timestamp=timestamp,
        body=body,
        now_epoch_seconds=time.time(),
        tolerance_seconds=settings.webhook_tolerance_seconds,
    )
    window = settings.webhook_tolerance_seconds
    key = sendgrid.replay_key(str(timestamp), body)
    return _record(sendgrid.parse_batch(body), replay_key=(sendgrid.SOURCE, key, window))


@bp.errorhandler(EventRejected)
def _refuse(error: EventRejected):
    db.session.rollback()
    log.warning("provider event refused: %s", error, extra={"code": error.status})
    return jsonify(error=str(error)), error.status
