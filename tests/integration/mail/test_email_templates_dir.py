"""CONSOLE_EMAIL_TEMPLATES: the application's own templates, beside the shipped ones."""

from __future__ import annotations

import logging
import re

import pytest

from console import outbox
from console.app import create_app
from console.config import ConfigError
from console.mail import catalog as mail_catalog
from console.outbox import enqueue
from console.store.database import make_engine, make_session_factory
from console.transports.memory import MemoryTransport
from console.worker import loop
from tests.support.template_folders import write_template

SECRET = "test-secret-key" * 3
INVOICE_SETTINGS = 'current_version = 1\nlane = "critical"\nambiguity = "resend"\n'
INVOICE_PARAMS = {"number": 47, "amount": "12.50"}


@pytest.fixture
def own_templates(tmp_path):
    root = tmp_path / "my-templates"
    root.mkdir()
    write_template(root, "invoice-ready", settings=INVOICE_SETTINGS,
                   subject="Invoice {{ number }} is ready", body="Amount: {{ amount }}\n",
                   html="<p>{{ amount }}</p>", example=INVOICE_PARAMS)  # fmt: skip
    return root


@pytest.fixture(autouse=True)
def restore_the_configured_catalog(monkeypatch):
    """Each test configures the process's catalog; put the previous one back after."""
    monkeypatch.setattr(outbox, "_options", outbox._options)
    monkeypatch.setattr(mail_catalog, "_configured", mail_catalog._configured)


@pytest.fixture
def session_factory(sqlite_url):
    engine = make_engine(sqlite_url)
    yield make_session_factory(engine)
    engine.dispose()


def start(sqlite_url, templates):
    return create_app(
        {
            "CONSOLE_DATABASE_URL": sqlite_url,
            "CONSOLE_SECRET_KEY": SECRET,
            "CONSOLE_EMAIL_TEMPLATES": str(templates),
        }
    )


def test_an_application_template_is_enqueued_and_sent(sqlite_url, session_factory, own_templates):
    app = start(sqlite_url, own_templates)
    with session_factory() as session:
        intent = enqueue(session, key="invoice:47", to="ada@example.com",
                         template="invoice-ready", params=INVOICE_PARAMS)  # fmt: skip
        shipped = enqueue(session, key="login:1", to="ada@example.com",
                          template="login-code", params={"code": "424242"})  # fmt: skip
        session.commit()
        assert intent.template == "invoice-ready" and intent.template_version == 1
        assert intent.lane == "critical", "the lane of its settings.toml"
        assert shipped.template == "login-code", "the shipped templates are still there"

    settings = app.extensions["console.settings"]
    transport = MemoryTransport()
    worker = loop.Worker(session_factory, transport, loop.WorkerSettings.from_settings(settings))
    try:
        worker.run_once()
    finally:
        worker.close()
    sent = {email.intent_id: email for email in transport.sent}
    assert sent[intent.id].subject == "Invoice 47 is ready"
    assert sent[intent.id].text == "Amount: 12.50\n"
    assert sent[intent.id].html == "<p>12.50</p>"
    assert "invoice-ready" in mail_catalog.catalog_for(settings).names()


def test_a_name_in_both_is_the_applications_and_start_up_says_so_once(
    sqlite_url, session_factory, own_templates, caplog
):
    write_template(own_templates, "welcome", subject="Our own welcome, {{ name }}")
    caplog.set_level(logging.INFO, logger="console.mail.catalog")
    start(sqlite_url, own_templates)
    start(sqlite_url, own_templates)

    said = [r for r in caplog.records if r.name == "console.mail.catalog"]
    assert [r.getMessage() for r in said] == [
        "email template welcome from CONSOLE_EMAIL_TEMPLATES replaces the shipped one"
    ]
    with session_factory() as session:
        intent = enqueue(session, key="user:1:welcome", to="ada@example.com",
                         template="welcome", params={"name": "Ada"})  # fmt: skip
        session.commit()
    parts = mail_catalog.default_catalog().render(intent.template, intent.template_version,
                                                  intent.params)  # fmt: skip
    assert parts.subject == "Our own welcome, Ada"
    assert parts.html is None, "nothing of the shipped welcome is mixed in"


BROKEN_SETTINGS = [
    ('current_version = 1\nlane = "bulk\n', "cannot be read as TOML"),
    ('current_version = 1\nlane = "urgent"\n', "lane must be one of"),
    ('current_version = 0\nlane = "bulk"\n', "current_version"),
    ('lane = "bulk"\n', "current_version"),
    ('current_version = 1\nambiguity = "maybe"\n', "ambiguity must be one of"),
    ("current_version = 1\nmax_age_seconds = -5\n", "max_age_seconds"),
    ("current_version = 1\nmax_age = 600\n", "unknown key 'max_age'"),
    ('current_version = 2\nlane = "bulk"\n', "v2/subject.txt: missing"),
]


@pytest.mark.parametrize("text,problem", BROKEN_SETTINGS)
def test_broken_settings_stop_start_up_and_enqueue_naming_the_file(
    sqlite_url, session_factory, own_templates, monkeypatch, text, problem
):
    folder = write_template(own_templates, "receipt", settings=text)
    with pytest.raises(ConfigError, match=re.escape(str(folder))) as at_start_up:
        start(sqlite_url, own_templates)
    assert problem in str(at_start_up.value)
    if "v2/" not in problem:
        assert str(folder / "settings.toml") in str(at_start_up.value)

    # an application enqueueing without the console reads the same settings at first use
    monkeypatch.setenv("CONSOLE_EMAIL_TEMPLATES", str(own_templates))
    monkeypatch.setattr(outbox, "_options", None)
    with session_factory() as session, pytest.raises(ConfigError) as at_enqueue:
        enqueue(session, key="invoice:47", to="ada@example.com",
                template="invoice-ready", params=INVOICE_PARAMS)  # fmt: skip
    assert str(at_enqueue.value) == str(at_start_up.value)


@pytest.mark.parametrize(
    "template,named,problem",
    [
        (dict(example={"nom": "Ada"}), "example.json", "'name' is undefined"),
        (dict(example=["Ada"]), "example.json", "one JSON object"),
        (dict(subject="Hello {{ name"), "v1/subject.txt", "line 1"),
        (dict(body="{{ name + 1 }}"), "example.json", "TypeError"),
    ],
)
def test_an_example_that_does_not_render_stops_start_up_naming_the_file(
    sqlite_url, own_templates, template, named, problem
):
    folder = write_template(own_templates, "receipt", **template)
    with pytest.raises(ConfigError) as error:
        start(sqlite_url, own_templates)
    assert str(folder / named) in str(error.value)
    assert problem in str(error.value)


def test_a_missing_example_stops_start_up_naming_the_file(sqlite_url, own_templates):
    example = own_templates / "invoice-ready" / "example.json"
    example.unlink()
    with pytest.raises(ConfigError, match=re.escape(f"{example}: missing")):
        start(sqlite_url, own_templates)


def test_a_missing_directory_is_refused_naming_the_variable(sqlite_url, tmp_path):
    with pytest.raises(ConfigError, match="CONSOLE_EMAIL_TEMPLATES"):
        start(sqlite_url, tmp_path / "not-there")
