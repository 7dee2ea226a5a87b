"""A real HTTP server on 127.0.0.1 playing the send APIs of Postmark, Mailgun, SendGrid and SES v2.

Each provider answers at its own path, checks its own authentication, and
answers with the shapes its documentation gives (each source is named beside
the role, in console/drill/provider_shapes.py, which the drill's play server
shares). None of them deduplicates a retry: every accepted request is one
more send. The next requests can be scripted to answer a documented error
(a name in the role's ``errors``) or to misbehave: ``429`` (with
``Retry-After``), ``500``, ``503``, ``accept-hang`` (take the message, never
answer), ``accept-reset`` (take it, then hang up without an answer),
``malformed`` (200 with an HTML body), ``huge`` (200 with a 1 MiB body) or
``drop-hang`` (read the request, keep nothing, never answer: a message the
provider never took).

Postmark, Mailgun and SendGrid also answer their lookup APIs (Postmark's
outbound message search, Mailgun's event log, SendGrid's Email Activity) from
the messages they took; ``next_lookup`` scripts those answers: ``500``,
``malformed`` or ``huge``.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from console.drill import provider_shapes as shapes
from console.drill.provider_handler import ProviderHandler
from console.drill.provider_shapes import (  # noqa: F401 - the tests' names for them
    MAILGUN_DOMAIN,
    SES_ACCESS_KEY,
    SES_REGION,
    SES_SECRET_KEY,
    Canned,
    Role,
    as_json,
    ses_role,
    sigv4_valid,
)

HANG_LIMIT_SECONDS = 5.0


def postmark_role(token: str) -> Role:
    """Postmark's send API, and its outbound message search below."""
    role = shapes.postmark_role(token)
    return dataclasses.replace(
        role, lookup_path=re.compile(r"^/messages/outbound$"), lookup=postmark_search
    )


# https://postmarkapp.com/developer/api/messages-api#outbound-message-search (query
# parameters recipient, fromdate, metadata_<key>; the example response's fields)
def postmark_search(query: dict[str, list[str]], sends: list[dict[str, Any]]) -> Canned:
    if "count" not in query or "offset" not in query:
        return as_json(422, {"ErrorCode": 300, "Message": "count and offset are required"})
    wanted = {k[len("metadata_") :]: v[0] for k, v in query.items() if k.startswith("metadata_")}
    recipient = query.get("recipient", [None])[0]
    found = [
        s
        for s in sends
        if (recipient is None or s["fields"].get("To") == recipient)
        and all(s["fields"].get("Metadata", {}).get(k) == v for k, v in wanted.items())
    ]
    messages = [
        {
            "Tag": "",
            "MessageID": s["id"],
            "MessageStream": s["fields"].get("MessageStream"),
            "To": [{"Email": s["fields"].get("To"), "Name": None}],
            "Cc": [],
            "Bcc": [],
            "Recipients": [s["fields"].get("To")],
            "ReceivedAt": "2024-05-20T10:00:00.0000000-04:00",
            "From": s["fields"].get("From"),
            "Subject": s["fields"].get("Subject"),
            "Attachments": [],
            "Status": "Sent",
            "TrackOpens": False,
            "TrackLinks": "None",
            "Metadata": s["fields"].get("Metadata", {}),
            "Sandboxed": False,
        }
        for s in found
    ]
    return as_json(200, {"TotalCount": len(messages), "Messages": messages})


def mailgun_role(api_key: str, domain: str = MAILGUN_DOMAIN) -> Role:
    """Mailgun's send API, and its event log below."""
    role = shapes.mailgun_role(api_key, domain)
    lookup_path = re.compile(rf"^/v3/{re.escape(domain)}/events$")
    return dataclasses.replace(role, lookup_path=lookup_path, lookup=mailgun_events)


# https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/events (filter
# by message-id; items are the event-data of the webhooks, with "paging")
def mailgun_events(query: dict[str, list[str]], sends: list[dict[str, Any]]) -> Canned:
    message_id = query.get("message-id", [""])[0]
    items = [
        {
            "id": f"evt-{uuid.uuid5(uuid.NAMESPACE_URL, s['id']).hex[:22]}",
            "event": "accepted",
            "timestamp": time.time(),
            "recipient": s["fields"].get("to"),
            "method": "HTTP",
            "flags": {"is-authenticated": True, "is-test-mode": False},
            "message": {
                "headers": {
                    "message-id": s["id"].strip("<>"),
                    "to": s["fields"].get("to"),
                    "from": s["fields"].get("from"),
                    "subject": s["fields"].get("subject"),
                }
            },
            "user-variables": {"outbox_ref": s["fields"].get("v:outbox_ref")},
        }
        for s in sends
        if s["id"].strip("<>") == message_id
    ]
    paging = {"next": "https://api.mailgun.net/v3/x/events/next", "previous": "p"}
    return as_json(200, {"items": items, "paging": paging})


def sendgrid_role(api_key: str) -> Role:
    """SendGrid's send API, and its Email Activity below."""
    role = shapes.sendgrid_role(api_key)
    lookup_path = re.compile(r"^/v3/messages(/[^/]+)?$")
    return dataclasses.replace(role, lookup_path=lookup_path, lookup=sendgrid_activity)


# https://www.twilio.com/docs/sendgrid/api-reference/email-activity/filter-all-messages (GET
# /v3/messages, `limit` and a `query` of conditions joined by AND); the answer's fields as in
# the fixtures of StrongGrid, a SendGrid client (Source/StrongGrid.UnitTests/Resources/
# EmailActivitiesTests.cs); a custom argument queried as (unique_args['name']="value"), as
# StrongGrid writes it (Models/Search/Legacy/SearchCriteriaUniqueArg.cs).
_ACTIVITY_CONDITION = re.compile(
    r"""\(?(?:unique_args\['(?P<arg>[^']+)'\]|(?P<field>[a-z_]+))="(?P<value>[^"]*)"\)?"""
)


def sendgrid_activity(query: dict[str, list[str]], sends: list[dict[str, Any]]) -> Canned:
    if query.get("path", [""])[0].startswith("/v3/messages/"):
        return sendgrid_message_details(query["path"][0].rsplit("/", 1)[1], sends)
    conditions = [
        _ACTIVITY_CONDITION.fullmatch(part.strip())
        for part in query.get("query", [""])[0].split(" AND ")
    ]
    if "limit" not in query or not all(conditions):
        message = "invalid query" if "limit" in query else "limit is required"
        return as_json(400, {"errors": [{"message": message, "field": "query"}]})
    found = [s for s in sends if all(_activity_matches(c, s["fields"]) for c in conditions)]
    messages = [
        {
            "from_email": s["fields"]["from"]["email"],
            "msg_id": f"{s['id']}.filter0004p3las1-2776-5ACA5525-31.1",
            "subject": s["fields"].get("subject"),
            "to_email": s["fields"]["personalizations"][0]["to"][0]["email"],
            "status": "delivered",
            "opens_count": 0,
            "clicks_count": 0,
            "last_event_time": "2018-04-08T17:47:18Z",
        }
        for s in found
    ]
    return as_json(200, {"messages": messages})


# https://www.twilio.com/docs/sendgrid/api-reference/email-activity/filter-messages-by-message-id
# (GET /v3/messages/{msg_id}: the list's fields and more, the custom args in `unique_args`).
def sendgrid_message_details(msg_id: str, sends: list[dict[str, Any]]) -> Canned:
    found = [s for s in sends if msg_id.startswith(f"{s['id']}.")]
    if not found:
        return as_json(404, {"errors": [{"message": "message not found"}]})
    fields = found[0]["fields"]
    return as_json(
        200,
        {
            "msg_id": msg_id,
            "to_email": fields["personalizations"][0]["to"][0]["email"],
            "status": "delivered",
            "unique_args": json.dumps(fields.get("custom_args", {})),
        },
    )


def _activity_matches(condition: re.Match[str], fields: dict[str, Any]) -> bool:
    if condition["arg"] is not None:
        return fields.get("custom_args", {}).get(condition["arg"]) == condition["value"]
    if condition["field"] == "to_email":
        return fields["personalizations"][0]["to"][0]["email"] == condition["value"]
    return False


class ProviderApis(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *roles: Role) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.roles = roles
        self.script: collections.deque[str] = collections.deque()
        self.lookup_script: collections.deque[str] = collections.deque()
        self.lookups: list[str] = []  # the path and query of each lookup request
        self.retry_after = "7"
        self.requests: list[dict[str, Any]] = []
        self.first_request_at: float | None = None  # when the first request line arrived
        self.release = threading.Event()  # ends every hanging answer
        self.lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up on a scripted misbehaviour is expected here."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def role(self, name: str) -> Role:
        return next(role for role in self.roles if role.name == name)

    def next(self, *behaviours: str) -> None:
        """Script the next requests (see the module's docstring)."""
        self.script.extend(behaviours)

    def next_lookup(self, *behaviours: str) -> None:
        """Script the next lookup answers: 500, malformed, huge."""
        self.lookup_script.extend(behaviours)


class _Handler(ProviderHandler):
    server: ProviderApis

    def parse_request(self) -> bool:
        with self.server.lock:
            if self.server.first_request_at is None:
                self.server.first_request_at = time.monotonic()
        return super().parse_request()

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        body, headers = self._read_request()
        server = self.server
        role = next((r for r in server.roles if r.path.match(self.path)), None)
        with server.lock:
            behaviour = server.script.popleft() if server.script else "ok"
            server.requests.append(
                {"role": role and role.name, "path": self.path, "headers": headers, "body": body}
            )
        if role is None:
            return self._answer(as_json(404, {"message": "not found"}))
        if not role.authorised(headers, f"{server.base_url}{self.path}", body):
            return self._answer(role.refused)
        self._play(role, behaviour, role.read(headers, body))

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        server = self.server
        path, _, query = self.path.partition("?")
        headers = self._lowered_headers()
        role = next((r for r in server.roles if r.lookup_path and r.lookup_path.match(path)), None)
        with server.lock:
            behaviour = server.lookup_script.popleft() if server.lookup_script else "ok"
            server.lookups.append(self.path)
            sends = list(role.sends) if role else []
        if role is None or role.lookup is None:
            return self._answer(as_json(404, {"message": "not found"}))
        if not role.authorised(headers, f"{server.base_url}{self.path}", b""):
            return self._answer(role.refused)
        if behaviour == "500":
            return self._answer(as_json(500, {"message": "scripted 500"}))
        if behaviour == "malformed":
            return self._answer(as_json(200, {"Messages": "none", "items": 3}))
        if behaviour == "huge":
            return self._answer(Canned(200, b'{"pad": "' + b"x" * (1 << 20) + b'"}'))
        self._answer(role.lookup({**parse_qs(query), "path": [path]}, sends))

    def _play(self, role: Role, behaviour: str, fields: dict[str, Any]) -> None:
        if behaviour in role.errors:
            return self._answer(role.errors[behaviour])
        if behaviour == "429":
            throttled = role.throttled
            extra = (("Retry-After", self.server.retry_after),)
            return self._answer(dataclasses.replace(throttled, headers=throttled.headers + extra))
        if behaviour in ("500", "503"):
            return self._answer(as_json(int(behaviour), {"message": f"scripted {behaviour}"}))
        if behaviour == "malformed":
            return self._answer(Canned(200, b"<html>oops</html>", (("Content-Type", "text/html"),)))
        if behaviour == "huge":
            return self._answer(Canned(200, b'{"pad": "' + b"x" * (1 << 20) + b'"}'))
        if behaviour == "drop-hang":
            self.server.release.wait(HANG_LIMIT_SECONDS)
            return self._hang_up()
        provider_id, answer = role.accepted(fields)
        with self.server.lock:
            role.sends.append({"id": provider_id, "fields": fields})
        if behaviour == "accept-hang":
            self.server.release.wait(HANG_LIMIT_SECONDS)
            return self._hang_up()
        if behaviour == "accept-reset":
            return self._hang_up()
        self._answer(answer)


def start_apis(*roles: Role) -> ProviderApis:
    server = ProviderApis(*roles)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return server


def stop_apis(server: ProviderApis) -> None:
    server.release.set()
    server.shutdown()
    server.server_close()
