"""A SendResult keeps only text the database stores: NUL and lone surrogates become U+FFFD."""

from __future__ import annotations

import dataclasses

import pytest

from console.core.send_result import SendResult
from console.vocabulary import REPLY_READ

UNSTORABLE = ["a\x00b", "f\udcfcr", "\ud800", "end\udfff"]
FIELDS = ["enhanced_status", "reply_text", "provider_message_id", "error", "error_type"]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("text", UNSTORABLE)
def test_every_text_field_is_made_storable(field, text):
    result = SendResult(REPLY_READ, **{field: text})
    stored = getattr(result, field)
    assert len(stored) == len(text)
    assert "\ufffd" in stored
    assert stored.encode("utf-8").decode("utf-8") == stored
    assert "\x00" not in stored


def test_readable_text_is_kept_as_it_is_and_replace_cleans_again():
    result = SendResult(REPLY_READ, code=250, reply_text="2.0.0 Ok: queued as 4F2 für Sie")
    assert result.reply_text == "2.0.0 Ok: queued as 4F2 für Sie"
    assert dataclasses.replace(result, error="x\x00").error == "x\ufffd"
