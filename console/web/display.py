"""How every page shows durations, times, rates and counts; the Jinja filters that do it."""

from __future__ import annotations

import datetime as dt

from flask import Flask

from console.core.plurals import noun_for, plural  # the views import them from here too
from console.models import utcnow


def format_age(seconds: float | None) -> str:
    """Say a duration the way people read it: "45 s", "12 min", "3 h 5 min", "2 d 4 h"."""
    if seconds is None:
        return "–"
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
    return "–" if fraction is None else f"{fraction * 100:.2f} %"


def format_basis_points(basis_points: int) -> str:
    """Show a limit in basis points as a percentage, e.g. 30 -> "0.3 %"."""
    return f"{basis_points / 100:g} %"


def format_timestamp(value: dt.datetime | None) -> str:
    """Show a UTC timestamp to the second, e.g. "2026-11-29 09:12:02"."""
    if value is None:
        return "–"
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def format_relative(when: dt.datetime | None, now: dt.datetime | None = None) -> str:
    """Say how far a moment is from now: "in 4 min", "12 s ago", "now"."""
    if when is None:
        return "–"
    seconds = (when - (now or utcnow())).total_seconds()
    if abs(seconds) < 1:
        return "now"
    return f"in {format_age(seconds)}" if seconds > 0 else f"{format_age(-seconds)} ago"


def init_app(app: Flask) -> None:
    """Register the display filters every page uses."""
    app.add_template_filter(format_age, "age")
    app.add_template_filter(format_timestamp, "ts")
    app.add_template_filter(format_percent, "percent")
    app.add_template_filter(format_basis_points, "basis_points")
    app.add_template_filter(format_relative, "relative")
    app.add_template_filter(plural, "plural")
    app.add_template_filter(noun_for, "noun")
