"""How every page shows durations, times, rates and counts; the Jinja filters that do it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from flask import Flask
from markupsafe import Markup, escape

from console.core.plurals import noun_for, plural  # the views import them from here too
from console.core.readable import (
    format_age,
    format_basis_points,
    format_percent,
    format_time,
    join_sentences,
    readable_text,
    sentence,
)
from console.core.readable import format_relative as _relative
from console.models import utcnow
from console.store.delivery_facts import DeliveryFact

__all__ = [
    "age_words",
    "breakable",
    "fact_words",
    "format_age",
    "format_basis_points",
    "format_percent",
    "format_relative",
    "format_time",
    "format_timestamp",
    "join_sentences",
    "noun_for",
    "plural",
    "readable_text",
    "sentence",
    "timestamp_markup",
]
# the age buckets of console/store/intent_search.py as the dashboard and the search name them
AGE_WORDS = {
    "lt1m": "under 1 min",
    "1to5m": "1–5 min",
    "5to60m": "5–60 min",
    "gt1h": "over 1 h",
    "lt1d": "under 1 day",
    "gt1d": "over 1 day",
}
# where a long address, key or id may wrap: after these characters
_WRAP_AFTER = frozenset("@:/")
LONGEST_UNBROKEN = 32  # a longer part may wrap anywhere rather than widen its table


def age_words(buckets: Iterable[str]) -> dict[str, str]:
    """Each age bucket's name -> its label, in the buckets' order."""
    return {name: AGE_WORDS[name] for name in buckets}


def format_timestamp(value: dt.datetime | None, seconds: bool = False) -> str:
    """Show a moment as "2026-11-29 09:12 UTC" (with `seconds`, "09:12:02 UTC")."""
    return format_time(value, seconds=seconds)


def timestamp_markup(value: dt.datetime | None, seconds: bool = False) -> Markup:
    """A moment for a page: it may wrap between its date and its time, never inside either."""
    date, _, time = format_time(value, seconds=seconds).partition(" ")
    if not time:
        return Markup('<span class="nb">{}</span>').format(date)
    return Markup('<span class="nb">{}</span> <span class="nb">{}</span>').format(date, time)


def format_relative(when: dt.datetime | None, now: dt.datetime | None = None) -> str:
    """Say how far a moment is from now: "in 4 min", "12 s ago", "now"."""
    return _relative(when, now or utcnow())


# how a bounce's kind reads beside the word "bounced"
_BOUNCE_KINDS = {"permanent": "permanent", "transient": "temporary", "undetermined": "kind unknown"}


def fact_words(fact: DeliveryFact | None) -> str:
    """Say the provider's latest report: "delivered", "bounced (permanent)", "no report yet"."""
    if fact is None:
        return "no report yet"
    if fact.bounce_type:
        return f"{fact.kind} ({_BOUNCE_KINDS.get(fact.bounce_type, fact.bounce_type)})"
    return fact.kind


def breakable(value: object) -> Markup:
    """`value` escaped, with a wrap opportunity after each "@", ":" and "/", so a long
    address or key wraps between its parts, not inside one."""
    text = "" if value is None else str(value)
    parts, start = [], 0
    for position, char in enumerate(text, 1):
        if char in _WRAP_AFTER or position == len(text):
            parts.append(text[start:position])
            start = position
    return Markup("<wbr>").join(_kept_whole(part) for part in parts)


def _kept_whole(part: str) -> Markup:
    """One part of an address or key, on one line unless it is too long for any column."""
    if len(part) > LONGEST_UNBROKEN:
        return escape(part)
    return Markup('<span class="nb">{}</span>').format(part)


def init_app(app: Flask) -> None:
    """Register the display filters every page uses."""
    app.add_template_filter(format_age, "age")
    app.add_template_filter(timestamp_markup, "ts")
    app.add_template_filter(format_percent, "percent")
    app.add_template_filter(format_basis_points, "basis_points")
    app.add_template_filter(format_relative, "relative")
    app.add_template_filter(readable_text, "readable")
    app.add_template_filter(breakable, "breakable")
    app.add_template_filter(sentence, "sentence")
    app.add_template_filter(plural, "plural")
    app.add_template_filter(noun_for, "noun")
    app.add_template_filter(fact_words, "fact_words")
    app.add_template_filter(format_timestamp, "ts_text")
