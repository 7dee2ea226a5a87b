"""Text no database column stores: NUL, and lone surrogates (what Python makes of bytes that
were not UTF-8 when it decodes with ``surrogateescape``). Pure."""

from __future__ import annotations

import re

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable(text: str) -> bool:
    """Whether `text` holds a NUL or a lone surrogate."""
    return _UNSTORABLE.search(text) is not None


def storable(text: str) -> str:
    """`text` with each NUL and lone surrogate replaced by U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", text) if unstorable(text) else text
