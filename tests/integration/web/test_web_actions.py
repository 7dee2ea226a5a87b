"""Operator actions: state rules, audit entries, double submits, suppressions, bulk, users."""

from __future__ import annotations

import datetime as dt
import html
import threading

import pytest
from sqlalchemy import func, select

from console import wakeup
from console.models import AuditEntry, Intent, OperatorUser, Suppression, utcnow
from console.store import accounts, actions, intent_actions, suppressions
from console.web import action_words
from console.web.extensions import db


def intent_row(app, intent_id: int) -> Intent:
    with app.app_context():
        intent = db.session.get(Intent, intent_id)
        db.session.expunge(intent)
        return intent


def audit_entries(app, **where) -> list[AuditEntry]:
    with app.app_context():
        query = select(AuditEntry).filter_by(**where).order_by(AuditEntry.id)
        entries = list(db.session.execute(query).scalars())
        db.session.expunge_all()
        return entries


def post(client, path: str, **form):
    return client.post(path, data={**form, "csrf_token": client.csrf_token})


def refused_page(client, response) -> str:
    """A refused form answers a 303 to a GET page (post/redirect/get); that page's text."""
    assert response.status_code == 303, response.status_code
    page = client.get(response.location)
    assert page.status_code == 200
    return page.text


@pytest.fixture
def woken():
    """Count the wake-ups sent to in-process workers."""
    calls = []
    callback = wakeup.subscribe(lambda: calls.append(1))
    yield calls
    wakeup.unsubscribe(callback)


def test_requeue_makes_each_requeueable_status_pending_and_due_now(
    app, console_client, add_intent, woken
):
    client = console_client("operator", "olga")
    lease_left = utcnow() + dt.timedelta(minutes=5)
    for status in ("failed", "dead", "expired", "cancelled", "ambiguous"):
        intent_id = add_intent(
            status,
            attempt_count=3,
            next_attempt_at=utcnow() + dt.timedelta(hours=1),
            lease_token="old-token",
            lease_expires_at=lease_left,
            expires_at=utcnow() + dt.timedelta(minutes=1) if status == "expired" else None,
        )
        before = utcnow()
        woken.clear()
        response = post(
            client, f"/intents/{intent_id}/requeue", reason="relay fixed", expected_status=status
        )
        assert response.status_code == 303, (status, response.text)
        assert woken == [1], "the worker is told at once"
        intent = intent_row(app, intent_id)
        assert intent.status == "pending"
        assert before <= intent.next_attempt_at <= utcnow()
        assert intent.lease_token is None and intent.lease_expires_at is None
        assert intent.attempt_count == 3, "requeue keeps the count of attempts made"
        assert (intent.expires_at is None) == (status != "expired"), "the app's expiry is kept"
        [entry] = audit_entries(app, intent_id=intent_id)
        assert (entry.actor, entry.action, entry.reason) == ("olga", "requeue", "relay fixed")
        assert (entry.before_status, entry.after_status) == (status, "pending")
        assert entry.target == "ada@example.com"
        assert before <= entry.created_at <= utcnow()


def test_requeue_is_refused_from_other_statuses_and_while_a_lease_is_live(
    app, console_client, add_intent
):
    client = console_client("operator")
    live = add_intent(
        "sending", lease_token="t", lease_expires_at=utcnow() + dt.timedelta(minutes=5)
    )
    response = post(client, f"/intents/{live}/requeue", reason="stuck?")
    assert "live lease" in refused_page(client, response)
    for status in ("pending", "submitted", "suppressed"):
        intent_id = add_intent(status)
        response = post(client, f"/intents/{intent_id}/requeue", reason="why not")
        assert f"it is {status}" in refused_page(client, response), status
        assert intent_row(app, intent_id).status == status
    assert audit_entries(app) == []


def test_requeue_is_refused_once_retention_removed_the_params(app, console_client, add_intent):
    client = console_client("operator")
    intent_id = add_intent("failed", params=None, params_scrubbed_at=utcnow())
    response = post(client, f"/intents/{intent_id}/requeue", reason="try again")
    assert "removed by retention" in refused_page(client, response)
    assert intent_row(app, intent_id).status == "failed"
    assert audit_entries(app) == []


def test_requeue_keeps_the_expiry_the_application_set(app, console_client, add_intent):
    client = console_client("operator")
    expires_at = utcnow() + dt.timedelta(hours=1)
    intent_id = add_intent("failed", expires_at=expires_at)
    response = post(client, f"/intents/{intent_id}/requeue", reason="relay fixed")
    assert response.status_code == 303
    intent = intent_row(app, intent_id)
    assert (intent.status, intent.expires_at) == ("pending", expires_at)


@pytest.mark.parametrize("status", ["failed", "dead", "expired"])
def test_requeue_is_refused_once_the_applications_expiry_has_passed(
    app, console_client, add_intent, status
):
    client = console_client("operator")
    expires_at = utcnow() - dt.timedelta(minutes=5)
    intent_id = add_intent(status, expires_at=expires_at)
    response = post(client, f"/intents/{intent_id}/requeue", reason="try again")
    page = refused_page(client, response)
    assert f"it expired at {expires_at:%Y-%m-%d %H:%M:%S} UTC" in page
    intent = intent_row(app, intent_id)
    assert (intent.status, intent.expires_at) == (status, expires_at)
    assert audit_entries(app) == []


def test_an_action_without_a_reason_changes_nothing(app, console_client, add_intent):
    client = console_client("operator")
    intent_id = add_intent("failed")
    response = post(client, f"/intents/{intent_id}/requeue", reason="   ")
    assert "a reason is required" in refused_page(client, response)
    assert intent_row(app, intent_id).status == "failed"
    assert audit_entries(app) == []


def test_submitting_the_same_action_twice_acts_once(app, console_client, add_intent):
    client = console_client("operator")
    intent_id = add_intent("ambiguous")
    form = dict(reason="provider says sent", resolution="accepted", expected_status="ambiguous")
    first = post(client, f"/intents/{intent_id}/reconcile", **form)
    second = post(client, f"/intents/{intent_id}/reconcile", **form)
    assert (first.status_code, second.status_code) == (303, 409)
    assert "no longer ambiguous" in second.text
    assert len(audit_entries(app, intent_id=intent_id)) == 1
    requeue_form = dict(reason="again", expected_status="failed")
    other = add_intent("failed")
    assert post(client, f"/intents/{other}/requeue", **requeue_form).status_code == 303
    assert post(client, f"/intents/{other}/requeue", **requeue_form).status_code == 409
    assert len(audit_entries(app, intent_id=other)) == 1


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_two_operators_acting_at_the_same_moment_act_once(app, add_intent):
    """The second transaction waits on the row, then finds the status changed."""
    intent_id = add_intent("dead")
    outcome: dict[str, object] = {}
    engine = None
    with app.app_context():
        engine = db.engine
    from sqlalchemy.orm import Session

    def second_operator(started: threading.Event):
        with Session(engine) as session:
            started.set()
            try:
                intent_actions.requeue(session, intent_id, actor="bob", reason="b")
                session.commit()
                outcome["bob"] = "acted"
            except actions.StaleAction:
                outcome["bob"] = "stale"

    with Session(engine) as first:
        intent_actions.requeue(first, intent_id, actor="ann", reason="a")
        started = threading.Event()
        thread = threading.Thread(target=second_operator, args=(started,))
        thread.start()
        started.wait(5)
        thread.join(0.5)
        assert thread.is_alive(), "the second update must wait for the first transaction"
        first.commit()
    thread.join(10)
    assert outcome == {"bob": "stale"}
    assert [entry.actor for entry in audit_entries(app, intent_id=intent_id)] == ["ann"]


def test_dead_letter_stops_a_pending_intent_only(app, console_client, add_intent):
    client = console_client("operator", "olga")
    pending = add_intent("pending")
    response = post(client, f"/intents/{pending}/dead-letter", reason="customer left")
    assert response.status_code == 303
    intent = intent_row(app, pending)
    assert intent.status == "dead" and "olga" in intent.status_reason
    [entry] = audit_entries(app, intent_id=pending)
    assert (entry.action, entry.before_status, entry.after_status) == (
        "dead_letter",
        "pending",
        "dead",
    )
    submitted = add_intent("submitted")
    response = post(client, f"/intents/{submitted}/dead-letter", reason="x")
    assert "Nothing was done" in refused_page(client, response)
    assert intent_row(app, submitted).status == "submitted"


def test_reconcile_mark_accepted_records_the_provider_id(app, console_client, add_intent):
    client = console_client("operator")
    intent_id = add_intent("ambiguous", attempt_count=1)
    response = post(
        client,
        f"/intents/{intent_id}/reconcile",
        resolution="accepted",
        provider_message_id="  relay-queue-4711 ",
        reason="found in the relay log",
    )
    assert response.status_code == 303
    intent = intent_row(app, intent_id)
    assert intent.status == "submitted" and intent.submitted_at is not None
    assert intent.provider_message_id == "relay-queue-4711"
    [entry] = audit_entries(app, intent_id=intent_id)
    assert entry.action == "reconcile_accepted"
    assert entry.details == {"resolution": "accepted", "provider_message_id": "relay-queue-4711"}
    page = client.get(f"/intents/{intent_id}").text
    assert "Operator: reconcile accepted" in page and "found in the relay log" in page


def test_reconcile_resend_keeps_the_identity_and_wakes_the_worker(
    app, console_client, add_intent, woken
):
    client = console_client("operator")
    intent_id = add_intent("ambiguous", attempt_count=2, lease_token="t")
    original = intent_row(app, intent_id)
    woken.clear()
    response = post(
        client, f"/intents/{intent_id}/reconcile", resolution="resend", reason="not in relay log"
    )
    assert response.status_code == 303
    intent = intent_row(app, intent_id)
    assert intent.status == "pending" and intent.lease_token is None
    assert intent.message_id == original.message_id
    assert intent.idempotency_key == original.idempotency_key
    assert intent.attempt_count == 2
    assert woken == [1]


def test_reconcile_dead_letter_and_refusals(app, console_client, add_intent):
    client = console_client("operator")
    intent_id = add_intent("ambiguous")
    form = dict(resolution="dead", reason="duplicate would hurt")
    assert post(client, f"/intents/{intent_id}/reconcile", **form).status_code == 303
    assert intent_row(app, intent_id).status == "dead"
    pending = add_intent("pending")
    refused_page(client, post(client, f"/intents/{pending}/reconcile", **form))
    assert intent_row(app, pending).status == "pending"
    ambiguous = add_intent("ambiguous")
    response = post(client, f"/intents/{ambiguous}/reconcile", resolution="maybe", reason="x")
    assert "unknown resolution" in refused_page(client, response)
    assert intent_row(app, ambiguous).status == "ambiguous"
    assert post(client, "/intents/999999/requeue", reason="x").status_code == 404


def test_requeue_warns_when_the_recipient_is_suppressed(app, console_client, add_intent):
    client = console_client("operator")
    intent_id = add_intent("failed", to="Blocked@Example.com")
    with app.app_context():
        db.session.add(
            Suppression(recipient="blocked@example.com", reason="complaint", created_at=utcnow())
        )
        db.session.commit()
    page = client.get(f"/intents/{intent_id}").text
    assert 'id="suppression-warning"' in page
    response = post(client, f"/intents/{intent_id}/requeue", reason="try anyway")
    followed = client.get(response.headers["Location"]).text
    assert "is on the suppression list" in followed


def test_requeue_warns_when_the_template_max_age_has_passed(app, add_intent):
    fresh = add_intent("expired")
    stale = add_intent("expired", created_at=utcnow() - dt.timedelta(minutes=11))
    with app.app_context():
        ten_minutes = 600.0  # the "expired" template's max age, given by the caller
        fresh_result = intent_actions.requeue(
            db.session, fresh, actor="o", reason="r", max_age_seconds=ten_minutes
        )
        assert not fresh_result.past_max_age
        stale_result = intent_actions.requeue(
            db.session, stale, actor="o", reason="r", max_age_seconds=ten_minutes
        )
        assert stale_result.past_max_age
    words = action_words.requeue_warning(
        stale_result, recipient="a@x.com", template="expired", max_age_seconds=ten_minutes
    )
    assert "useless after 10 min" in words


def test_preview_renders_the_message_and_is_audited(app, console_client, add_intent):
    client = console_client("operator", "olga")
    intent_id = add_intent("pending")
    response = post(client, f"/intents/{intent_id}/preview")
    assert response.status_code == 303 and "preview=" in response.location
    page = client.get(response.location).text
    assert "000001" in page  # the login code from the params
    assert html.escape(intent_row(app, intent_id).message_id) in page
    fragment = client.post(
        f"/intents/{intent_id}/preview",
        data={"csrf_token": client.csrf_token},
        headers={"HX-Request": "true"},
    )
    assert fragment.status_code == 200 and "000001" in fragment.text
    assert "<nav" not in fragment.text, "htmx swaps the message in place"
    forged = client.get(f"/intents/{intent_id}?preview=x{response.location.split('=')[-1]}")
    assert "Message preview" not in forged.text
    viewer = console_client("viewer", "vic")
    assert "Message preview" not in viewer.get(response.location).text
    entries = audit_entries(app, intent_id=intent_id)
    assert [(entry.actor, entry.action) for entry in entries] == [("olga", "preview")] * 2
    assert len(audit_entries(app, action="preview")) == 2, "reading the link again audits nothing"
    with app.app_context():
        db.session.query(Intent).filter_by(id=intent_id).update(
            {"params": None, "params_scrubbed_at": utcnow()}
        )
        db.session.commit()
    scrubbed = post(client, f"/intents/{intent_id}/preview")
    assert "scrubbed" in client.get(scrubbed.location).text


def test_suppression_add_remove_and_release_what_it_held_back(
    app, console_client, add_intent, woken
):
    client = console_client("operator", "olga")
    response = post(client, "/suppressions", address=" Eve@Example.COM ", reason="asked by phone")
    assert response.status_code == 303
    duplicate = post(client, "/suppressions", address="eve@example.com", reason="again")
    assert duplicate.status_code == 409 and "already on the suppression list" in duplicate.text
    assert 'name="console-get-url" content="/suppressions' in duplicate.text
    invalid = post(client, "/suppressions", address="not an address", reason="x")
    assert invalid.location.endswith("/suppressions?address=not+an+address")
    page = refused_page(client, invalid)
    assert "Not suppressed:" in page and 'value="not an address"' in page
    with app.app_context():
        suppression = db.session.execute(select(Suppression)).scalar_one()
    assert (suppression.recipient, suppression.created_by) == ("eve@example.com", "olga")
    held = [add_intent("suppressed", to="eve@example.com") for _ in range(2)]
    unrelated = add_intent("suppressed", to="zed@example.com")
    woken.clear()
    assert "eve@example.com" in client.get("/suppressions?q=EVE").text

    removed = post(client, f"/suppressions/{suppression.id}/remove", reason="resubscribed")
    assert removed.status_code == 303
    assert removed.location.endswith("/suppressions/removed?recipient=eve@example.com")
    page = client.get(removed.location).text
    assert "is no longer suppressed." in page and "held back <strong>2</strong> intents" in page
    assert post(client, f"/suppressions/{suppression.id}/remove", reason="x").status_code == 409
    released = post(client, "/suppressions/release", recipient="eve@example.com", reason="ok")
    assert released.status_code == 303
    assert [intent_row(app, i).status for i in held] == ["pending", "pending"]
    assert intent_row(app, unrelated).status == "suppressed"
    assert woken == [1]
    again = post(client, "/suppressions/release", recipient="eve@example.com", reason="ok")
    assert again.status_code == 303
    actions = [(e.action, e.target) for e in audit_entries(app)]
    assert actions == [
        ("suppression_add", "eve@example.com"),
        ("suppression_remove", "eve@example.com"),
        ("requeue", "eve@example.com"),
        ("requeue", "eve@example.com"),
    ]


def test_release_is_refused_while_the_address_is_still_suppressed(app, console_client, add_intent):
    client = console_client("operator")
    post(client, "/suppressions", address="eve@example.com", reason="bounced")
    intent_id = add_intent("suppressed", to="eve@example.com")
    response = post(client, "/suppressions/release", recipient="eve@example.com", reason="x")
    assert "still suppressed" in refused_page(client, response)
    assert intent_row(app, intent_id).status == "suppressed"


def _bulk_world(app, add_intent) -> dict[str, list[int]]:
    with app.app_context():
        db.session.add(
            Suppression(recipient="gone@example.com", reason="bounce", created_at=utcnow())
        )
        db.session.commit()
    return {
        "failed": [add_intent("failed", event=f"campaign:{n}") for n in range(4)],
        "suppressed_recipient": [add_intent("dead", event="campaign:x", to="gone@example.com")],
        "submitted": [add_intent("submitted", event=f"campaign:s{n}") for n in range(3)],
        "elsewhere": [add_intent("failed", event="other:1")],
    }


def test_bulk_requeue_previews_then_acts_once_after_confirmation(app, console_client, add_intent):
    client = console_client("operator", "olga")
    world = _bulk_world(app, add_intent)
    preview = client.get("/intents/bulk?action=requeue&q=campaign")
    assert preview.status_code == 200
    assert "requeues 4; 1 suppressed recipient skipped; 3 already submitted" in preview.text
    assert all(intent_row(app, i).status == "failed" for i in world["failed"])

    form = dict(
        action="requeue",
        q="campaign",
        max_id=str(max(max(ids) for ids in world.values())),
        previewed_at=utcnow().isoformat(),
        reason="relay was down",
    )
    late = add_intent("failed", event="campaign:late")
    no_reason = post(client, "/intents/bulk", **{**form, "reason": ""})
    assert no_reason.location.startswith("/intents/bulk?action=requeue")
    assert "Nothing was done: a reason is required." in refused_page(client, no_reason)
    assert post(client, "/intents/bulk", **form).status_code == 303
    assert [intent_row(app, i).status for i in world["failed"]] == ["pending"] * 4
    assert intent_row(app, world["suppressed_recipient"][0]).status == "dead"
    assert intent_row(app, world["elsewhere"][0]).status == "failed"
    assert intent_row(app, late).status == "failed", "created after the preview"
    entries = audit_entries(app, action="requeue")
    assert len(entries) == 4 and all(e.details == {"bulk": True} for e in entries)

    with app.app_context():  # the worker fails them again, before the second click lands
        db.session.query(Intent).filter(Intent.id.in_(world["failed"])).update(
            {"status": "failed"}, synchronize_session=False
        )
        db.session.commit()
    assert post(client, "/intents/bulk", **form).status_code == 303
    assert len(audit_entries(app, action="requeue")) == 4, "the second submit acts on nothing"


def test_bulk_requeue_skips_intents_whose_params_retention_removed(app, console_client, add_intent):
    client = console_client("operator")
    kept = add_intent("failed", event="campaign:1")
    scrubbed = add_intent("dead", event="campaign:2", params=None, params_scrubbed_at=utcnow())
    preview = client.get("/intents/bulk?action=requeue&q=campaign")
    assert "requeues 1; 1 with params removed by retention skipped" in preview.text
    form = dict(
        action="requeue",
        q="campaign",
        max_id=str(scrubbed),
        previewed_at=utcnow().isoformat(),
        reason="relay was down",
    )
    assert post(client, "/intents/bulk", **form).status_code == 303
    assert intent_row(app, kept).status == "pending"
    assert intent_row(app, scrubbed).status == "dead"


def test_bulk_requeue_skips_intents_past_their_expiry_and_keeps_the_others(
    app, console_client, add_intent
):
    client = console_client("operator")
    later = utcnow() + dt.timedelta(hours=1)
    kept = add_intent("failed", event="campaign:1", expires_at=later)
    past = add_intent("expired", event="campaign:2", expires_at=utcnow() - dt.timedelta(minutes=5))
    preview = client.get("/intents/bulk?action=requeue&q=campaign")
    assert "requeues 1; 1 past their expiry skipped" in preview.text
    form = dict(
        action="requeue",
        q="campaign",
        max_id=str(past),
        previewed_at=utcnow().isoformat(),
        reason="relay was down",
    )
    assert post(client, "/intents/bulk", **form).status_code == 303
    assert (intent_row(app, kept).status, intent_row(app, kept).expires_at) == ("pending", later)
    assert intent_row(app, past).status == "expired"


def test_bulk_requeue_skips_an_intent_whose_expiry_passed_after_the_preview(app, add_intent):
    from console.store import bulk_actions
    from console.store.intent_search import SearchFilters

    soon = utcnow() + dt.timedelta(minutes=1)
    intent_id = add_intent("failed", event="campaign:1", expires_at=soon)
    filters = SearchFilters.from_args({"q": "campaign"})
    with app.app_context():
        preview = bulk_actions.preview_bulk(db.session, filters, "requeue")
        assert preview.will_act == 1
        acted = bulk_actions.apply_bulk(
            db.session,
            filters,
            "requeue",
            actor="olga",
            reason="relay was down",
            max_id=preview.max_id,
            previewed_at=preview.previewed_at,
            now=soon + dt.timedelta(seconds=1),
        )
        db.session.commit()
    assert acted == 0
    assert intent_row(app, intent_id).status == "failed"


def test_bulk_dead_letter_over_a_status_filter(app, console_client, add_intent):
    client = console_client("operator")
    pending = [add_intent("pending", lane="bulk") for _ in range(3)]
    critical = add_intent("pending", lane="critical")
    preview = client.get("/intents/bulk?action=dead_letter&status=pending&lane=bulk")
    assert "dead-letters 3" in preview.text
    form = dict(
        action="dead_letter",
        status="pending",
        lane="bulk",
        max_id=str(critical),
        previewed_at=utcnow().isoformat(),
        reason="campaign cancelled",
    )
    assert post(client, "/intents/bulk", **form).status_code == 303
    assert [intent_row(app, i).status for i in pending] == ["dead"] * 3
    assert intent_row(app, critical).status == "pending"
    assert client.get("/intents/bulk?action=explode").status_code == 400
    assert post(client, "/intents/bulk", **{**form, "action": "explode"}).status_code == 400


def test_admin_creates_and_deactivates_users(app, console_client):
    client = console_client("admin", "root")
    form = dict(username="sam", password="long enough", role="viewer")
    assert post(client, "/users", **form).status_code == 303
    for refused in (
        form,
        dict(username="x", password="short", role="viewer"),
        dict(username="y", password="long enough", role="god"),
    ):
        response = post(client, "/users", **refused)
        assert response.status_code == 303 and "/users?username=" in response.location
        assert "Not created:" in client.get(response.location).text
    with app.app_context():
        sam = db.session.execute(select(OperatorUser).filter_by(username="sam")).scalar_one()
        root = db.session.execute(select(OperatorUser).filter_by(username="root")).scalar_one()
        assert sam.password_hash.startswith("scrypt") and "long enough" not in sam.password_hash
    sam_client = app.test_client()
    with sam_client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "t"
    login = dict(username="sam", password="long enough", csrf_token="t")
    assert sam_client.post("/login", data=login).status_code == 302

    assert post(client, f"/users/{sam.id}/deactivate", reason="left").status_code == 303
    assert post(client, f"/users/{sam.id}/deactivate", reason="left").status_code == 409
    assert sam_client.get("/").status_code == 302, "a deactivated user is logged out"
    refused = post(client, f"/users/{root.id}/deactivate", reason="oops")
    assert refused.status_code == 303 and "your own account" in client.get("/users").text
    assert post(client, f"/users/{sam.id}/activate").status_code == 303
    actions = [(e.action, e.target) for e in audit_entries(app)]
    assert actions == [
        ("user_create", "sam"),
        ("user_deactivate", "sam"),
        ("user_activate", "sam"),
    ]


def test_the_last_active_admin_cannot_be_deactivated(app):
    with app.app_context():
        from console.store.accounts import create_user

        create_user(db.session, "only-admin", "long enough", "admin")
        db.session.commit()
        admin_id = db.session.execute(select(OperatorUser.id)).scalar_one()
        with pytest.raises(actions.ActionRefused, match="last active admin"):
            accounts.set_user_active(
                db.session, admin_id, False, actor="someone-else", reason="left"
            )


def test_audit_page_lists_every_action_newest_first_in_pages(app, console_client):
    client = console_client("operator")
    with app.app_context():
        for number in range(60):
            suppressions.add_suppression(
                db.session, f"user{number}@example.com", actor="olga", reason=f"reason {number}"
            )
        db.session.commit()
        total = db.session.execute(select(func.count()).select_from(AuditEntry)).scalar()
    assert total == 60
    first = client.get("/audit").text
    assert "reason 59" in first and "reason 10" in first and "reason 9<" not in first
    older = first.split('href="/audit?before=')[1].split('"')[0]
    second = client.get(f"/audit?before={older}").text
    assert "reason 9<" in second and "reason 0<" in second and "reason 10<" not in second
