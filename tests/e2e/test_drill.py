"""`console drill` end to end: it holds on the shipped configuration (on SQLite here; on
PostgreSQL in test_drill_postgres.py, a file of its own so the two run side by side), and
fails the right drill when the configuration is wrong or the product is broken."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from tests.support.commands import CONSOLE_BIN

pytestmark = pytest.mark.slow

DRILL_TIMEOUT_SECONDS = 240


def drill(*args: str, cwd, **environ: str) -> subprocess.CompletedProcess:
    """Run ``console drill --json ARGS`` with only the CONSOLE_* settings given."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    return subprocess.run(
        [CONSOLE_BIN, "drill", "--json", *args],
        env={**base, "CONSOLE_SECRET_KEY": "drill" * 8, **environ},
        cwd=cwd, capture_output=True, text=True, timeout=DRILL_TIMEOUT_SECONDS,
    )  # fmt: skip


def report(run: subprocess.CompletedProcess) -> dict:
    assert run.stdout.strip(), run.stderr[-2000:]
    return json.loads(run.stdout)


def failed(document: dict) -> list[dict]:
    """The rows that failed (a drill not applicable to the transport is not one: null)."""
    return [result for result in document["results"] if result["passed"] is False]


def test_the_drills_hold_on_the_shipped_configuration_on_sqlite(tmp_path):
    run = drill(cwd=tmp_path)
    document = report(run)
    assert failed(document) == [], run.stderr[-3000:]
    assert run.returncode == 0
    drills = {result["drill"] for result in document["results"]}
    assert {"killed-after-body", "answer-lost", "ineligible", "421-domain"} <= drills
    held_templates = {
        r["template"] for r in document["results"] if r["drill"] == "killed-after-body"
    }
    assert {"login-code", "password-reset", "order-confirmation"} <= held_templates
    assert document["held"] == document["total"] == len(document["results"])
    progress = [line for line in run.stderr.splitlines() if line.startswith("pass ")]
    assert len(progress) == document["total"], "a progress line a drill"
    assert not (tmp_path / "instance").exists(), "the configured database is not even made"


def test_an_eligibility_module_that_raises_fails_the_ineligible_drill(tmp_path):
    (tmp_path / "raising_checks.py").write_text(
        textwrap.dedent(
            """
            def check(intent, session):
                raise LookupError("no such user table")

            ELIGIBILITY_CHECKS = {"verify-email": check}
            """
        )
    )
    run = drill(
        "--only", "ineligible", cwd=tmp_path,
        CONSOLE_ELIGIBILITY_MODULE="raising_checks", PYTHONPATH=_path_with(tmp_path),
    )  # fmt: skip
    (result,) = failed(report(run))
    assert run.returncode == 1
    assert result["drill"] == "ineligible" and "verify-email" in result["template"]
    assert "'verify-email' in raising_checks did not decide" in result["observed"]
    assert "LookupError" in result["observed"]


def test_a_550_classified_transient_fails_the_5yz_drill(tmp_path):
    run = drill("--only", "5yz", cwd=tmp_path, CONSOLE_CLASSIFY_OVERRIDES="550=transient")
    (result,) = failed(report(run))
    assert run.returncode == 1
    assert result["drill"] == "5yz" and "retried: 2 attempts" in result["observed"]


SABOTAGE = '''
"""The product broken on purpose: the mark before the body goes on whatever it answers."""
from console.vocabulary import DATA_SENT
from console.worker import sending


async def on_stage(self, email, stage):
    if stage == DATA_SENT:
        await self._engine.mark(email.attempt_id, email.recipient)  # its refusal ignored


sending.StageMarks.on_stage = on_stage
'''


def test_a_worker_that_ignores_the_marks_refusal_fails_the_drill(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(SABOTAGE)
    run = drill("--only", "suppressed-before-body", cwd=tmp_path,
                PYTHONPATH=_path_with(tmp_path))  # fmt: skip
    (result,) = failed(report(run))
    assert run.returncode == 1
    assert result["drill"] == "suppressed-before-body"
    assert "1 body at the relay" in result["observed"]


SKIPPED_MARK = '''
"""The product broken on purpose: no data_sent mark is committed before the body."""
from console.vocabulary import DATA_SENT
from console.worker import sending


async def on_stage(self, email, stage):
    if stage == DATA_SENT:
        self._crash_if("data_sent")  # the body leaves with its attempt still at "claimed"


sending.StageMarks.on_stage = on_stage
'''


def test_a_worker_that_sends_the_body_unmarked_fails_the_body_left_drill(tmp_path):
    """The mark's refusal can only be ignored where the mark refuses (suppressed-before-body,
    above); the mark itself, committed before the body, is what the body-left drill rests on:
    without it the sweep takes the killed send for one that never left and sends it again."""
    (tmp_path / "sitecustomize.py").write_text(SKIPPED_MARK)
    run = drill("--only", "killed-after-body", cwd=tmp_path, PYTHONPATH=_path_with(tmp_path))
    results = report(run)["results"]
    assert run.returncode == 1
    assert results and failed(report(run)) == results, "every template's row fails"
    assert all("its attempt at claimed" in r["observed"] for r in results)
    held = [
        r for r in results if r["expected"].startswith("marked data_sent before the body; hold")
    ]
    assert held and all("submitted, 2 bodies" in r["observed"] for r in held)


def _path_with(folder) -> str:
    return os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
