"""Whole numbers typed into a request: ASCII digits within bounds, or nothing. Pure: no IO.

``str.isdigit()`` accepts ``²`` and ``①``, which ``int()`` refuses, and ``int()``
accepts Arabic-Indic and full-width digits, which nobody types into an id field;
a number past a BIGINT overflows SQLite's driver. The console's ids, page markers,
versions and counts from a query string, a form or a path are read here.
"""

from __future__ import annotations

import re

MAX_BIGINT = 2**63 - 1  # the largest id a BIGINT (and SQLite's INTEGER) holds
ASCII_DIGITS = re.compile(r"[0-9]+")
# longer than any number within MAX_BIGINT, leading zeros included: not read at all
_LONGEST_TEXT = 40


def whole_number(text: str | None, *, lowest: int = 0, highest: int = MAX_BIGINT) -> int | None:
    """`text` (spaces around it ignored) as an int from `lowest` to `highest`; else None."""
    if text is None:
        return None
    digits = text.strip()
    if len(digits) > _LONGEST_TEXT or not ASCII_DIGITS.fullmatch(digits):
        return None
    value = int(digits)
    return value if lowest <= value <= highest else None
