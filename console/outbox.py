"""The application's door: enqueue an email intent inside a business transaction, or supersede one.

A changed message is a new intent with a new key; the old one, if not sent yet,
is cancelled with ``supersede`` in the same transaction.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import uuid
from email.header import decode_header
from typing import Any
from urllib.parse import unquote

from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session

from console import wakeup
from console.config import Settings, load_enqueue_settings
from console.core.storable_text import unstorable
from console.mail import catalog as mail_catalog
from console.mail.catalog import TemplateCatalog
from console.mail.header_checks import unsafe_character
from console.mail.template_settings import TemplateError
from console.models import Intent, utcnow
from console.store import suppressions
from console.store.intents import cancel_unsent, insert_intent_once, intent_by_key
from console.vocabulary import LANES, PENDING

MAX_KEY_LENGTH = 255
MAX_EVENT_LENGTH = 255
MAX_ACCOUNT_LENGTH = 255
MAX_REASON_LENGTH = 2000
MAX_PARAMS_DEPTH = 32  # nesting of dicts and lists in params

# No database stores these in text: NUL (PostgreSQL) and lone surrogates (any UTF-8 column).
_WAKE_FLAG = "console.outbox.wake"
_ENCODED_BREAK = re.compile(r"%0[ad]|=0[ad]|&#(?:x0*[ad]|0*1[03]);|\\[rn]", re.IGNORECASE)


class InvalidIntent(ValueError):
    """The intent cannot be enqueued; the message says why. Nothing was stored."""


@dataclasses.dataclass(frozen=True)
class OutboxOptions:
    """What enqueue needs from the settings: Message-ID domain, params limit, templates."""

    message_id_domain: str
    max_params_bytes: int
    catalog: TemplateCatalog


_options: OutboxOptions | None = None


def configure(settings: Settings) -> None:
    """Use these settings for Message-IDs, the params size limit and the templates.

    The template catalog (the shipped templates and CONSOLE_EMAIL_TEMPLATES) is
    checked here: a CatalogError names the file. Without a call, the first
    enqueue reads the settings from the environment the same way.
    """
    global _options
    suppressions.use_address_key(settings.secret_key)  # a forgotten address stays suppressed
    catalog = mail_catalog.configure(settings)
    _options = OutboxOptions(settings.message_id_domain, settings.max_params_bytes, catalog)


def _current_options() -> OutboxOptions:
    if _options is None:
        configure(load_enqueue_settings())
    assert _options is not None
    return _options


def new_message_id(domain: str) -> str:
    """Return a fresh RFC 5322 Message-ID with its angle brackets."""
    return f"<{uuid.uuid4().hex}@{domain}>"


def _check_control_characters(label: str, value: str) -> None:
    """Refuse what the worker refuses in a header: a line break or another control character."""
    character = unsafe_character(value)
    if character is not None:
        raise InvalidIntent(f"{label} contains {character}, a control character")


def _check_header_value(label: str, value: str) -> None:
    """Refuse a value that could break a header, also when the control character is encoded."""
    _check_control_characters(label, value)
    decoded = "".join(
        part.decode(charset or "utf-8", "replace") if isinstance(part, bytes) else part
        for part, charset in decode_header(value)
    )
    for candidate in (decoded, unquote(value)):
        if unsafe_character(candidate) is not None:
            raise InvalidIntent(f"{label} contains an encoded control character")
    if _ENCODED_BREAK.search(value):
        raise InvalidIntent(f"{label} contains an encoded line break")


def _check_recipient(to: Any) -> str:
    if not isinstance(to, str) or not to.strip():
        raise InvalidIntent("recipient address is empty")
    _check_header_value("recipient address", to)
    from email_validator import EmailNotValidError, validate_email  # imported when needed

    try:
        return validate_email(to.strip(), check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise InvalidIntent(f"invalid recipient address {to!r}: {exc}") from None


def _check_storable(label: str, text: str) -> None:
    if unstorable(text):
        raise InvalidIntent(f"{label} holds a NUL or a lone surrogate, which cannot be stored")


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise InvalidIntent("idempotency key is empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidIntent(f"idempotency key is longer than {MAX_KEY_LENGTH} characters")
    _check_storable("idempotency key", key)
    return key


def _check_params_content(params: dict[str, Any]) -> None:
    """Refuse params nested deeper than MAX_PARAMS_DEPTH or holding unstorable text."""
    pending: list[tuple[Any, int, str]] = [(params, 1, "params")]
    while pending:
        value, depth, where = pending.pop()
        if isinstance(value, str):
            _check_storable(where, value)
            continue
        if not isinstance(value, dict | list | tuple):
            continue
        if depth > MAX_PARAMS_DEPTH:
            raise InvalidIntent(f"params are nested deeper than {MAX_PARAMS_DEPTH} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for name, item in items:
            if isinstance(name, str):
                _check_storable(f"a name in {where}", name)
            pending.append((item, depth + 1, f"{where}[{name!r:.40}]"))


def _check_params(params: Any, limit: int) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise InvalidIntent("params must be a dict of template variables")
    _check_params_content(params)
    try:
        encoded = json.dumps(params, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidIntent(f"params are not JSON-serializable: {exc}") from None
    if len(encoded.encode()) > limit:
        raise InvalidIntent(f"params are {len(encoded.encode())} bytes, above the {limit} limit")
    return json.loads(encoded)


def _check_expiry(expires_at: dt.datetime | None, now: dt.datetime) -> dt.datetime | None:
    if expires_at is None:
        return None
    if not isinstance(expires_at, dt.datetime):
        raise InvalidIntent("expires_at must be a datetime")
    if expires_at.tzinfo is None:
        expires_at = expires_at.replace(tzinfo=dt.UTC)
    if expires_at <= now:
        raise InvalidIntent(f"expires_at {expires_at.isoformat()} is in the past")
    return expires_at.astimezone(dt.UTC)


def _check_short_text(label: str, value: Any, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise InvalidIntent(f"{label} must be a string of at most {limit} characters")
    _check_storable(label, value)
    return value


def _check_plain_text(label: str, value: Any, limit: int) -> str | None:
    """A short text without control characters, or None."""
    value = _check_short_text(label, value, limit)
    if value is not None:
        _check_control_characters(label, value)
    return value


def _insert_once(session: Session, values: dict[str, Any]) -> Intent:
    """Store the intent in one statement, or return the row that already holds the key."""
    inserted = insert_intent_once(session, values)
    if inserted is not None:
        if inserted.status == PENDING:
            session.info[_WAKE_FLAG] = True
        return inserted
    existing = intent_by_key(session, values["idempotency_key"])
    assert existing is not None, "the conflicting row is committed and visible"
    return existing


def enqueue(
    session: Session,
    *,
    key: str,
    to: str,
    template: str,
    params: dict[str, Any],
    event: str | None = None,
    lane: str | None = None,
    purpose: str | None = None,
    locale: str | None = None,
    expires_at: dt.datetime | None = None,
    recipient_account: str | None = None,
    catalog: TemplateCatalog | None = None,
) -> Intent:
    """Add an email intent to the caller's transaction and return it; never commit.

    The same `key` again returns the existing intent and adds nothing. Bad input
    raises InvalidIntent before anything is written; an invalid setting or
    template folder raises ConfigError (CatalogError) naming it, as at start-up.
    """
    options = _current_options()
    catalog = catalog or options.catalog
    now = utcnow()
    key = _check_key(key)
    _check_control_characters("idempotency key", key)  # it travels in an HTTP header
    recipient = _check_recipient(to)
    params = _check_params(params, options.max_params_bytes)
    settings, version = _rendered_template(catalog, template, params)
    if lane is not None and lane not in LANES:
        raise InvalidIntent(f"unknown lane {lane!r}: expected one of {', '.join(LANES)}")
    row = dict(
        idempotency_key=key,
        message_id=new_message_id(options.message_id_domain),
        event=_check_plain_text("event", event, MAX_EVENT_LENGTH),
        recipient=recipient,
        template=settings.name,
        template_version=version,
        params=params,
        lane=lane or settings.lane,
        purpose=_check_plain_text("purpose", purpose, 100),
        locale=_check_plain_text("locale", locale, 35),
        attempt_count=0,
        next_attempt_at=now,
        created_at=now,
        updated_at=now,
        expires_at=_check_expiry(expires_at, now),
        recipient_account=_check_short_text(
            "recipient_account", recipient_account, MAX_ACCOUNT_LENGTH
        ),  # fmt: skip
    )
    return _insert_once(session, row)


def _rendered_template(catalog: TemplateCatalog, template: str, params: dict[str, Any]):
    """The template's settings and version, once its subject rendered from `params` is
    safe in a header; InvalidIntent otherwise."""
    try:
        settings, version = catalog.resolve(template)
        parts = catalog.render(settings.name, version, params)
    except TemplateError as exc:
        raise InvalidIntent(str(exc)) from None
    _check_header_value("subject", parts.subject)
    return settings, version


def supersede(session: Session, *, key: str, reason: str) -> bool:
    """Cancel the intent holding `key` if it was not sent yet; return whether it was.

    A pending intent, or a failed or dead one an operator might requeue, becomes
    ``cancelled`` with `reason`, in the caller's transaction (never committed
    here). An unknown key or an intent in any other status (being sent, sent,
    ambiguous, ...) is left alone and False returned. Bad input raises
    InvalidIntent before anything is written.
    """
    key = _check_key(key)
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidIntent("a reason is required to supersede an intent")
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidIntent(f"the reason is longer than {MAX_REASON_LENGTH} characters")
    return cancel_unsent(session, key, reason.strip(), utcnow())


@sa_event.listens_for(Session, "after_commit")
def _wake_after_commit(session: Session) -> None:
    """Wake in-process workers once a transaction that enqueued mail commits."""
    if session.info.pop(_WAKE_FLAG, False):
        wakeup.notify()


@sa_event.listens_for(Session, "after_rollback")
def _forget_wake(session: Session) -> None:
    session.info.pop(_WAKE_FLAG, None)
