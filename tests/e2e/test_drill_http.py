"""`console drill` with CONSOLE_TRANSPORT=http: the drills run against a local server playing
the configured provider's documented send API (console/drill/provider_play.py), the
SMTP-only drills reported as not applicable, never passed; Postmark (no idempotency key:
a lost answer is ambiguous) whole, Resend (its Idempotency-Key deduplicates a retry) on
the drills whose outcome that changes, SES on its signed requests."""

from __future__ import annotations

import pytest

from tests.e2e.test_drill import drill, failed, report

pytestmark = pytest.mark.slow

HTTP = {"CONSOLE_TRANSPORT": "http", "CONSOLE_HTTP_PROVIDER_KEY": "the-real-key-never-used"}
SMTP_ONLY = {"suppressed-before-body", "550-5.1.1", "421-domain"}


def test_the_drills_hold_against_postmarks_api_played_locally(tmp_path):
    run = drill(cwd=tmp_path, CONSOLE_PROVIDER="postmark", **HTTP)
    document = report(run)
    assert failed(document) == [], run.stderr[-3000:]
    assert run.returncode == 0
    assert document["transport"] == "http (postmark's API, played locally)"
    assert "CONSOLE_HTTP_PROVIDER_KEY" not in document["left_out"]
    rows = {r["drill"]: r for r in document["results"]}
    skipped = {r["drill"] for r in document["results"] if r["verdict"] == "n/a"}
    assert skipped == SMTP_ONLY
    assert all(rows[name]["passed"] is None for name in SMTP_ONLY), "never a pass"
    assert document["not_applicable"] == len(SMTP_ONLY)
    assert document["held"] == document["total"] == len(document["results"]) - len(SMTP_ONLY)
    assert "422 (postmark's documented permanent refusal)" in rows["5yz"]["observed"]
    assert "429" in rows["4yz-then-250"]["expected"]
    assert rows["answer-lost"]["observed"].startswith("ambiguous, 1 body")
    progress = [line for line in run.stderr.splitlines() if line.startswith("n/a ")]
    assert len(progress) == len(SMTP_ONLY)


def test_resends_idempotency_key_makes_one_email_of_a_retried_send(tmp_path):
    only = ("--only", "killed-after-body", "--only", "answer-lost")
    run = drill(*only, cwd=tmp_path, CONSOLE_PROVIDER="resend", **HTTP)
    document = report(run)
    assert failed(document) == [], run.stderr[-3000:]
    lost = next(r for r in document["results"] if r["drill"] == "answer-lost")
    assert "2 requests, 1 body" in lost["observed"] and lost["observed"].startswith("submitted")
    resent = [r for r in document["results"] if "deduplicates" in r["expected"]]
    assert resent and all(
        "1 body with its Message-ID (2 requests)" in r["observed"] for r in resent
    )


def test_sess_signed_requests_are_drilled_with_the_drills_own_credentials(tmp_path):
    only = ("--only", "5yz", "--only", "4yz-then-250")
    run = drill(*only, cwd=tmp_path, CONSOLE_PROVIDER="ses", AWS_ACCESS_KEY_ID="AKIAREAL",
                AWS_SECRET_ACCESS_KEY="real", AWS_REGION="us-east-1",
                CONSOLE_TRANSPORT="http")  # fmt: skip
    document = report(run)
    assert failed(document) == [], run.stderr[-3000:]
    assert len(document["results"]) == 2
    assert "400 (ses's documented permanent refusal)" in document["results"][1]["observed"]
