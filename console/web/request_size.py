"""A request body past CONSOLE_MAX_REQUEST_BYTES is refused with 413 before anything reads it.

The limit is Flask's ``MAX_CONTENT_LENGTH``: a body that declares a larger length
is refused before the CSRF check, the input guards or a view runs; one sent
without a length (chunked) is cut off at the limit as it is read. The provider
webhooks read their own bodies, each endpoint within its own limit, so they are
let through up to the largest of those (a provider's batch of events).
"""

from __future__ import annotations

from flask import Flask, request
from werkzeug.exceptions import RequestEntityTooLarge

from console.config import Settings
from console.web.busy import answer
from console.web.extensions import current_settings
from console.web.webhooks import MAX_BATCH_BYTES

WEBHOOKS_BLUEPRINT = "webhooks"


def largest_body_bytes(settings: Settings) -> int:
    """The largest body any route of the console reads (a server may refuse larger ones)."""
    return max(settings.max_request_bytes, MAX_BATCH_BYTES)


def _body_limit() -> int:
    settings = current_settings()
    if request.blueprint == WEBHOOKS_BLUEPRINT:
        return largest_body_bytes(settings)
    return settings.max_request_bytes


def _refuse_large_body() -> None:
    request.max_content_length = _body_limit()
    length = request.content_length
    if length is not None and length > request.max_content_length:
        raise RequestEntityTooLarge()


def _too_large(error: RequestEntityTooLarge):
    limit = request.max_content_length or current_settings().max_request_bytes
    message = f"The request is larger than {limit} bytes, the most the console reads."
    return answer(413, "Content Too Large", message)


def init_app(app: Flask) -> None:
    """Check each body's length first, before any other before-request function."""
    app.config["MAX_CONTENT_LENGTH"] = app.extensions["console.settings"].max_request_bytes
    app.before_request_funcs.setdefault(None, []).insert(0, _refuse_large_body)
    app.register_error_handler(RequestEntityTooLarge, _too_large)
