"""Counts in words that agree with them, for every layer's messages: pure, no IO."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """Return "1 dead letter" or "3 dead letters" ("1 entry", "2 entries" with `many`)."""
    return f"{count} {noun_for(count, noun, many)}"


def noun_for(count: int, noun: str, many: str | None = None) -> str:
    """Return the noun that agrees with `count`: "intent" for 1, "intents" (or `many`) else."""
    return noun if count == 1 else (many or f"{noun}s")
