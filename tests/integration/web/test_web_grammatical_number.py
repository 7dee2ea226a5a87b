"""Counts and the words around them agree: one intent is "it", several are "them"."""

from __future__ import annotations

import html
import re

from sqlalchemy import select, update

from console.models import Intent, Suppression
from console.web.extensions import db


def text_of(page: str) -> str:
    page = re.sub(r"<wbr>", "", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def post(client, path: str, **form):
    return client.post(path, data={"csrf_token": client.csrf_token, **form})


def _removed_page(app, client, add_intent, held: int) -> str:
    address = f"held{held}@example.com"
    post(client, "/suppressions", address=address, reason="asked")
    for _ in range(held):
        add_intent("suppressed", to=address)
    with app.app_context():
        entry = db.session.scalar(select(Suppression).where(Suppression.recipient == address))
    removed = post(client, f"/suppressions/{entry.id}/remove", reason="resubscribed")
    return text_of(client.get(removed.location).text)


def test_one_intent_held_back_is_requeued_as_it(app, console_client, add_intent):
    client = console_client("operator")
    one = _removed_page(app, client, add_intent, 1)
    assert "held back 1 intent for this address. Requeue it now?" in one, one
    two = _removed_page(app, client, add_intent, 2)
    assert "held back 2 intents for this address. Requeue them now?" in two, two


def test_the_erasure_preview_says_its_attempts_for_one_intent(console_client, add_intent):
    admin = console_client("admin", "dpo")
    add_intent("submitted", to="solo@example.com")
    post(admin, "/erasure/preview", address="solo@example.com", reason="ticket 9")
    said = text_of(admin.get("/erasure").text)
    assert "1 finished intent, with its attempts" in said, said


def test_erasure_is_in_the_admins_navigation_only(console_client):
    nav = re.compile(r'<nav aria-label="Main">.*?</nav>', re.S)
    admin = nav.search(console_client("admin", "dpo").get("/").text).group(0)
    assert 'href="/erasure"' in admin and ">Erasure</a>" in admin
    operator = nav.search(console_client("operator").get("/").text).group(0)
    assert 'href="/erasure"' not in operator


def test_a_bulk_action_says_one_intent_changed_since_in_the_singular(
    app, console_client, add_intent
):
    client = console_client("operator", "olga")
    add_intent("failed", event="campaign:1")
    changing = add_intent("failed", event="campaign:2")
    preview = client.get("/intents/bulk?action=requeue&q=campaign").text
    form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', preview))
    with app.app_context():
        db.session.execute(update(Intent).where(Intent.id == changing).values(status="submitted"))
        db.session.commit()
    done = post(client, "/intents/bulk", **{**form, "reason": "relay back"})
    said = text_of(client.get(done.location).text)
    assert "1 intent of those the preview counted changed since and was left as it is." in said
