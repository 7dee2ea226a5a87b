"""One send as it moves from stage to stage: the email composed, the ``data_sent`` mark
committed before the body, the crash points of the tests.

``compose`` makes a claimed intent ready for a transport: the stored template
rendered, bytes on demand. Whatever wrote the row, nothing unsafe reaches a header or
the envelope (``console.mail.header_checks``): a row that fails is a permanent failure
naming the field, never handed to the transport. ``ComposeAhead`` composes the next
waiting email while the relay reads the body before it (local work filling the wait
for the reply); a failure ahead is not kept, the email is composed again in its turn.

``StageMarks`` is the transport's stage callback: before the body it commits the mark,
which is also the last check of the suppression list; the body waits for it, the other
connections do not (the mark is awaited on the engine).

``CrashPoint`` (test only): ``CONSOLE_TEST_CRASH_AT=<point>`` makes the worker SIGKILL
itself at that point; the crash tests kill a real worker at each stage this way,
restart it, and check that nothing was lost or sent twice.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import itertools
import logging
import os
import signal
from collections.abc import Callable

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

log = logging.getLogger("console.worker.loop")


CRASH_POINTS = (
    "claimed",
    "envelope",
    "data_sent",
    "before_record",
)


class CrashPoint:
    """Called at each point of a send; kills the process at the one it was given."""

    def __init__(self, point: str | None) -> None:
        if point is not None and point not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {point!r}: expected one of {CRASH_POINTS}")
        self.point = point

    def __call__(self, reached: str) -> None:
        if reached == self.point:
            log.warning("CONSOLE_TEST_CRASH_AT=%s: killing this worker now", reached)
            os.kill(os.getpid(), signal.SIGKILL)


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
        after_mark: Callable[[], None] | None = None,
    ) -> None:
        self._engine = store
        self._crash_if = crash_if
        self._after_mark = after_mark  # called once the mark is committed, before the body

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
        if self._after_mark is not None:
            self._after_mark()


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
    problem = params_problem(intent.params)
    if problem is not None:
        return SendResult(stage=CLAIMED, error=problem[:500], error_type=RENDER_ERROR)
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


class ComposeAhead:
    """Emails of a batch composed one step ahead of their sending."""

    def __init__(self, compose: Callable[[Claim], Composed], lookahead: int) -> None:
        self._compose = compose
        self._lookahead = max(1, lookahead)  # the claims next in line, one per connection
        self._ready: dict[int, Composed] = {}  # attempt id -> its email, serialized
        self._waiting: collections.deque[Claim] | None = None

    def start(self, waiting: collections.deque[Claim]) -> None:
        """Compose ahead from `waiting`, the claims of a batch not yet taken."""
        self._waiting = waiting
        self._ready.clear()

    def stop(self) -> None:
        """The batch is over: drop what was composed for claims that were not sent."""
        self._waiting = None
        self._ready.clear()

    def schedule(self) -> None:
        """Compose the next waiting email as soon as the event loop waits for the relay."""
        if self._waiting:
            asyncio.get_running_loop().call_soon(self._compose_next)

    def take(self, claim: Claim) -> Composed:
        """The email of `claim`: the one composed ahead, else composed now."""
        ready = self._ready.pop(claim.attempt_id, None)
        return ready if ready is not None else self._compose(claim)

    def _compose_next(self) -> None:
        if not self._waiting:
            return
        for claim in itertools.islice(self._waiting, self._lookahead):
            if claim.attempt_id in self._ready:
                continue
            try:
                email = self._compose(claim)
                if isinstance(email, OutgoingEmail):
                    email.as_bytes()
            except Exception:  # noqa: BLE001 - composed again in its turn, failing there
                return
            self._ready[claim.attempt_id] = email
            return
