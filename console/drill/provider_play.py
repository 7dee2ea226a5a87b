"""The drill's local HTTP server playing the configured provider's send API (with
``CONSOLE_TRANSPORT=http``), on 127.0.0.1, a free port, misbehaving on cue.

It plays one role of console.drill.provider_shapes: the provider's path, authentication
and documented answers. Each recipient gets a list of answers as at the SMTP relay
(console.drill.relay), one a request (the last repeats); a recipient without one is
accepted. An answer is ``"250"`` (the provider's 200 or 202 with a new id), ``"429"``
(its throttling answer with ``Retry-After: 1``), ``"503"`` (unavailable), ``"permanent"``
(its documented refusal of this message for good), ``"stall"`` (the request taken, no
answer until the client gives up) or ``"hangup"`` (taken, the connection dropped). An
SMTP reply in a script is read by its class: a 4yz is ``"503"``, a 5yz ``"permanent"``.
Where the provider deduplicates (Resend's ``Idempotency-Key``) a repeated key gets the
first answer and makes no new email. Every request is kept with our reference
(``outbox_ref``, which names the Message-ID), so a drill counts the emails of one
Message-ID as at the relay. Nothing is ever passed on.
"""

from __future__ import annotations

import collections
import json
import os
import secrets
import threading
from collections.abc import Iterable
from http.server import ThreadingHTTPServer
from typing import Any

from console.drill import provider_shapes as shapes
from console.drill.provider_handler import ProviderHandler
from console.drill.relay import ACCEPT, HANGUP, STALL, STALL_SECONDS, Arrival
from console.events.metadata import check_of, parse_reference, reference_in

THROTTLED, UNAVAILABLE, PERMANENT = "429", "503", "permanent"
RETRY_AFTER_SECONDS = "1"
UNAVAILABLE_ANSWER = shapes.as_json(503, {"message": "Service Unavailable"})
AWS_SETTINGS_LEFT_OUT = ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE",
                         "AWS_DEFAULT_PROFILE")  # fmt: skip


def _first(value: Any) -> str:
    return str(value[0] if isinstance(value, list) and value else value or "")


def _tags(entries: Any) -> dict[str, Any]:
    """SES's ``EmailTags`` (``Name``, ``Value``) as a mapping."""
    return {e.get("Name"): e.get("Value") for e in entries or [] if isinstance(e, dict)}


# Where each provider's request carries the recipient and our reference (docs/http-providers.md).
RECIPIENT = {
    "resend": lambda f: _first(f.get("to")),
    "postmark": lambda f: _first(f.get("To")),
    "mailgun": lambda f: _first(f.get("to")),
    "sendgrid": lambda f: str(f["personalizations"][0]["to"][0].get("email", "")),
    "ses": lambda f: _first(f.get("Destination", {}).get("ToAddresses")),
}
REFERENCE = {
    "resend": lambda f: reference_in(f.get("tags")),
    "postmark": lambda f: reference_in(f.get("Metadata")),
    "mailgun": lambda f: reference_in({"outbox_ref": f.get("v:outbox_ref")}),
    "sendgrid": lambda f: reference_in(f.get("custom_args")),
    "ses": lambda f: reference_in(_tags(f.get("EmailTags"))),
}
PLAYED = tuple(RECIPIENT)


def http_answer(answer: str) -> str:
    """A script's answer as this server plays it (an SMTP reply read by its class)."""
    if answer in (ACCEPT, STALL, HANGUP, THROTTLED, UNAVAILABLE, PERMANENT):
        return answer
    return UNAVAILABLE if answer.startswith("4") else PERMANENT


class ProviderPlay(ThreadingHTTPServer):
    """The play server; ``environment`` gives the workers its address and credentials."""

    daemon_threads = True
    transport = "http"

    def __init__(self, provider: str | None, mailgun_domain: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.provider = provider or "resend"
        self.key = f"drill-{secrets.token_hex(8)}"
        self.mailgun_domain = mailgun_domain or shapes.MAILGUN_DOMAIN
        self.role = self._role()
        self.scripts: dict[str, list[str]] = {}
        self._seen: collections.Counter[str] = collections.Counter()
        self.by_key: dict[str, tuple[str, shapes.Canned]] = {}
        self.kept: list[tuple[str | None, Arrival]] = []  # (the reference's check, arrival)
        self.release = threading.Event()  # ends every stalled answer
        self.lock = threading.Lock()

    def _role(self) -> shapes.Role:
        if self.provider == "mailgun":
            return shapes.mailgun_role(self.key, self.mailgun_domain)
        if self.provider == "ses":
            return shapes.ses_role()
        return {"resend": shapes.resend_role, "postmark": shapes.postmark_role,
                "sendgrid": shapes.sendgrid_role}[self.provider](self.key)  # fmt: skip

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up on a stalled answer is expected here."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def honours_keys(self) -> bool:
        return self.role.honours_keys

    def environment(self, environ: dict[str, str]) -> None:
        """Point the workers' settings at this server, with its key (or AWS credentials)."""
        environ.update(CONSOLE_TRANSPORT="http", CONSOLE_PROVIDER=self.provider,
                       CONSOLE_HTTP_PROVIDER_URL=self.url)  # fmt: skip
        if self.provider == "ses":
            for name in AWS_SETTINGS_LEFT_OUT:
                environ.pop(name, None)
            environ.update(
                AWS_ACCESS_KEY_ID=shapes.SES_ACCESS_KEY,
                AWS_SECRET_ACCESS_KEY=shapes.SES_SECRET_KEY,
                AWS_REGION=shapes.SES_REGION,
                AWS_DEFAULT_REGION=shapes.SES_REGION,
                AWS_CONFIG_FILE=os.devnull,
                AWS_SHARED_CREDENTIALS_FILE=os.devnull,
            )
        else:
            environ["CONSOLE_HTTP_PROVIDER_KEY"] = self.key
        if self.provider == "mailgun":
            environ["CONSOLE_MAILGUN_DOMAIN"] = self.mailgun_domain

    def script(self, recipient: str, answers: Iterable[str]) -> None:
        """Answer `recipient`'s first, second... request with `answers` (the last repeats)."""
        with self.lock:
            self.scripts[recipient.lower()] = [http_answer(a) for a in answers]

    def answer_for(self, recipient: str) -> str:
        with self.lock:
            script = self.scripts.get(recipient.lower(), [ACCEPT])
            index = min(self._seen[recipient.lower()], len(script) - 1)
            self._seen[recipient.lower()] += 1
        return script[index]

    def take(self, key: str | None, fields: dict[str, Any]) -> tuple[str, shapes.Canned, bool]:
        """The provider takes one email: its id, its answer, whether it is a new email."""
        with self.lock:
            if key and key in self.by_key:
                return (*self.by_key[key], False)
            provider_id, answer = self.role.accepted(fields)
            if key:
                self.by_key[key] = (provider_id, answer)
            return provider_id, answer, True

    def keep(self, fields: dict[str, Any], recipient: str, answer: str, new: bool) -> None:
        reference = REFERENCE[self.provider](fields)
        parsed = parse_reference(reference) if reference else None
        content = json.dumps(fields, ensure_ascii=False).encode()
        arrival = Arrival(recipient, reference, answer, content, duplicate=not new)
        with self.lock:
            self.kept.append((parsed[1] if parsed else None, arrival))

    def arrivals(self, message_id: str | None = None) -> list[Arrival]:
        """The requests taken, oldest first; only those naming `message_id` when given."""
        check = check_of(message_id) if message_id is not None else None
        with self.lock:
            kept = list(self.kept)
        return [a for c, a in kept if check is None or c == check]

    def start(self) -> ProviderPlay:
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                         name="drill-provider", daemon=True).start()  # fmt: skip
        return self

    def stop(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()

    def __enter__(self) -> ProviderPlay:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class _Handler(ProviderHandler):
    server: ProviderPlay

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        body, headers = self._read_request()
        server, role = self.server, self.server.role
        if not role.path.match(self.path):
            return self._answer(shapes.as_json(404, {"message": "not found"}))
        if not role.authorised(headers, f"{server.url}{self.path}", body):
            return self._answer(role.refused)
        fields = role.read(headers, body)
        recipient = RECIPIENT[server.provider](fields)
        answer = server.answer_for(recipient)
        if answer in (ACCEPT, STALL, HANGUP):
            key = headers.get("idempotency-key") if role.honours_keys else None
            provider_id, canned, new = server.take(key, fields)
            said = f"{canned.status} {provider_id}" if answer == ACCEPT else answer
            server.keep(fields, recipient, said, new)
            if answer == STALL:
                server.release.wait(STALL_SECONDS)
            if answer != ACCEPT:
                return self._hang_up()
            return self._answer(canned)
        canned = self._refusal(answer)
        server.keep(fields, recipient, f"{canned.status} {answer}", True)
        self._answer(canned)

    def _refusal(self, answer: str) -> shapes.Canned:
        role = self.server.role
        if answer == THROTTLED:
            extra = (("Retry-After", RETRY_AFTER_SECONDS),)
            return shapes.Canned(role.throttled.status, role.throttled.body,
                                 role.throttled.headers + extra)  # fmt: skip
        if answer == UNAVAILABLE:
            return UNAVAILABLE_ANSWER
        return role.errors[role.permanent]
