"""What a provider's answer to "do you have it?" does to an ambiguous intent: every row."""

from __future__ import annotations

import pytest

from console.core.asking import (
    FAILED,
    FOUND,
    HOLD_NOTED,
    LEAVE,
    NOT_FOUND,
    RECORD,
    RESEND_NOW,
    WAIT,
    after_asking,
)
from console.vocabulary import HOLD, RESEND

HORIZON = 1800.0

# (row, what the provider said, seconds since the attempt, template policy, action)
ROWS = [
    ("found: its facts settle it", FOUND, 60.0, HOLD, RECORD),
    ("found, policy resend too", FOUND, 60.0, RESEND, RECORD),
    ("found long after", FOUND, HORIZON * 10, HOLD, RECORD),
    ("not found yet: ask again", NOT_FOUND, 60.0, HOLD, WAIT),
    ("not found yet, resend policy: ask again", NOT_FOUND, HORIZON - 1, RESEND, WAIT),
    ("not found after the horizon: resend", NOT_FOUND, HORIZON, RESEND, RESEND_NOW),
    ("not found after the horizon: hold, noted", NOT_FOUND, HORIZON + 1, HOLD, HOLD_NOTED),
    ("lookup failed: leave it", FAILED, HORIZON * 2, RESEND, LEAVE),
    ("lookup failed early: leave it", FAILED, 1.0, HOLD, LEAVE),
]


@pytest.mark.parametrize(
    "said, seconds, policy, expected", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_after_asking(said, seconds, policy, expected):
    action = after_asking(
        said, seconds_since_attempt=seconds, horizon_seconds=HORIZON, ambiguity_policy=policy
    )
    assert action == expected


def test_an_unknown_answer_is_refused():
    with pytest.raises(ValueError):
        after_asking("maybe", seconds_since_attempt=1, horizon_seconds=1, ambiguity_policy=HOLD)
