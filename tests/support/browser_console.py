"""The browser tests' accounts, and how a test logs in, adds an intent and saves a screenshot."""

from __future__ import annotations

from pathlib import Path

from console.models import Intent
from console.outbox import enqueue
from console.paths import PROJECT_ROOT
from console.web.extensions import db

ARTIFACTS = PROJECT_ROOT / "test-artifacts"
PASSWORDS = {"olga": "operator-pass", "vic": "viewer-pass", "ada": "admin-pass"}
ROLES = {"olga": "operator", "vic": "viewer", "ada": "admin"}


def add_intent(live_console, key: str, status: str, event: str | None = None) -> int:
    with live_console.app.app_context():
        intent = enqueue(
            db.session,
            key=key,
            event=event,
            to="customer@example.com",
            template="order-confirmation",
            params={
                "customer_name": "Grace",
                "order_number": key,
                "items": [{"quantity": 1, "name": "Lamp", "price": "30.00"}],
                "total": "30.00",
            },
        )
        db.session.flush()
        db.session.query(Intent).filter_by(id=intent.id).update({"status": status})
        db.session.commit()
        return intent.id


def log_in(page, live_console, username: str) -> None:
    page.goto(live_console.url("/login"))
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORDS[username])
    page.click("button:has-text('Log in')")
    page.wait_for_url(live_console.url("/"))


def open_from_nav(page, link_text: str, path: str) -> None:
    """Follow the navigation's `link_text` to `path` and wait until the page has loaded:
    a filter changed before htmx has bound it would not be sent."""
    page.click(f"nav >> text={link_text}")
    page.wait_for_url(f"**{path}")
    page.wait_for_load_state("load")


def open_search(page) -> None:
    """Go to the intent search from the navigation and wait until its page has loaded:
    typed before htmx has bound the search box, a query would be missed."""
    page.click("nav >> text=Intents")
    page.wait_for_url("**/intents")
    page.wait_for_load_state("load")


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot as a test artifact."""
    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(target), full_page=True)
    return target
