"""The suppressed-before-body drill holds the recipient at RCPT TO until the drill has
suppressed it, however long that takes on a busy machine.

Before, the relay let the recipient go after 1.5 s at most (the drills' SMTP timeout is
2 s): a drill slower than that to commit the suppression saw the mark pass and the body
leave, and reported a failure the product did not have.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from console.config import load_settings
from console.drill import crashes
from console.drill.context import DrillContext
from console.drill.relay import DrillRelay
from console.drill.scratch import scratch_database
from console.mail.catalog import catalog_for

pytestmark = pytest.mark.slow

SLOW_SECONDS = 2.5  # a suppression this slow to commit: past the former hold, 1.5 s


def test_suppressed_before_body_holds_when_the_suppression_is_slow(tmp_path, monkeypatch):
    real_add = crashes.add_suppression

    def slow_add(*args, **options):  # as on a busy machine
        time.sleep(SLOW_SECONDS)
        return real_add(*args, **options)

    monkeypatch.setattr(crashes, "add_suppression", slow_add)
    variables = {"CONSOLE_DATABASE_URL": "sqlite://", "CONSOLE_SECRET_KEY": "drill" * 8}
    settings = load_settings({}, instance_path=tmp_path, overrides=variables)
    with scratch_database(None, settings.secret_key) as (url, folder):
        scratch = dataclasses.replace(settings, database_url=url)
        with DrillRelay() as relay:
            ctx = DrillContext(url, folder, relay, scratch, catalog_for(settings))
            try:
                (result,) = crashes.suppressed_before_body(ctx)
            finally:
                ctx.close()
    assert result.passed, result.observed
