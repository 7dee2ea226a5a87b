"""Durations, times and stored reasons the way people read them: pure, no IO.

Every page writes a duration as "45 s", "14 min", "3 h 5 min" or "2 d", a moment as
"2026-12-01 19:13 UTC", and reads text stored by other layers (a status reason, an
alert's summary, an attempt's error) through `readable_text`, which rewrites raw ISO
timestamps, second counts and exception names in those words.
"""

from __future__ import annotations

import datetime as dt
import re

from console.core.plurals import plural

NONE_SHOWN = "–"


def format_age(seconds: float | None) -> str:
    """Say a duration the way people read it: "45 s", "12 min", "3 h 5 min", "2 d 4 h"."""
    if seconds is None:
        return NONE_SHOWN
    seconds = int(max(0, seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 3600:
        return f"{minutes} min"
    if seconds < 86400:
        return f"{hours} h {minutes % 60} min" if minutes % 60 else f"{hours} h"
    return f"{days} d {hours % 24} h" if hours % 24 else f"{days} d"


def format_percent(fraction: float | None) -> str:
    """Show a rate to two decimals, e.g. "0.25 %"; "–" when there is none."""
    return NONE_SHOWN if fraction is None else f"{fraction * 100:.2f} %"


def format_basis_points(basis_points: int) -> str:
    """Show a limit in basis points as a percentage, e.g. 30 -> "0.3 %"."""
    return f"{basis_points / 100:g} %"


def format_window(seconds: float) -> str:
    """Name a window that ends now: "the last hour", "the last 15 min"."""
    return "the last hour" if seconds == 3600 else f"the last {format_age(seconds)}"


def format_time(value: dt.datetime | None, *, seconds: bool = False) -> str:
    """Show a moment in UTC to the minute, e.g. "2026-12-01 19:13 UTC" (or to the second)."""
    if value is None:
        return NONE_SHOWN
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    shape = "%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC"
    return value.astimezone(dt.UTC).strftime(shape)


def format_relative(when: dt.datetime | None, now: dt.datetime) -> str:
    """Say how far a moment is from `now`: "in 4 min", "12 s ago", "now"."""
    if when is None:
        return NONE_SHOWN
    seconds = (when - now).total_seconds()
    if abs(seconds) < 1:
        return "now"
    return f"in {format_age(seconds)}" if seconds > 0 else f"{format_age(-seconds)} ago"


# a timestamp as isoformat() or str() writes it: a "T", or a fraction or an offset
_ISO_TIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?"
    r"| \d{2}:\d{2}:\d{2}(?:\.\d+(?:[+-]\d{2}:\d{2})?|[+-]\d{2}:\d{2}))"
)
_SECONDS = re.compile(r"\b(\d+(?:\.\d+)?) s\b")
_COUNTED = re.compile(r"\b(\d+) ([a-z]+(?: [a-z]+)?)\(s\)")
# exception names a transport stores, and the plain words for what happened
_ERRORS = [
    (r"SMTPServerDisconnected: Unexpected EOF received", "the server hung up without a reply"),
    (r"SMTPServerDisconnected: (.+)", r"the connection was lost (\1)"),
    (r"SMTP(?:Read)?TimeoutError: (.+)", r"no reply in time (\1)"),
    (r"SMTPConnectTimeoutError: (.+)", r"no greeting in time (\1)"),
    (r"SMTPConnectResponseError: (.+)", r"the relay refused the connection (\1)"),
    (r"SMTPConnectError: (.+)", r"could not connect (\1)"),
    (r"SMTPDataError: \((\d{3}), '(.+?)'\)", r"the server answered \1 \2"),
    (r"SMTPRecipientsRefused: .*?\((\d{3}), '(.+?)'.*", r"the recipient was refused: \1 \2"),
    (r"SMTPRecipientRefused: \((\d{3}), '(.+?)'.*?\)", r"the recipient was refused: \1 \2"),
    (r"SMTPSenderRefused: \((\d{3}), '(.+?)'.*?\)", r"the sender was refused: \1 \2"),
    (r"SMTPResponseException: \((\d{3}), '(.+?)'\)", r"the server answered \1 \2"),
    (r"ConnectionRefusedError: (.+)", r"the connection was refused (\1)"),
    (r"(?:Connect|Read|Write|Pool)Timeout: (.+)", r"no answer in time (\1)"),
    (r"ConnectError: (.+)", r"could not connect (\1)"),
    (r"(?:asyncio\.)?TimeoutError: ?", "no answer in time"),
]
_ERROR_PATTERNS = [(re.compile(pattern), words) for pattern, words in _ERRORS]


def _time_words(match: re.Match[str]) -> str:
    raw = match[0].replace("Z", "+00:00")
    try:
        return format_time(dt.datetime.fromisoformat(raw))
    except ValueError:
        return match[0]


def _seconds_words(match: re.Match[str]) -> str:
    seconds = float(match[1])
    return format_age(seconds) if seconds >= 60 else match[0]


def plain_error(text: str) -> str:
    """An exception stored as "Name: message", in plain words where there are some."""
    for pattern, words in _ERROR_PATTERNS:
        if pattern.search(text):
            return pattern.sub(words, text, count=1)
    return text


def readable_text(text: str | None) -> str:
    """Stored words with their raw timestamps, second counts and exception names rewritten."""
    if not text:
        return text or ""
    text = _ISO_TIME.sub(_time_words, str(text))
    text = _SECONDS.sub(_seconds_words, text)
    text = _COUNTED.sub(lambda match: plural(int(match[1]), match[2]), text)
    return plain_error(text)


def sentence(text: str) -> str:
    """`text` as one sentence: a capital first letter and exactly one full stop at the end."""
    text = text.strip().rstrip(".").rstrip()
    if not text:
        return ""
    end = "" if text[-1] in "?!" else "."
    return text[0].upper() + text[1:] + end


def join_sentences(*parts: str) -> str:
    """Sentences joined by one space, each ending in one full stop; repeated ones dropped."""
    shown: list[str] = []
    for part in parts:
        for line in part.splitlines():
            said = sentence(line)
            if said and said not in shown:
                shown.append(said)
    return " ".join(shown)
