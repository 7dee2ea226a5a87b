"""The ``<address>`` of MAIL FROM and RCPT TO, as aiosmtplib's ``quote_address`` makes it,
without parsing an address that is already a plain ``local@domain``."""

from __future__ import annotations

import re

from aiosmtplib.email import quote_address

# A dot-atom local part and a domain of letters, digits, dots and hyphens: such an
# address comes out of RFC 5322 parsing as it went in (other forms are parsed).
_PLAIN_ADDRESS = re.compile(
    r"[\w!#$%&'*+/=?^`{|}~-]+(?:\.[\w!#$%&'*+/=?^`{|}~-]+)*@[\w-]+(?:\.[\w-]+)*"
)


def smtp_path(address: str, encoding: str) -> bytes:
    """The bracketed path of `address`, encoded (UnicodeEncodeError for a non-ASCII
    address in "ascii": such an address needs SMTPUTF8)."""
    if _PLAIN_ADDRESS.fullmatch(address):
        return b"<" + address.encode(encoding) + b">"
    return quote_address(address).encode(encoding)
