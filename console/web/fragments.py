"""When a view answers with a fragment: an htmx request that is not a history restore.

htmx restores a page the browser goes Back or Forward to by asking for its URL
with `HX-Request: true` and `HX-History-Restore-Request: true`, and puts what
comes back in place of the whole body; such a request gets the full page. A
response chosen by `request.htmx` says `Vary: HX-Request`, so no cache hands
the fragment to a plain page load or the page to htmx.
"""

from __future__ import annotations

from flask import Flask, Response, request
from htmx_flask.requests import HtmxAwareRequest, HtmxHeaders

VARY_HEADER = "HX-Request"


class FragmentAwareHeaders(HtmxHeaders):
    """`request.htmx`: true for an htmx request that wants a fragment; notes it was asked."""

    consulted = False

    def __bool__(self) -> bool:
        self.consulted = True
        return super().__bool__() and not self.history_restore_request


class FragmentAwareRequest(HtmxAwareRequest):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.htmx = FragmentAwareHeaders(self.headers)


def _vary_on_htmx(response: Response) -> Response:
    headers = getattr(request, "htmx", None)
    if isinstance(headers, FragmentAwareHeaders) and headers.consulted:
        response.vary.add(VARY_HEADER)
    return response


def init_app(app: Flask) -> None:
    """Make `request.htmx` false for history restores and mark responses that depend on it."""
    app.request_class = FragmentAwareRequest
    app.after_request(_vary_on_htmx)
