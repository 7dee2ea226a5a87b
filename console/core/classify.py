"""Turn what a transport saw into an outcome (the outcomes of docs/architecture.md).

``classify(result)`` is a pure function of a ``SendResult``. Operators can move
individual SMTP reply codes or enhanced status codes to another outcome with
``CONSOLE_CLASSIFY_OVERRIDES`` (e.g. ``"552=transient,4.7.1=permanent"``): an
enhanced status override wins over a reply code override.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from console.core.blame import (
    MESSAGE,
    SESSION,
    THROTTLING,
    THROTTLING_HTTP_STATUS,
    is_throttling,
    refusal_blame,
    refused_command,
)
from console.core.classify_http import classify_http
from console.core.outcomes import Classification
from console.core.provider_replies import classify_provider
from console.core.provider_tables import TABLES
from console.core.send_result import SendResult, handed_over
from console.vocabulary import ACCEPTED, AMBIGUOUS, CONNECTING, PERMANENT, TRANSIENT

OVERRIDABLE_OUTCOMES = (TRANSIENT, PERMANENT)

RENDER_ERROR = "RenderError"  # error_type of a message that could not be built
UNSAFE_HEADER = "UnsafeHeader"  # error_type of a row whose header or envelope value is unsafe
# error_types of the SMTP transport's own checks before MAIL FROM (nothing was sent):
SMTPUTF8_NOT_OFFERED = "SmtpUtf8NotOffered"  # a non-ASCII address, a relay without SMTPUTF8
MESSAGE_TOO_BIG = "MessageTooBig"  # larger than the SIZE the relay advertised

_ENHANCED_STATUS = re.compile(r"^([245])\.(\d{1,3})\.(\d{1,3})(?=\s|$)")
_REASON_TEXT_LIMIT = 200


@dataclasses.dataclass(frozen=True)
class Overrides:
    """Reply codes and enhanced status codes whose outcome is configured."""

    by_code: Mapping[int, str] = dataclasses.field(default_factory=dict)
    by_enhanced_status: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def lookup(self, code: int, enhanced_status: str | None) -> str | None:
        if enhanced_status is not None and enhanced_status in self.by_enhanced_status:
            return self.by_enhanced_status[enhanced_status]
        return self.by_code.get(code)


def parse_overrides(text: str | None) -> Overrides:
    """Parse ``"552=transient,4.7.1=permanent"``; ValueError names the bad entry."""
    by_code: dict[int, str] = {}
    by_enhanced: dict[str, str] = {}
    for entry in (text or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        key, _, outcome = (part.strip() for part in entry.partition("="))
        if outcome not in OVERRIDABLE_OUTCOMES:
            raise ValueError(f"{entry!r}: the outcome must be 'transient' or 'permanent'")
        if re.fullmatch(r"[45]\d\d", key):
            by_code[int(key)] = outcome
        elif _ENHANCED_STATUS.fullmatch(key) and key[0] in "45":
            by_enhanced[key] = outcome
        else:
            raise ValueError(f"{entry!r}: expected a 4yz/5yz reply code or an enhanced status")
    return Overrides(by_code, by_enhanced)


def enhanced_status_of(reply_text: str | None) -> str | None:
    """Return the RFC 3463 enhanced status at the start of `reply_text`, if any."""
    match = _ENHANCED_STATUS.match(reply_text or "")
    return ".".join(match.groups()) if match else None


def classify(result: SendResult, overrides: Overrides = Overrides()) -> Classification:
    """Return the outcome of `result`: a message that could not be built or carried first,
    then the HTTP rows or the provider's own table, else the SMTP reply and `overrides`."""
    if result.error_type == RENDER_ERROR:
        return Classification(PERMANENT, _reason("message could not be built", result))
    if result.error_type == UNSAFE_HEADER:
        return Classification(PERMANENT, _reason("unsafe header or envelope value", result))
    if result.error_type == SMTPUTF8_NOT_OFFERED:
        summary = "the relay does not offer SMTPUTF8, which this address needs (RFC 6531: 5.6.7)"
        return Classification(PERMANENT, _reason(summary, result), blamed=MESSAGE)
    if result.error_type == MESSAGE_TOO_BIG:
        summary = "message larger than the relay's advertised SIZE (5.3.4), body not sent"
        return Classification(PERMANENT, _reason(summary, result), blamed=MESSAGE)
    if result.protocol == "http":
        classification = classify_http(result)
        if result.code == THROTTLING_HTTP_STATUS:  # transient, not the provider failing
            return dataclasses.replace(classification, blamed=THROTTLING)
        return classification
    if result.protocol in TABLES:  # a native HTTP provider: its own table
        return classify_provider(result, TABLES[result.protocol])
    return _classify_smtp(result, overrides)


def _classify_smtp(result: SendResult, overrides: Overrides) -> Classification:
    code = result.code
    if code is None:
        if handed_over(result.stage):
            return Classification(AMBIGUOUS, _reason("no reply after the body was sent", result))
        return Classification(TRANSIENT, _reason("nothing was handed over", result))
    if 200 <= code < 300:
        if handed_over(result.stage):
            return Classification(ACCEPTED, _reason("accepted", result))
        return Classification(TRANSIENT, _reason("success reply before the body", result))
    enhanced = result.enhanced_status or enhanced_status_of(result.reply_text)
    command = refused_command(result.error_type, result.stage == CONNECTING)
    blamed = refusal_blame(code, enhanced, result.reply_text, command)
    if blamed == SESSION:
        # The relay refused our session, sender or credentials, never the recipient: the
        # same for every message, so the worker pauses the lane instead of failing intents.
        summary = f"session refused at {command or 'the envelope'}, not the recipient"
        return Classification(TRANSIENT, _reason(summary, result), alert=True, blamed=SESSION)
    if is_throttling(code, enhanced, result.reply_text):
        # Our account's sending rate, not the provider failing: retry, halve the rate.
        summary = "throttled: the provider's sending rate was exceeded"
        return Classification(TRANSIENT, _reason(summary, result), blamed=THROTTLING)
    configured = overrides.lookup(code, enhanced) if 400 <= code < 600 else None
    if configured is not None:
        return Classification(configured, _reason(f"configured {configured}", result))
    if 400 <= code < 500:
        return Classification(TRANSIENT, _reason("temporary failure", result))
    if 500 <= code < 600:
        reason = _reason(f"permanent failure ({blamed})", result)
        return Classification(PERMANENT, reason, blamed=blamed)
    return Classification(AMBIGUOUS, _reason("unexpected reply", result))


def _reason(summary: str, result: SendResult) -> str:
    """Say what happened in one short line: code, enhanced status, stage, reply or error."""
    parts = []
    if result.code is not None:
        parts.append(str(result.code))
    enhanced = result.enhanced_status or enhanced_status_of(result.reply_text)
    if enhanced and result.protocol == "smtp":
        parts.append(enhanced)
    parts.append(f"{summary} at {result.stage}")
    detail = result.reply_text if result.code is not None else result.error
    if detail:
        detail = " ".join(detail.split())[:_REASON_TEXT_LIMIT]
        parts.append(f"({detail})")
    return " ".join(parts)
