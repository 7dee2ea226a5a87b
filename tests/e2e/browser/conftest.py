"""A real console served by waitress on 127.0.0.1, and Debian's Chromium driven by Playwright.

Without /usr/bin/chromium every browser test is skipped with a loud warning,
unless CONSOLE_TEST_REQUIRE_BROWSER=1 makes that a failure.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import warnings

import pytest
from flask import Flask
from waitress import create_server, wasyncore

from console.app import create_app
from console.store.accounts import create_user
from console.web.extensions import db
from tests.conftest import TEST_SECRET_KEY
from tests.support.browser_console import PASSWORDS, ROLES

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclasses.dataclass
class LiveConsole:
    app: Flask
    base_url: str

    def url(self, path: str) -> str:
        return self.base_url + path


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the module's tests, or a loud skip (a failure when required)."""
    if not os.path.exists(CHROMIUM):
        message = f"Chromium is NOT installed at {CHROMIUM}: every browser test is SKIPPED"
        if os.environ.get("CONSOLE_TEST_REQUIRE_BROWSER") == "1":
            pytest.fail(message + " and CONSOLE_TEST_REQUIRE_BROWSER=1", pytrace=False)
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def live_console(tmp_path_factory, sqlite_template):
    """The console on a fresh SQLite file, served by waitress in a thread."""
    path = tmp_path_factory.mktemp("browser") / "console.db"
    shutil.copyfile(sqlite_template, path)
    app = create_app(
        {
            "CONSOLE_DATABASE_URL": f"sqlite:///{path}",
            "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
            "DASHBOARD_REFRESH_SECONDS": 1,
        }
    )
    with app.app_context():
        for username, password in PASSWORDS.items():
            create_user(db.session, username, password, ROLES[username])
        db.session.commit()
    server = create_server(app, host="127.0.0.1", port=0, threads=4)
    thread = threading.Thread(target=server.run, name="waitress", daemon=True)
    thread.start()
    yield LiveConsole(app, f"http://127.0.0.1:{server.effective_port}")
    server.close()
    wasyncore.close_all(server._map)
    server.task_dispatcher.shutdown()
    thread.join(5)
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def console_page(chromium, request):
    """A fresh browser context (no cookies) and page; Content Security Policy errors fail."""
    context = chromium.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    policy_errors: list[str] = []
    page.on(
        "console",
        lambda message: (
            policy_errors.append(message.text)
            if "Content Security Policy" in message.text
            else None
        ),
    )
    yield page
    context.close()
    assert policy_errors == [], f"{request.node.name}: {policy_errors}"
