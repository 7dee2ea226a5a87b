"""Post/redirect/get: a form's answer is a 303 to a GET page, whether it was done or refused.

So a reload never asks to send the form again, and the address bar never shows
the POST address. The message travels as a flash (category ``success`` or
``error``). Two answers keep their status code because it is part of the public
contract: a stale action's 409 and a refused login's 401/429. Their page names
the GET address it stands for (``g.get_url``); console.js puts it in the address
bar, so a reload reads that page instead of sending the form again.
"""

from __future__ import annotations

from flask import flash as _flash
from flask import g, redirect, url_for

from console.core.readable import sentence
from console.store.actions import StaleAction
from console.words.refusals import said


def done(message: str, endpoint: str, **values):
    """Say `message` on the GET page of `endpoint`, reached by a 303."""
    _flash(message, "success")
    return redirect(url_for(endpoint, **values), code=303)


def refused(message: str, endpoint: str, **values):
    """Say why the form was refused on the GET page of `endpoint`, reached by a 303."""
    _flash(message, "error")
    return redirect(url_for(endpoint, **values), code=303)


def redirect_to(endpoint: str, **values):
    """A 303 to the GET page of `endpoint`, with nothing to say."""
    return redirect(url_for(endpoint, **values), code=303)


def stands_for(endpoint: str, **values) -> None:
    """Name the GET page a page answered to a POST stands for (a 409 or a refused login)."""
    g.get_url = url_for(endpoint, **values)


def refusal_words(not_done: str, exc: Exception) -> str:
    """One sentence: "Not removed: <why>.", or just the reason when it says nothing was done."""
    why = said(exc).strip()
    if "nothing was done" in why.lower() or why.lower().startswith(not_done.lower()):
        return _as_stored(why)
    return sentence(f"{not_done}: {why}")


def _as_stored(text: str) -> str:
    """One sentence of `text`, its first word kept as written when it is an address."""
    if "@" not in text.split(" ", 1)[0]:
        return sentence(text)
    return text[0] + sentence(text)[1:]


def stale_or_refused(exc: Exception, not_done: str, render_stale, endpoint: str, **values):
    """Answer a refused action: a stale one with its page and 409, any other with a 303.

    `render_stale(error)` renders the GET page of `endpoint` with `error` and 409.
    """
    if isinstance(exc, StaleAction):
        stands_for(endpoint, **values)
        return render_stale(refusal_words(not_done, exc))
    return refused(refusal_words(not_done, exc), endpoint, **values)
