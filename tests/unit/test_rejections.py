"""Which synchronous refusals put the recipient on the suppression list: one row per case."""

from __future__ import annotations

import pytest

from console.core.classify import classify
from console.core.rejections import refuses_the_mailbox
from console.core.send_result import SendResult
from console.vocabulary import ENVELOPE, REPLY_READ

REFUSALS = [
    # (label, code, reply text, suppresses)
    ("user unknown", 550, "5.1.1 <nobody@example.com>: Recipient address rejected", True),
    ("bad destination system", 550, "5.1.2 Host unknown", True),
    ("null MX", 550, "5.1.10 Recipient address has null MX", True),
    ("mailbox disabled", 550, "5.2.1 Mailbox disabled", True),
    ("user not local", 551, "5.1.1 User not local", True),
    ("mailbox name not allowed", 553, "5.1.1 Mailbox name not allowed", True),
    ("policy refusal", 550, "5.7.1 Message rejected as spam", False),
    ("relaying denied", 554, "5.7.1 Relay access denied", False),
    ("content refusal", 554, "5.6.0 Message content rejected", False),
    ("mailbox full", 552, "5.2.2 Mailbox full", False),
    ("no enhanced status", 550, "Requested action not taken", False),
    ("temporary refusal", 450, "4.2.0 Mailbox busy", False),
]


@pytest.mark.parametrize("stage", [ENVELOPE, REPLY_READ])
@pytest.mark.parametrize(("label", "code", "reply", "suppresses"), REFUSALS)
def test_which_refusals_name_the_mailbox(label, code, reply, suppresses, stage):
    result = SendResult(
        stage=stage, code=code, reply_text=reply, error_type="SMTPResponseException"
    )
    assert refuses_the_mailbox(result, classify(result)) is suppresses, label


def test_a_refusal_configured_transient_does_not_suppress():
    from console.core.classify import parse_overrides

    result = SendResult(stage=ENVELOPE, code=550, reply_text="5.1.1 user unknown")
    classification = classify(result, parse_overrides("550=transient"))
    assert not refuses_the_mailbox(result, classification)


def test_an_http_404_is_not_an_smtp_mailbox_refusal():
    result = SendResult(stage=REPLY_READ, protocol="http", code=404, enhanced_status="5.1.1")
    assert not refuses_the_mailbox(result, classify(result))
