"""Whole numbers from a request: ASCII digits within bounds, anything else None."""

from __future__ import annotations

import pytest

from console.core.whole_numbers import MAX_BIGINT, whole_number

CASES = [
    ("0", {}, 0),
    ("42", {}, 42),
    (" 42 ", {}, 42),
    ("0042", {}, 42),
    (str(MAX_BIGINT), {}, MAX_BIGINT),
    (str(MAX_BIGINT + 1), {}, None),
    ("9" * 30, {}, None),
    ("0" * 41 + "1", {}, None),
    ("²", {}, None),
    ("①", {}, None),
    ("١٢", {}, None),
    ("１２", {}, None),
    ("-1", {}, None),
    ("+1", {}, None),
    ("1e3", {}, None),
    ("1.0", {}, None),
    ("1_000", {}, None),
    ("1 2", {}, None),
    ("12\n", {}, 12),
    ("", {}, None),
    ("   ", {}, None),
    (None, {}, None),
    ("\ud800", {}, None),
    ("3", {"lowest": 1, "highest": 8}, 3),
    ("0", {"lowest": 1, "highest": 8}, None),
    ("9", {"lowest": 1, "highest": 8}, None),
]


@pytest.mark.parametrize("text,bounds,expected", CASES, ids=[repr(c[0]) for c in CASES])
def test_whole_number(text, bounds, expected):
    assert whole_number(text, **bounds) == expected
