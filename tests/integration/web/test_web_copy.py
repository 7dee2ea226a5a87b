"""The words of every page, for every role, in every state: no doubled punctuation, no
sentence said twice, no raw ISO time, no bare second count, no exception name; and the
sentences of the suppression, erasure and refusal pages."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import select

from console.models import AuditEntry, Intent, Suppression
from console.web.extensions import db
from tests.support.console_states import add_every_state, page_problems, pages, repeated_sentences

INLINE_TAGS = re.compile(r"</?(?:a|span|strong|code|em|b|time|wbr|abbr)\b[^>]*>")
BLOCKS = re.compile(r"<(p|li|dd|h1|h2|td)\b[^>]*>(.*?)</\1>", re.DOTALL)


def words(markup: str) -> str:
    """The visible words of a page: no markup, no script or attribute, spaces collapsed."""
    body = markup.split("<body", 1)[-1]
    body = re.sub(r"<(script|style|title)\b.*?</\1>", " ", body, flags=re.DOTALL)
    body = INLINE_TAGS.sub("", body)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body))).strip()


def repeated_in_blocks(markup: str) -> list[str]:
    return [
        said for _, block in BLOCKS.findall(markup) for said in repeated_sentences(words(block))
    ]


def post(client, path: str, **form):
    return client.post(path, data={"csrf_token": client.csrf_token, **form})


@pytest.fixture
def states(app):
    with app.app_context():
        found = add_every_state(db.session)
        db.session.commit()
        return found


@pytest.mark.parametrize("role", ["admin", "operator", "viewer"])
def test_no_page_says_anything_twice_or_raw(app, console_client, states, role):
    client = console_client(role)
    problems = {}
    for path in pages(states):
        response = client.get(path)
        assert response.status_code in (200, 403), (path, response.status_code)
        found = page_problems(words(response.text)) + repeated_in_blocks(response.text)
        if found:
            problems[path] = found
    assert problems == {}


def test_a_stale_refusal_says_nothing_was_done_once(app, console_client, add_intent):
    client = console_client("operator")
    intent_id = add_intent("failed")
    page = post(client, f"/intents/{intent_id}/requeue", reason="x", expected_status="dead")
    assert page.status_code == 409
    [flash] = re.findall(r'<p class="flash flash-error"[^>]*>(.*?)</p>', page.text, re.DOTALL)
    said = words(flash)
    assert said.lower().count("nothing was done") == 1, said
    assert ".." not in said and said.endswith(".")


def test_removed_without_an_address_goes_to_the_list(console_client):
    response = console_client("operator").get("/suppressions/removed")
    assert (response.status_code, response.location) == (303, "/suppressions")


def test_a_removal_says_so_once(app, console_client):
    client = console_client("operator")
    assert (
        post(client, "/suppressions", address="eve@example.com", reason="asked").status_code == 303
    )
    with app.app_context():
        suppression_id = db.session.execute(select(Suppression.id)).scalar_one()
    removed = post(client, f"/suppressions/{suppression_id}/remove", reason="resubscribed")
    page = words(client.get(removed.location).text)
    assert page.count("eve@example.com is no longer suppressed") == 1, page


def test_the_erasure_page_says_what_happens_to_an_address_not_suppressed(app, console_client):
    admin = console_client("admin")
    page = words(admin.get("/erasure").text)
    assert "admins only" in page
    assert "an address that is not suppressed stays unsuppressed" in page
    assert "a suppression stays (as the hash) so no mail goes to it again" not in page
    post(admin, "/erasure/preview", address="erin@example.com", reason="ticket 7")
    preview = admin.get("/erasure").text
    assert 'name="suppress"' in preview
    assert "mail to it can be sent again unless you also suppress it" in words(preview)


def test_an_erasure_can_also_suppress_and_says_so_in_sentences(app, console_client, add_intent):
    admin = console_client("admin")
    add_intent("submitted", to="erin@example.com")
    post(admin, "/erasure/preview", address="erin@example.com", reason="ticket 7")
    done = post(admin, "/erasure", address="erin@example.com", reason="ticket 7", suppress="1")
    assert done.status_code == 303
    shown = admin.get(done.location).text
    [flash] = re.findall(r'<p class="flash flash-success"[^>]*>(.*?)</p>', shown, re.DOTALL)
    said = words(flash)
    assert said.startswith("The erasure forgot addr:")
    assert re.search(r"\. Suppression kept as addr:[0-9a-f]+\.$", said), said
    with app.app_context():
        [kept] = db.session.scalars(select(Suppression.recipient)).all()
        assert kept.startswith("addr:")
        assert db.session.scalars(select(Intent.id)).all() == []
        actions = db.session.scalars(select(AuditEntry.action).order_by(AuditEntry.id)).all()
        assert actions == ["suppression_add", "forget"]
