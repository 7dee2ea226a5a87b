"""The reverse and forward paths of MAIL FROM and RCPT TO: what aiosmtplib's own
``quote_address`` gives for every address, built without parsing a plain one."""

from __future__ import annotations

import pytest
from aiosmtplib.email import quote_address

from console.transports.smtp_path import smtp_path

ADDRESSES = [
    "ada@example.com",
    "ada.lovelace+orders@mail.example.co.uk",
    "o'brien@example.ie",
    "x_y-z=1@sub-domain.example",
    "zoë@exämple.de",
    "用户@例子.广告",
    "ADA@EXAMPLE.COM",
    "a@[192.0.2.1]",
    "Ada Lovelace <ada@example.com>",
    "<ada@example.com>",
    " ada@example.com ",
    '"ada lovelace"@example.com',
    "ada@example.com (Ada)",
    "no-at-sign",
    "a..b@example.com",
    ".ada@example.com",
    "ada@example.com\r\nRCPT TO:<x@y.z>",  # parsed: never a second command
    "ada\n@example.com",
]


@pytest.mark.parametrize("address", ADDRESSES)
def test_the_path_is_what_aiosmtplib_would_send(address):
    encoding = "ascii" if address.isascii() else "utf-8"
    assert smtp_path(address, encoding) == quote_address(address).encode(encoding)


def test_a_non_ascii_address_needs_utf8():
    with pytest.raises(UnicodeEncodeError):
        smtp_path("zoë@example.com", "ascii")
