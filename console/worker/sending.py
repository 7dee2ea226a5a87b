"""One send as it moves from stage to stage: the email composed, the ``data_sent`` mark
committed before the body, the crash points of the tests.

``compose`` makes a claimed intent ready for a transport: the stored template
rendered, bytes on demand. Whatever wrote the row, nothing unsafe reaches a header or
the envelope (``console.mail.header_checks``): a row that fails is a permanent failure
naming the field, never handed to the transport.

``StageMarks`` is the transport's stage callback: before the body it commits the mark,
which is also the last check of the suppression list; the body waits for it, the other
connections do not (the mark is awaited on the engine).

``CrashPoint`` (test only): ``CONSOLE_TEST_CRASH_AT=<point>`` (or ``<point>:N``, the N-th
time) makes the worker SIGKILL itself at that point; the crash tests kill a real worker at
each stage this way, restart it, and check that nothing was lost or sent twice.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal

from console.core.classify import RENDER_ERROR, UNSAFE_HEADER
from console.core.send_result import SendResult
from console.engine import SUPPRESSED, SWEPT, Engine
from console.mail.catalog import TemplateCatalog
from console.mail.header_checks import UnsafeHeader, check_outgoing
from console.mail.serialize import serialize_message
from console.mail.template_settings import TemplateError
from console.store.claims import Claim
from console.store.json_values import params_problem
from console.transports.base import OutgoingEmail
from console.vocabulary import CLAIMED, DATA_SENT, ENVELOPE
from console.words.params import params_problem_words

log = logging.getLogger("console.worker.loop")


CRASH_POINTS = (
    "claimed",
    "envelope",
    "data_sent",
    "before_record",
)


class CrashPoint:
    """Called at each point of a send; kills the process at the one it was given
    (``point``, or ``point:N`` for the N-th time that point is reached)."""

    def __init__(self, given: str | None) -> None:
        point, _, times = (given or "").partition(":")
        if given is not None and (point not in CRASH_POINTS or not _count(times)):
            raise ValueError(
                f"unknown crash point {given!r}: expected one of {CRASH_POINTS}, "
                "optionally followed by :N"
            )
        self.point = point or None
        self._left = int(times or 1)

    def __call__(self, reached: str) -> None:
        if reached != self.point:
            return
        self._left -= 1
        if self._left == 0:
            log.warning("CONSOLE_TEST_CRASH_AT=%s: killing this worker now", reached)
            os.kill(os.getpid(), signal.SIGKILL)


def _count(text: str) -> bool:
    """An empty count (the first time) or a whole number from 1."""
    return text == "" or (text.isascii() and text.isdigit() and int(text) >= 1)


SUPPRESSED_BEFORE_BODY = "recipient suppressed before its body was sent (envelope reset)"


class LeaseLost(RuntimeError):
    """The lease-expiry sweep took this attempt back before its body was handed over."""


class SuppressedBeforeBody(RuntimeError):
    """The recipient was put on the suppression list after the claim, before the body."""


class StageMarks:
    """The transport's stage callback of one worker: its marks on its engine."""

    def __init__(
        self,
        store: Engine,
        crash_if: CrashPoint,
    ) -> None:
        self._engine = store
        self._crash_if = crash_if

    async def on_stage(self, email: OutgoingEmail, stage: str) -> None:
        """Commit ``data_sent`` before the body; raise (the body must not go) if it cannot."""
        if stage == ENVELOPE:
            self._crash_if("envelope")
        if stage != DATA_SENT:
            return
        refused = await self._engine.mark(email.attempt_id, email.recipient)
        if refused == SUPPRESSED:
            raise SuppressedBeforeBody(f"{email.recipient} was suppressed after the claim")
        if refused == SWEPT:
            raise LeaseLost(f"attempt {email.attempt_id} was swept before its body was sent")
        self._crash_if("data_sent")


def compose(
    claim: Claim,
    catalog: TemplateCatalog,
    *,
    mail_from: str,
    envelope_from: str,
    date: dt.datetime,
    provider: str | None = None,
) -> OutgoingEmail | SendResult:
    """Render the stored template and params, check the headers; a failure is a result.
    With `provider`, the bytes carry the intent's reference in its metadata header."""
    intent = claim.intent
    if (problem := params_problem(intent.params)) is not None:
        error = params_problem_words(problem.unreadable, problem.kind)
        return SendResult(stage=CLAIMED, error=error[:500], error_type=RENDER_ERROR)
    try:
        parts = catalog.render(intent.template, intent.template_version, intent.params or {})
    except (TemplateError, OSError) as error:
        return SendResult(stage=CLAIMED, error=str(error)[:500], error_type=RENDER_ERROR)
    try:
        check_outgoing(
            recipient=intent.recipient,
            message_id=intent.message_id,
            subject=parts.subject,
            idempotency_key=intent.idempotency_key,
        )
    except UnsafeHeader as error:
        return SendResult(stage=CLAIMED, error=str(error)[:500], error_type=UNSAFE_HEADER)

    serialized: list[bytes] = []  # built once, by whoever asks first

    def as_bytes() -> bytes:
        if not serialized:
            serialized.append(
                serialize_message(
                    mail_from=mail_from,
                    recipient=intent.recipient,
                    message_id=intent.message_id,
                    parts=parts,
                    date=date,
                    provider=provider,
                    intent_id=intent.id,
                )
            )
        return serialized[0]

    return OutgoingEmail(
        intent_id=intent.id,
        attempt_id=claim.attempt_id,
        message_id=intent.message_id,
        idempotency_key=intent.idempotency_key,
        mail_from=mail_from,
        envelope_from=envelope_from,
        recipient=intent.recipient,
        subject=parts.subject,
        text=parts.text,
        html=parts.html,
        created_at_epoch=intent.created_at.timestamp(),
        as_bytes=as_bytes,
    )


Composed = OutgoingEmail | SendResult
