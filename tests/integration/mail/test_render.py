"""Shipped templates: the lane, ambiguity policy and maximum age each one promises, and
messages that parse back."""

from __future__ import annotations

import email
import email.policy
import json

import pytest

from console.mail.catalog import TemplateCatalog, default_catalog
from console.mail.render import build_message
from console.mail.template_settings import CatalogError, TemplateError
from console.outbox import enqueue
from console.paths import EMAIL_TEMPLATES_DIR

SHIPPED = {
    # name: (lane, ambiguity policy, max age seconds)
    "order-confirmation": ("bulk", "hold", None),
    "case-assigned": ("bulk", "hold", None),
    "welcome": ("bulk", "hold", None),
    "password-reset": ("critical", "hold", 1800),
    "login-code": ("critical", "resend", 600),
}


def example_params(name: str) -> dict:
    return json.loads((EMAIL_TEMPLATES_DIR / name / "example.json").read_text())


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_template_settings(name):
    settings = default_catalog().settings(name)
    lane, policy, max_age = SHIPPED[name]
    assert (settings.lane, settings.ambiguity_policy, settings.max_age_seconds) == (
        lane,
        policy,
        max_age,
    )


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_rendered_message_parses_back_with_the_stored_message_id(session, name):
    intent = enqueue(
        session, key=f"k-{name}", to="zoe@example.com", template=name, params=example_params(name)
    )
    session.commit()
    raw = build_message(intent, mail_from="Shop <noreply@shop.example.com>").as_bytes()
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert parsed["Message-ID"] == intent.message_id
    assert parsed["To"] == "zoe@example.com"
    assert parsed["From"].addresses[0].addr_spec == "noreply@shop.example.com"
    assert parsed["Date"].datetime.tzinfo is not None
    assert parsed["Subject"]
    text = parsed.get_body(preferencelist=("plain",)).get_content()
    html_part = parsed.get_body(preferencelist=("html",))
    has_html = (EMAIL_TEMPLATES_DIR / name / "v1" / "body.html").exists()
    assert parsed.is_multipart() == has_html
    if has_html:
        assert parsed.get_content_type() == "multipart/alternative"
        assert "&lt;deluxe&gt;" in html_part.get_content() or name != "order-confirmation"
    if name == "order-confirmation":
        assert "Grinder <deluxe>" in text and "Zoë Ångström" in text


def test_html_is_autoescaped_and_text_is_not():
    parts = default_catalog().render("order-confirmation", 1, example_params("order-confirmation"))
    assert "Grinder &lt;deluxe&gt;" in parts.html
    assert "Grinder <deluxe>" in parts.text


def test_undefined_variable_is_an_error():
    with pytest.raises(TemplateError, match="undefined"):
        default_catalog().render("welcome", 1, {"name": "Bob"})


def test_template_versions_are_kept_apart(tmp_path):
    for version, subject in ((1, "Old {{ x }}"), (2, "New {{ x }}")):
        folder = tmp_path / "note" / f"v{version}"
        folder.mkdir(parents=True)
        (folder / "subject.txt").write_text(subject)
        (folder / "body.txt").write_text("body")
    (tmp_path / "note" / "settings.toml").write_text('current_version = 2\nlane = "bulk"\n')
    catalog = TemplateCatalog(tmp_path)
    assert catalog.resolve("note")[1] == 2
    assert catalog.resolve("note@1")[1] == 1
    assert catalog.render("note", 1, {"x": "a"}).subject == "Old a"
    assert catalog.render("note", 2, {"x": "a"}).subject == "New a"
    with pytest.raises(TemplateError):
        catalog.resolve("note@3")


def test_every_shipped_template_passes_the_start_up_check():
    catalog = TemplateCatalog()
    catalog.check()
    assert set(SHIPPED) <= set(catalog.names())
    assert catalog.overridden == []


def test_a_syntax_error_names_the_file(tmp_path):
    folder = tmp_path / "note" / "v1"
    folder.mkdir(parents=True)
    (folder / "subject.txt").write_text("Hi {% if x %}")
    (folder / "body.txt").write_text("body")
    (tmp_path / "note" / "settings.toml").write_text("current_version = 1\n")
    (tmp_path / "note" / "example.json").write_text('{"x": 1}')
    catalog = TemplateCatalog(tmp_path)
    with pytest.raises(TemplateError, match=str(folder / "subject.txt")):
        catalog.render("note", 1, {"x": 1})
    with pytest.raises(CatalogError, match=str(folder / "subject.txt")):
        catalog.check()
