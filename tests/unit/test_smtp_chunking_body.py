"""A body sent by BDAT has the line endings aiosmtplib gives a body sent after DATA."""

from __future__ import annotations

import pytest
from aiosmtplib.protocol import normalize_message_line_endings
from hypothesis import given
from hypothesis import strategies as st

from console.transports.smtp_chunking import canonical_body

BODIES = [
    b"",
    b"a",
    b"a\r\n",
    b"a\nb\rc\r\nd",
    b"\r\r\n\n",
    b".leading dot\r\n..two\r\n.\r\n",
    "ünïcode\n".encode(),
]


@pytest.mark.parametrize("body", BODIES)
def test_line_endings_as_aiosmtplib_makes_them_for_data(body):
    assert canonical_body(body) == normalize_message_line_endings(body)


@given(st.lists(st.sampled_from([b"a", b".", b"\r", b"\n", b"\r\n", b"\xc3\xa9"])).map(b"".join))
def test_any_mix_of_line_endings(body):
    assert canonical_body(body) == normalize_message_line_endings(body)
