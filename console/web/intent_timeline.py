"""An intent's timeline as its page shows it: the store's story, without an error that only
repeats the reply, ending with the status the intent has now when its last line said another."""

from __future__ import annotations

import dataclasses

from console.web.intent_story import IntentDetail, TimelineEntry


def timeline_now(detail: IntentDetail) -> list[TimelineEntry]:
    """The timeline, ending with the intent's status now when its last line said another
    (a requeued intent the worker expired at once, say)."""
    entries = [_worded(_without_repeated_error(entry)) for entry in detail.timeline]
    intent = detail.intent
    said = [value for label, value in entries[-1].facts if label == "status"] if entries else []
    if not said or str(said[-1]).rpartition("→ ")[2] == intent.status:
        return entries
    at = max(entries[-1].at, intent.updated_at or entries[-1].at)
    facts = [("reason", intent.status_reason)] if intent.status_reason else []
    return [*entries, TimelineEntry(at, "status", f"Now {intent.status}", facts)]


def _without_repeated_error(entry: TimelineEntry) -> TimelineEntry:
    """An attempt's entry without its error when the error only repeats the reply shown."""
    facts = dict(entry.facts)
    reply, error = facts.get("reply"), facts.get("error")
    if not (isinstance(reply, str) and isinstance(error, str) and reply in error):
        return entry
    kept = [(label, value) for label, value in entry.facts if label != "error"]
    return dataclasses.replace(entry, facts=kept)


# an operator entry's stored details as a person reads them; None drops the detail
_DETAIL_WORDS = {
    "bulk": lambda value: ("done", "in bulk, over a search's results") if value is True else None,
    "preview": lambda value: None,  # the one-use id that tied the confirmation to its preview
}


def _worded(entry: TimelineEntry) -> TimelineEntry:
    """An operator entry with its stored details worded, not shown as raw values."""
    if entry.kind != "operator":
        return entry
    facts = []
    for label, value in entry.facts:
        word = _DETAIL_WORDS.get(label)
        worded = word(value) if word else (label, value)
        if worded is not None:
            facts.append(worded)
    return dataclasses.replace(entry, facts=facts)
