"""The demo terminal's log lines: the level in full, the facts the message leaves out."""

from __future__ import annotations

import logging

from console.logs import ReadableFormatter, redactor


def record(level: int, message: str, *args, **extra) -> logging.LogRecord:
    made = logging.LogRecord("console.worker.guard", level, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    made.created = 1_764_616_382.5  # 2025-12-01 19:13:02.5 UTC
    return made


def test_a_deferral_line_names_the_domain_and_the_level_in_full():
    line = ReadableFormatter().format(
        record(
            logging.WARNING,
            "recipient domain deferred after a run of throttling replies",
            recipient_domain="example.net", count=3, code=421, intent_id=7,
        )
    )  # fmt: skip
    assert line == (
        "19:13:02 warning recipient domain deferred after a run of throttling replies  "
        "recipient_domain=example.net code=421 count=3"
    )


def test_a_fact_the_message_names_already_is_not_repeated_and_ids_stay_out():
    line = ReadableFormatter().format(
        record(
            logging.ERROR,
            "intent=%s attempt=%s stage=%s outcome=%s code=%s -> %s",
            11, 6, "data_sent", "transient", 451, "dead",
            intent_id=11, attempt_id=69, attempt_number=6, code=451, lane=None,
        )
    )  # fmt: skip
    assert line == (
        "19:13:02 error   intent=11 attempt=6 stage=data_sent outcome=transient code=451 -> dead"
    )


def test_secrets_are_redacted_as_in_the_json_lines():
    redactor.register("hunter2-secret")
    line = ReadableFormatter().format(
        record(logging.WARNING, "relay smtp://user:hunter2-secret@relay.example.com refused")
    )
    assert "hunter2-secret" not in line and "[redacted]" in line
