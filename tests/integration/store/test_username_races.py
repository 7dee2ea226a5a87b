"""Two admins creating the same username at once: one account, and a clear refusal for the other.

The refused creation is the one whose INSERT meets the other's row: it checked the
name before that row was committed, so only the unique constraint can catch it.
"""

from __future__ import annotations

import html
import threading

import pytest
from sqlalchemy import func, select

from console.cli import main
from console.models import OperatorUser
from console.store import accounts
from console.store.accounts import UsernameTaken, create_user
from console.web.extensions import db

PASSWORD = "long enough pw"
ROUNDS = 8


def accounts_named(app, username: str) -> int:
    with app.app_context():
        query = select(func.count()).where(OperatorUser.username == username)
        return db.session.scalar(query)


CHECK_DEADLINE_SECONDS = 30.0


class HeldCreation:
    """An account created in one transaction that stays open until the other creation has
    checked the name (``watch_the_check``); then committed, so that creation's INSERT
    meets this row."""

    def __init__(self, session_factory, username: str) -> None:
        self.session = session_factory()
        create_user(self.session, username, PASSWORD, "viewer")
        self.session.flush()
        self.checked = threading.Event()

    def watch_the_check(self, monkeypatch) -> None:
        """Note when the next creation has checked the name (and found it free)."""
        check = accounts.new_username

        def checked(session, raw):
            try:
                return check(session, raw)
            finally:
                self.checked.set()

        monkeypatch.setattr(accounts, "new_username", checked)

    def commit_once_checked(self) -> None:
        assert self.checked.wait(CHECK_DEADLINE_SECONDS), "the other creation never checked"
        self.session.commit()
        self.session.close()


def test_the_second_of_two_creations_is_refused_as_taken(session_factory, monkeypatch):
    held = HeldCreation(session_factory, "alice")
    held.watch_the_check(monkeypatch)
    committer = threading.Thread(target=held.commit_once_checked)
    committer.start()
    session = session_factory()
    try:
        with pytest.raises(UsernameTaken, match="already exists"):
            create_user(session, "alice", PASSWORD, "operator")
        session.rollback()
        create_user(session, "bob", PASSWORD, "viewer")  # the session is usable again
        session.commit()
    finally:
        session.close()
        committer.join()


def test_the_command_line_says_the_name_is_taken(app, session_factory, monkeypatch):
    held = HeldCreation(session_factory, "carol")
    held.watch_the_check(monkeypatch)
    committer = threading.Thread(target=held.commit_once_checked)
    committer.start()
    args = ["user", "create", "carol", "--role", "viewer", "--password-stdin"]
    result = app.test_cli_runner().invoke(main, args, input=f"{PASSWORD}\n")
    committer.join()
    assert result.exit_code == 1, result.output
    assert "already exists" in result.output
    assert "IntegrityError" not in result.output and result.exception.__class__ is SystemExit
    assert accounts_named(app, "carol") == 1


def test_two_admins_posting_the_same_name_at_once_get_one_account_and_a_409(app, console_client):
    admins = [console_client("admin", "root"), console_client("admin", "boss")]
    for number in range(ROUNDS):
        username = f"twin{number}"
        start = threading.Barrier(len(admins))
        statuses = []

        def create(client, username=username, start=start, statuses=statuses):
            form = {"username": username, "password": PASSWORD, "role": "viewer"}
            start.wait()
            response = client.post("/users", data={**form, "csrf_token": client.csrf_token})
            statuses.append((response.status_code, response.text))

        threads = [threading.Thread(target=create, args=(client,)) for client in admins]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        codes = sorted(code for code, _ in statuses)
        assert codes == [303, 409], statuses
        refused = next(text for code, text in statuses if code == 409)
        assert f"user {username!r} already exists" in html.unescape(refused)
        assert accounts_named(app, username) == 1
