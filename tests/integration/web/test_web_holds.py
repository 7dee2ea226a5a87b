"""Holds in the console: operators hold and release from the pages, viewers only see them;
every hold and release is audited; the dashboard shows a banner and what waits behind each."""

from __future__ import annotations

from sqlalchemy import select

from console.models import AuditEntry
from console.state_tables import IntentHold


def post(client, url, **form):
    return client.post(url, data={"csrf_token": client.csrf_token, **form})


def place(client, kind, value, reason="broken link", **form):
    return post(client, "/holds", kind=kind, value=value, reason=reason, **form)


def active_holds(app):
    from console.web.extensions import db

    with app.app_context():
        return db.session.scalars(select(IntentHold).where(IntentHold.released_at.is_(None))).all()


def test_an_operator_holds_a_template_the_dashboard_shows_it_then_releases_it(
    app, console_client, add_intent
):
    operator = console_client("operator")
    add_intent(template="password-reset")
    add_intent(template="password-reset")
    response = place(operator, "template", "password-reset")
    assert response.status_code == 303
    [hold] = active_holds(app)
    assert (hold.kind, hold.value, hold.held_by) == ("template", "password-reset", "operator-user")

    page = operator.get("/").get_data(as_text=True)
    assert 'id="holds-banner"' in page and "template password-reset" in page
    assert '<td class="hold-waiting">2</td>' in page
    assert "Release lane…" not in page and "Hold lane…" in page

    released = post(operator, f"/holds/{hold.id}/release", reason="link fixed")
    assert released.status_code == 303
    assert active_holds(app) == []
    assert 'id="holds-banner"' not in operator.get("/").get_data(as_text=True)
    from console.web.extensions import db

    with app.app_context():
        entries = db.session.scalars(select(AuditEntry).order_by(AuditEntry.id)).all()
        assert [(e.action, e.target, e.reason, e.actor) for e in entries] == [
            ("hold", "template password-reset", "broken link", "operator-user"),
            ("release", "template password-reset", "link fixed", "operator-user"),
        ]


def test_a_viewer_sees_holds_but_cannot_hold_or_release(app, console_client):
    operator = console_client("operator")
    assert place(operator, "lane", "bulk").status_code == 303
    [hold] = active_holds(app)
    viewer = console_client("viewer")
    assert place(viewer, "lane", "critical").status_code == 403
    assert post(viewer, f"/holds/{hold.id}/release").status_code == 403
    page = viewer.get("/holds").get_data(as_text=True)
    assert "lane bulk" in page and "Release</button>" not in page
    assert 'id="place-hold"' not in page
    assert "hold-button" not in viewer.get("/").get_data(as_text=True)
    assert len(active_holds(app)) == 1


def test_refusals_unknown_template_missing_reason_twice_and_without_csrf(app, console_client):
    operator = console_client("operator")
    unknown = place(operator, "template", "no-such")
    assert unknown.status_code == 303, "post/redirect/get"
    assert unknown.location.endswith("/holds?kind=template&value=no-such")
    page = operator.get(unknown.location).get_data(as_text=True)
    assert "Not held: unknown template" in page and 'value="no-such"' in page
    no_reason = place(operator, "lane", "bulk", reason="")
    assert no_reason.status_code == 303
    assert "a reason is required" in operator.get(no_reason.location).get_data(as_text=True)
    assert place(operator, "domain", "example.com").status_code == 303
    twice = place(operator, "domain", "EXAMPLE.com")
    assert twice.status_code == 409 and "already held" in twice.get_data(as_text=True)
    no_csrf = operator.post("/holds", data={"kind": "lane", "value": "bulk", "reason": "x"})
    assert no_csrf.status_code == 400
    [hold] = active_holds(app)
    assert post(operator, f"/holds/{hold.id}/release", reason="fine").status_code == 303
    assert post(operator, f"/holds/{hold.id}/release", reason="fine").status_code == 409


def test_the_templates_page_and_the_intent_page_offer_hold_and_release(
    app, console_client, add_intent
):
    operator = console_client("operator")
    intent_id = add_intent(to="ada@Bouncy.example")
    templates_page = operator.get("/templates").get_data(as_text=True)
    assert 'data-hold="template:login-code"' in templates_page
    page = operator.get(f"/intents/{intent_id}").get_data(as_text=True)
    assert 'data-hold="template:login-code"' in page
    assert 'data-hold="domain:bouncy.example"' in page
    assert 'id="intent-held"' not in page

    assert place(operator, "domain", "bouncy.example").status_code == 303
    page = operator.get(f"/intents/{intent_id}").get_data(as_text=True)
    assert 'id="intent-held"' in page and "Held: domain bouncy.example" in page
    assert "Release domain…" in page
    form = operator.get("/holds?kind=domain&value=bouncy.example").get_data(as_text=True)
    assert 'class="selected"' in form and 'id="place-hold"' not in form


def test_a_release_without_a_reason_is_refused_in_one_line_and_changes_nothing(app, console_client):
    operator = console_client("operator")
    assert place(operator, "lane", "bulk").status_code == 303
    [hold] = active_holds(app)
    refused = post(operator, f"/holds/{hold.id}/release", reason="  ")
    assert refused.status_code == 303
    page = operator.get(refused.location).get_data(as_text=True)
    assert "Not released: a reason is required" in page
    assert [held.id for held in active_holds(app)] == [hold.id]
    assert 'name="reason" required' in operator.get("/holds?kind=lane&value=bulk").text
