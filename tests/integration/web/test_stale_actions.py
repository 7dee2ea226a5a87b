"""Operator actions from a page that went stale act once: the row version, the bulk token.

A tab opened before the worker retried an intent still shows the status the
intent is back in; its form carries the version the operator saw, so acting
from it answers 409 and says what changed. A bulk preview's confirmation is a
one-use token: confirming twice, or again after the browser's Back, acts once.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser

import pytest
from sqlalchemy import select

from console.core.send_result import SendResult
from console.models import AuditEntry, Intent, utcnow
from console.store import intent_actions
from console.transports.memory import MemoryTransport
from console.vocabulary import DATA_SENT, ENVELOPE, REPLY_READ
from console.web.extensions import db

RECIPIENT = "ada@example.com"
REJECTED = SendResult(REPLY_READ, code=554, reply_text="5.7.1 rejected by policy")
DEFERRED = SendResult(ENVELOPE, code=451, reply_text="4.3.0 try again later")
NO_REPLY = SendResult(DATA_SENT, error="connection lost", error_type="SMTPServerDisconnected")
ORDER_PARAMS = {
    "customer_name": "Grace",
    "order_number": "order-1",
    "items": [{"quantity": 1, "name": "Lamp", "price": "30.00"}],
    "total": "30.00",
}


class _Forms(HTMLParser):
    """The forms of a page: id (or action) -> the values of their hidden inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, dict[str, str]] = {}
        self.links: dict[str, str] = {}
        self._form: dict[str, str] | None = None
        self._href: str | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "form":
            self._form = self.forms.setdefault(
                attributes.get("id") or attributes.get("action") or "", {}
            )
        elif tag == "input" and self._form is not None:
            if attributes.get("type") == "hidden":
                self._form[attributes["name"]] = attributes.get("value") or ""
        elif tag == "a":
            self._href = attributes.get("href")

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None
        elif tag == "a":
            self._href = None

    def handle_data(self, data):
        if self._href and data.strip():
            self.links[data.strip()] = self._href


def parsed(page: str) -> _Forms:
    forms = _Forms()
    forms.feed(page)
    return forms


def form_on(client, path: str, form_id: str) -> dict[str, str]:
    """Open `path` as a tab would and return the hidden fields of its form `form_id`."""
    page = client.get(path)
    assert page.status_code == 200
    forms = parsed(page.text).forms
    assert form_id in forms, f"no {form_id} on {path}"
    return forms[form_id]


def confirm_form(page: str) -> dict[str, str] | None:
    """The hidden fields of a bulk preview's confirmation form, if the page offers one."""
    forms = parsed(page).forms
    return forms.get("bulk-confirm-form") or forms.get("/intents/bulk")


def post(client, path: str, fields: dict[str, str], **more):
    return client.post(path, data={**fields, **more})


def intent_state(app, intent_id: int) -> tuple[str, int]:
    with app.app_context():
        row = db.session.execute(
            select(Intent.status, Intent.attempt_count).where(Intent.id == intent_id)
        ).one()
        return row.status, row.attempt_count


def actions_on(app, *intent_ids: int) -> list[str]:
    with app.app_context():
        query = select(AuditEntry.action).where(AuditEntry.intent_id.in_(intent_ids))
        return list(db.session.execute(query.order_by(AuditEntry.id)).scalars())


def run_worker(make_worker, result: SendResult) -> None:
    """One tick of a real worker whose relay answers `result` to every attempt.

    It reads the real clock: an action on the page makes the intent due at the real
    time of the request, however long the steps before it took.
    """
    make_worker(MemoryTransport({RECIPIENT: [result]}), clock=utcnow).run_once()


def test_requeue_from_a_tab_opened_before_a_retry_answers_409(
    app, console_client, add_intent, make_worker
):
    client = console_client("operator", "olga")
    intent_id = add_intent("failed", attempt_count=2)
    path = f"/intents/{intent_id}"
    tab_2 = form_on(client, path, "requeue-form")
    tab_1 = form_on(client, path, "requeue-form")
    assert post(client, f"{path}/requeue", tab_1, reason="relay fixed").status_code == 303
    run_worker(make_worker, REJECTED)
    assert intent_state(app, intent_id) == ("failed", 3), "retried, and failed again"

    response = post(client, f"{path}/requeue", tab_2, reason="relay fixed")
    assert response.status_code == 409
    text = html.unescape(response.text)
    assert "retried since you opened this page: now failed after attempt 3" in text
    assert intent_state(app, intent_id) == ("failed", 3)
    assert actions_on(app, intent_id) == ["requeue"]
    fresh = parsed(response.text).forms["requeue-form"]
    assert fresh["version"] != tab_2["version"], "the 409 page carries the version now"
    assert post(client, f"{path}/requeue", fresh, reason="seen it").status_code == 303


def test_dead_letter_from_a_tab_opened_before_a_retry_answers_409(
    app, console_client, add_intent, make_worker
):
    client = console_client("operator", "olga")
    intent_id = add_intent("pending")
    path = f"/intents/{intent_id}"
    stale = form_on(client, path, "dead-letter-form")
    run_worker(make_worker, DEFERRED)
    assert intent_state(app, intent_id) == ("pending", 1), "tried, pending again"

    response = post(client, f"{path}/dead-letter", stale, reason="campaign cancelled")
    assert response.status_code == 409
    assert "retried since you opened this page: now pending after attempt 1" in html.unescape(
        response.text
    )
    assert intent_state(app, intent_id) == ("pending", 1)
    assert actions_on(app, intent_id) == []


@pytest.mark.parametrize("resolution", ["accepted", "resend", "dead"])
def test_reconcile_from_a_tab_opened_before_a_resend_answers_409(
    app, console_client, add_intent, make_worker, resolution
):
    client = console_client("operator", "olga")
    intent_id = add_intent(
        "ambiguous", template="order-confirmation", params=ORDER_PARAMS, attempt_count=1
    )
    path = f"/intents/{intent_id}"
    tab_2 = form_on(client, path, "reconcile-form")
    tab_1 = form_on(client, path, "reconcile-form")
    resend = post(client, f"{path}/reconcile", tab_1, resolution="resend", reason="not in log")
    assert resend.status_code == 303
    run_worker(make_worker, NO_REPLY)
    assert intent_state(app, intent_id) == ("ambiguous", 2), "resent, outcome unknown again"

    response = post(client, f"{path}/reconcile", tab_2, resolution=resolution, reason="stale")
    assert response.status_code == 409
    assert "retried since you opened this page: now ambiguous after attempt 2" in html.unescape(
        response.text
    )
    assert intent_state(app, intent_id) == ("ambiguous", 2)
    assert actions_on(app, intent_id) == ["reconcile_resend"]


def test_a_provider_event_since_the_page_was_opened_answers_409(app, console_client, add_intent):
    """A fact that leaves status and attempts alone still moves the version."""
    client = console_client("operator", "olga")
    intent_id = add_intent("failed", attempt_count=1)
    path = f"/intents/{intent_id}"
    stale = form_on(client, path, "requeue-form")
    with app.app_context():  # as the provider-event recorder writes a bounce fact
        db.session.query(Intent).filter_by(id=intent_id).update(
            {"bounced_at": utcnow(), "bounce_type": "permanent"}
        )
        db.session.commit()
    response = post(client, f"{path}/requeue", stale, reason="try again")
    assert response.status_code == 409
    assert "a bounce (permanent) was recorded since you opened this page" in html.unescape(
        response.text
    )
    assert intent_state(app, intent_id) == ("failed", 1)


def test_an_unreadable_version_is_refused(app, console_client, add_intent):
    client = console_client("operator", "olga")
    intent_id = add_intent("failed")
    fields = form_on(client, f"/intents/{intent_id}", "requeue-form")
    response = post(
        client, f"/intents/{intent_id}/requeue", {**fields, "version": "forged"}, reason="x"
    )
    assert response.status_code == 303  # refused, not stale: post/redirect/get
    assert "reload the page" in client.get(response.location).text
    assert intent_state(app, intent_id) == ("failed", 0)


def test_store_actions_compare_and_set_on_the_version(app, add_intent):
    intent_id = add_intent("dead", attempt_count=4)
    with app.app_context():
        from console.store import actions

        seen = actions.version_of(db.session.get(Intent, intent_id))
        db.session.rollback()
        db.session.query(Intent).filter_by(id=intent_id).update({"attempt_count": 5})
        db.session.commit()
        with pytest.raises(actions.StaleAction, match="now dead after attempt 5"):
            intent_actions.requeue(
                db.session, intent_id, actor="olga", reason="r", expected_version=seen
            )
        db.session.rollback()
    assert intent_state(app, intent_id) == ("dead", 5)


def test_the_update_itself_compares_every_column_of_the_version(app, add_intent):
    """A write landing between the action's read and its UPDATE makes the UPDATE match nothing."""
    from sqlalchemy.orm import Session

    from console.store import actions

    intent_id = add_intent("failed", attempt_count=1)
    with app.app_context():
        row = actions.load_intent(db.session, intent_id, None, utcnow())
        with Session(db.engine) as worker:  # another writer commits in between
            worker.query(Intent).filter_by(id=intent_id).update({"provider_message_id": "q-7"})
            worker.commit()
        with pytest.raises(actions.StaleAction, match="message id q-7 was recorded"):
            actions.act(
                db.session,
                row,
                action="requeue",
                values=actions.due_now_values(utcnow(), "requeued by olga"),
                actor="olga",
                reason="r",
                now=utcnow(),
            )
        db.session.rollback()
    assert intent_state(app, intent_id) == ("failed", 1)
    assert actions_on(app, intent_id) == []


# -- bulk: a one-use preview --------------------------------------------------------------


def _bring_back(app, make_worker, action: str, ids: list[int]) -> None:
    """Undo the bulk action's effect the way the product would: retry, or a colleague."""
    if action == "requeue":
        run_worker(make_worker, REJECTED)  # retried, and failed again
        return
    with app.app_context():
        for intent_id in ids:
            intent_actions.requeue(db.session, intent_id, actor="bob", reason="changed my mind")
        db.session.commit()


@pytest.mark.parametrize(
    ("action", "status", "acted_status"),
    [("requeue", "failed", "pending"), ("dead_letter", "pending", "dead")],
)
def test_bulk_confirm_then_back_then_confirm_again_acts_once(
    app, console_client, add_intent, make_worker, action, status, acted_status
):
    client = console_client("operator", "olga")
    ids = [add_intent(status, event=f"campaign:{n}") for n in range(3)]
    links = parsed(client.get(f"/intents?q=campaign&status={status}").text).links
    label = {"requeue": "requeue…", "dead_letter": "dead-letter…"}[action]
    preview_path = html.unescape(links[label])
    preview = client.get(preview_path)
    assert f"{action.replace('_', '-')}s 3" in preview.text
    confirm = confirm_form(preview.text)
    assert post(client, "/intents/bulk", confirm, reason="once").status_code == 303
    assert [intent_state(app, i)[0] for i in ids] == [acted_status] * 3
    _bring_back(app, make_worker, action, ids)
    assert [intent_state(app, i)[0] for i in ids] == [status] * 3

    back = client.get(preview_path)  # the browser's Back loads the preview again
    assert back.status_code == 200
    assert "already confirmed" in back.text
    again = confirm_form(back.text) or confirm
    response = post(client, "/intents/bulk", again, reason="twice")
    assert response.status_code == 409
    assert "already confirmed" in response.text
    assert [intent_state(app, i)[0] for i in ids] == [status] * 3
    assert actions_on(app, *ids).count(action) == 3


def test_bulk_confirmation_submitted_twice_acts_once(app, console_client, add_intent):
    client = console_client("operator", "olga")
    ids = [add_intent("failed", event=f"campaign:{n}") for n in range(2)]
    links = parsed(client.get("/intents?q=campaign").text).links
    preview = client.get(html.unescape(links["requeue…"]))
    confirm = confirm_form(preview.text)
    assert post(client, "/intents/bulk", confirm, reason="once").status_code == 303
    with app.app_context():  # failed again, as a worker on a late clock would write it
        db.session.query(Intent).filter(Intent.id.in_(ids)).update(
            {"status": "failed"}, synchronize_session=False
        )
        db.session.commit()
    second = post(client, "/intents/bulk", confirm, reason="twice")
    assert second.status_code == 409
    assert [intent_state(app, i)[0] for i in ids] == ["failed"] * 2
    assert actions_on(app, *ids) == ["requeue", "requeue"]


def test_bulk_token_is_bound_to_its_filter(app, console_client, add_intent):
    client = console_client("operator", "olga")
    campaign = add_intent("failed", event="campaign:1")
    other = add_intent("failed", event="other:1")
    links = parsed(client.get("/intents?q=campaign").text).links
    confirm = confirm_form(client.get(html.unescape(links["requeue…"])).text)
    widened = {**confirm, "q": "", "max_id": str(other)}
    assert post(client, "/intents/bulk", widened, reason="more").status_code == 303
    assert intent_state(app, campaign)[0] == "pending"
    assert intent_state(app, other)[0] == "failed", "the token's filter, not the form's"


def test_an_old_bulk_preview_is_not_confirmed_but_shown_anew(
    app, console_client, add_intent, monkeypatch
):
    from console.web import intents_bulk

    client = console_client("operator", "olga")
    intent_id = add_intent("failed", event="campaign:1")
    links = parsed(client.get("/intents?q=campaign").text).links
    confirm = confirm_form(client.get(html.unescape(links["requeue…"])).text)
    monkeypatch.setattr(intents_bulk, "BULK_TOKEN_MAX_AGE_SECONDS", -1.0)
    response = post(client, "/intents/bulk", confirm, reason="late")
    assert response.status_code == 409
    assert "preview is older than" in response.text
    assert confirm_form(response.text)["token"] != confirm["token"], "a new preview to confirm"
    assert intent_state(app, intent_id)[0] == "failed"
    forged = post(client, "/intents/bulk", {**confirm, "token": "x" + confirm["token"]}, reason="r")
    assert forged.status_code == 409 and "not one this console issued" in forged.text
    assert intent_state(app, intent_id)[0] == "failed"
