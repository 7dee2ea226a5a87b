"""Provider event endpoints: Amazon SES through SNS, and the generic signed webhook.

Both are authenticated by signature, not by a session, so they are exempt from
CSRF. Each answers 2xx only after the transaction holding the events commits;
any failure before that answers 4xx/5xx and the provider delivers again.
"""

from __future__ import annotations

import logging
import time

from flask import Blueprint, current_app, jsonify, request

from console.events import EventRejected, ReportedEvent, ses, sns, webhook
from console.store.events import record_events
from console.web.extensions import current_settings, db
from console.web.security import csrf_exempt

log = logging.getLogger(__name__)

bp = Blueprint("webhooks", __name__, url_prefix="/webhooks")
csrf_exempt(bp)

MAX_BODY_BYTES = 512 * 1024  # an SNS message is at most 256 KiB
CERTIFICATES_EXTENSION = "console.sns_certificates"  # a sns.CertificateCache
SUBSCRIBE_VISITOR_EXTENSION = "console.sns_subscribe_visitor"  # a sns.UrlVisitor


def _body() -> bytes:
    body = request.stream.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        raise EventRejected(f"the body is larger than {MAX_BODY_BYTES} bytes", 413)
    return body


def _sns_verifier() -> sns.SnsVerifier:
    certificates = current_app.extensions.setdefault(CERTIFICATES_EXTENSION, sns.CertificateCache())
    return sns.SnsVerifier(current_settings().sns_topic_arns, certificates)


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


def _record(events: list[ReportedEvent]):
    """Record verified events and answer 200 once they are committed."""
    summary = record_events(db.session, events)
    db.session.commit()
    return jsonify(status="recorded", **summary.as_dict()), 200


@bp.post("/generic")
def receive_generic():
    """Verify the HMAC of a generic event and record it once; a replayed id is refused."""
    settings = current_settings()
    if not settings.webhook_secret:
        return jsonify(error="the webhook is not configured: set CONSOLE_WEBHOOK_SECRET"), 503
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


@bp.errorhandler(EventRejected)
def _refuse(error: EventRejected):
    db.session.rollback()
    log.warning("provider event refused: %s", error, extra={"code": error.status})
    return jsonify(error=str(error)), error.status
