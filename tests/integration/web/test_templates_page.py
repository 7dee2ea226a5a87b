"""/templates: every template with its versions and settings; a preview from example.json."""

from __future__ import annotations

import html
import re

import pytest

from console import outbox
from console.app import create_app
from console.mail import catalog as mail_catalog
from tests.conftest import TEST_SECRET_KEY
from tests.support.template_folders import write_template

SHIPPED = ["case-assigned", "login-code", "ops-alert", "order-confirmation", "password-reset",
           "welcome"]  # fmt: skip


def row_of(page: str, name: str) -> str:
    [row] = re.findall(rf'<tr id="template-{name}">(.*?)</tr>', page, re.DOTALL)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row))


def test_viewer_sees_every_shipped_template_with_its_settings(console_client):
    page = console_client("viewer").get("/templates")
    assert page.status_code == 200
    for name in SHIPPED:
        assert f'id="template-{name}"' in page.text
    assert "critical" in row_of(page.text, "password-reset")
    assert "hold" in row_of(page.text, "password-reset")
    assert "30 min" in row_of(page.text, "password-reset")
    assert "resend" in row_of(page.text, "login-code") and "10 min" in row_of(
        page.text, "login-code"
    )
    assert "none" in row_of(page.text, "order-confirmation")
    assert "v1, v2" in row_of(page.text, "case-assigned")
    assert "shipped" in row_of(page.text, "welcome")


def test_viewer_gets_the_list_only(console_client):
    client = console_client("viewer")
    page = client.get("/templates").text
    assert 'href="/templates/order-confirmation"' not in page
    assert client.get("/templates/order-confirmation").status_code == 403


def test_operator_previews_a_template_from_its_example(console_client):
    client = console_client("operator")
    listing = client.get("/templates").text
    assert 'href="/templates/order-confirmation"' in listing
    page = client.get("/templates/order-confirmation")
    assert page.status_code == 200
    assert 'id="template-preview"' in page.text
    assert "Subject" in page.text
    assert "<iframe sandbox" in page.text
    assert "example.json" in page.text


def test_operator_previews_an_older_version(console_client):
    """example.json fits the current version; an older one that needs other params says so."""
    client = console_client("operator")
    current = client.get("/templates/case-assigned").text
    older = client.get("/templates/case-assigned?version=1").text
    assert 'aria-current="true">v2' in current and 'aria-current="true">v1' in older
    assert re.search(r'<dd id="preview-subject">[^<]+</dd>', current)
    assert "does not render with v1" in older and "case_title" in html.unescape(older)


def test_unknown_templates_and_versions_are_404(console_client):
    client = console_client("operator")
    assert client.get("/templates/no-such-thing").status_code == 404
    assert client.get("/templates/welcome?version=9").status_code == 404
    assert client.get("/templates/welcome?version=x").status_code == 404


@pytest.fixture
def app_with_own_templates(tmp_path, sqlite_url, monkeypatch):
    monkeypatch.setattr(outbox, "_options", outbox._options)
    monkeypatch.setattr(mail_catalog, "_configured", mail_catalog._configured)
    root = tmp_path / "own"
    root.mkdir()
    write_template(root, "invoice-ready", subject="Invoice {{ number }}", body="Due {{ number }}\n",
                   settings='current_version = 1\nlane = "critical"\nambiguity = "resend"\n'
                   "max_age_seconds = 7200\n", example={"number": 4711})  # fmt: skip
    write_template(root, "welcome", subject="Welcome aboard, {{ name }}")
    app = create_app(
        {
            "CONSOLE_DATABASE_URL": sqlite_url,
            "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
            "CONSOLE_EMAIL_TEMPLATES": str(root),
            "TESTING": True,
        }
    )
    yield app
    from console.web.extensions import db

    with app.app_context():
        db.engine.dispose()


def test_the_applications_templates_are_listed_beside_the_shipped_ones(app_with_own_templates):
    app = app_with_own_templates
    from werkzeug.security import generate_password_hash

    from console.models import OperatorUser, utcnow
    from console.web.extensions import db

    with app.app_context():
        password_hash = generate_password_hash("pw", "pbkdf2:sha256:1000")
        db.session.add(
            OperatorUser(
                username="olga", role="operator", created_at=utcnow(), password_hash=password_hash
            )
        )
        db.session.commit()
    client = app.test_client()
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "t"
    client.post("/login", data={"username": "olga", "password": "pw", "csrf_token": "t"})
    page = client.get("/templates").text
    invoice = row_of(page, "invoice-ready")
    assert "application" in invoice and "critical" in invoice and "2 h" in invoice
    assert "replaces the shipped one" in row_of(page, "welcome")
    preview = client.get("/templates/invoice-ready").text
    assert "Invoice 4711" in html.unescape(preview)
    assert "Welcome aboard, Ada" in html.unescape(client.get("/templates/welcome").text)
