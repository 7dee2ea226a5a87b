"""``console hold``, ``release`` and ``holds``: in-process through Flask's CLI runner, on SQLite
and PostgreSQL; one real subprocess checks the exit status of an unknown template."""

from __future__ import annotations

import os
import subprocess

from sqlalchemy import select

from console.cli import main
from console.models import AuditEntry, Intent
from console.state_tables import IntentHold
from console.vocabulary import EXPIRED
from tests.support.commands import CONSOLE_BIN


def run(app, *args):
    return app.test_cli_runner().invoke(main, list(args))


def test_hold_list_and_release_a_template(app, add_intent):
    held = run(app, "hold", "--template", "login-code", "--reason", "wrong code length")
    assert held.exit_code == 0, held.output
    assert "held template login-code" in held.output
    add_intent(template="login-code")
    listed = run(app, "holds")
    assert listed.exit_code == 0
    assert "template login-code" in listed.output and "1 waiting" in listed.output
    assert "wrong code length" in listed.output
    released = run(app, "release", "--template", "login-code", "--reason", "fixed")
    assert released.exit_code == 0, released.output
    assert "released template login-code: 1 intents due now" in released.output
    assert run(app, "holds").output.strip() == "nothing is held"
    from console.web.extensions import db

    with app.app_context():
        entries = db.session.scalars(select(AuditEntry).order_by(AuditEntry.id)).all()
        assert [(e.action, e.target, e.reason) for e in entries] == [
            ("hold", "template login-code", "wrong code length"),
            ("release", "template login-code", "fixed"),
        ]
        assert entries[0].actor.startswith("cli:")


def test_unknown_lane_or_template_exits_2_and_holds_nothing(app):
    for args in (["--lane", "urgent"], ["--template", "no-such"], ["--template", "welcome@9"]):
        result = run(app, "hold", *args, "--reason", "x")
        assert result.exit_code == 2, result.output
        assert "unknown" in result.output or "no version" in result.output
    assert run(app, "release", "--template", "no-such", "--reason", "x").exit_code == 2
    both = run(app, "hold", "--lane", "bulk", "--domain", "example.com", "--reason", "x")
    assert both.exit_code == 2 and "exactly one" in both.output
    from console.web.extensions import db

    with app.app_context():
        assert db.session.scalars(select(IntentHold)).all() == []


def test_hold_twice_release_unheld_and_a_past_until_are_refused(app):
    assert run(app, "hold", "--domain", "@Example.COM", "--reason", "bouncing").exit_code == 0
    again = run(app, "hold", "--domain", "example.com", "--reason", "bouncing")
    assert again.exit_code == 1 and "already held" in again.output
    unheld = run(app, "release", "--lane", "bulk", "--reason", "x")
    assert unheld.exit_code == 1 and "bulk is not held" in unheld.output
    past = run(app, "hold", "--lane", "bulk", "--reason", "x", "--until", "2001-01-01T00:00")
    assert past.exit_code == 1 and "in the past" in past.output
    bad = run(app, "hold", "--lane", "bulk", "--reason", "x", "--until", "tomorrow")
    assert bad.exit_code == 2


def test_release_expires_a_password_reset_past_its_max_age(app, add_intent):
    import datetime as dt

    from console.models import utcnow
    from console.web.extensions import db

    assert run(app, "hold", "--lane", "critical", "--reason", "relay review").exit_code == 0
    old = utcnow() - dt.timedelta(minutes=31)
    late = add_intent(template="password-reset", lane="critical", created_at=old)
    released = run(app, "release", "--lane", "critical", "--reason", "relay fine")
    assert "1 expired while held" in released.output, released.output
    with app.app_context():
        intent = db.session.get(Intent, late)
        assert intent.status == EXPIRED
        assert "held (lane critical: relay review)" in intent.status_reason


def test_the_installed_command_exits_2_for_an_unknown_template(sqlite_url, tmp_path):
    env = {**os.environ, "CONSOLE_DATABASE_URL": sqlite_url, "CONSOLE_SECRET_KEY": "k" * 32}
    result = subprocess.run(
        [CONSOLE_BIN, "hold", "--template", "no-such", "--reason", "x"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "unknown template 'no-such'" in result.stderr


def test_release_without_a_reason_is_refused_in_one_line(app):
    assert run(app, "hold", "--lane", "bulk", "--reason", "review").exit_code == 0
    refused = run(app, "release", "--lane", "bulk")
    assert refused.exit_code != 0
    assert refused.output.strip().splitlines() == [
        "Error: a reason is required: give --reason TEXT (it is audited)."
    ]
    assert run(app, "release", "--lane", "bulk", "--reason", " ").exit_code != 0
    from console.web.extensions import db

    with app.app_context():
        assert len(db.session.scalars(select(IntentHold)).all()) == 1
        assert db.session.scalars(select(IntentHold)).one().released_at is None
