"""The matching rule of provider events, row by row: the one intent, or why none."""

from __future__ import annotations

import pytest

from console.events.matching import Candidate, choose

ADA_1 = Candidate(1, "ada@example.com", attempt_id=10)
ADA_2 = Candidate(2, "ada@example.com")
LINUS = Candidate(3, "linus@example.com")
PID = "DEMO000001"
MID = "<m@outbox.example>"

# (case, candidates, event recipient, Message-ID, the chosen one or words of the reason)
ROWS = [
    ("one intent, same recipient", [ADA_1], "ada@example.com", None, ADA_1),
    ("recipient compared without case", [ADA_1], "Ada@Example.COM", None, ADA_1),
    ("shared id, resolved by recipient", [ADA_1, LINUS], "linus@example.com", None, LINUS),
    ("shared id, the other recipient", [ADA_2, LINUS], "ada@example.com", None, ADA_2),
    ("no recipient named, one intent", [LINUS], None, None, LINUS),
    ("matched by Message-ID", [ADA_2], "ada@example.com", MID, ADA_2),
    (
        "shared id, neither recipient",
        [ADA_1, LINUS],
        "eve@example.com",
        None,
        "no intent to eve@example.com has provider id DEMO000001; "
        "it is on intents 1, 3 of other recipients",
    ),
    (
        "one intent of another recipient",
        [LINUS],
        "eve@example.com",
        None,
        "no intent to eve@example.com has provider id DEMO000001; "
        "it is on intent 3 of another recipient",
    ),
    (
        "no intent has the id yet",
        [],
        "eve@example.com",
        None,
        "no intent to eve@example.com has provider id DEMO000001 yet",
    ),
    ("no intent, no recipient", [], None, None, "no intent has provider id DEMO000001 yet"),
    (
        "unknown Message-ID",
        [],
        "ada@example.com",
        MID,
        f"no intent to ada@example.com has Message-ID {MID}",
    ),
    (
        "one recipient, two intents",
        [ADA_1, ADA_2],
        "ada@example.com",
        None,
        "provider id DEMO000001 is on 2 intents to ada@example.com (1, 2): cannot tell which",
    ),
    (
        "no recipient named, two intents",
        [ADA_1, LINUS],
        None,
        None,
        "provider id DEMO000001 is on 2 intents (1, 3) and the event names no recipient",
    ),
]


@pytest.mark.parametrize(
    ("case", "candidates", "recipient", "message_id", "expected"), ROWS, ids=[r[0] for r in ROWS]
)
def test_choose(case, candidates, recipient, message_id, expected):
    chosen = choose(candidates, recipient=recipient, provider_message_id=PID, message_id=message_id)
    assert chosen == expected


def test_an_event_without_identifiers_never_matches():
    reason = choose([ADA_1], recipient="ada@example.com", provider_message_id=None, message_id=None)
    assert reason == "the event names no provider id and no Message-ID: it cannot be matched"


def test_a_long_list_of_intents_is_cut_short():
    many = [Candidate(n, f"user{n}@example.com") for n in range(1, 9)]
    reason = choose(many, recipient="eve@example.com", provider_message_id=PID, message_id=None)
    assert reason.endswith("intents 1, 2, 3, 4, 5 and 3 more of other recipients")
