"""When the search box finds nothing: the same event as stored, or the closest one.

Applications store events as ``order:1004``; support staff type ``order-1004``,
``order 1004``, ``ORDER:1004``, ``ordr:1004`` or ``1004``. A search that finds nothing
is tried again with the event's usual spelling (``name:number``, the name in lower case
or the nearest of the names of recent events); if that finds nothing either, the page
offers the stored event one typo away from it (a digit missing, added, changed or two
swapped), the nearest by edit distance.
"""

from __future__ import annotations

import dataclasses
import re
import string

from sqlalchemy.orm import Session

from console.store import intent_search
from console.store.intent_search import SearchFilters

_SPELLED = re.compile(r"([A-Za-z][A-Za-z0-9_.]*?)(?:\s*[-_ #/.:]\s*|)(\d+)")
_NUMBER = re.compile(r"#?(\d{1,18})")
MOST_NAMES_TRIED = 5
LONGEST_NUMBER_VARIED = 12  # digits; a longer number is an id pasted whole, not typed
# what the search box reads, said on a page that found nothing
FORMATS = (
    "a business event or key, or its start (order:1004, user:18:)",
    "a recipient's whole address",
    "a Message-ID",
    "a provider message id",
    "an intent's number (#42)",
)


@dataclasses.dataclass(frozen=True)
class Respelled:
    typed: str
    filters: SearchFilters
    page: intent_search.SearchPage


def edit_distance(first: str, second: str) -> int:
    """Count the edits between two texts: a character added, removed, changed, or two swapped."""
    before, row = None, list(range(len(second) + 1))
    for i, char in enumerate(first, 1):
        current = [i]
        for j, other in enumerate(second, 1):
            cost = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (char != other))
            if before and i > 1 and j > 1 and char == second[j - 2] and first[i - 2] == other:
                cost = min(cost, before[j - 2] + 1)
            current.append(cost)
        before, row = row, current
    return row[-1]


def one_typo_away(number: str) -> set[str]:
    """Every number one edit from `number`: a digit missing, added, changed or two swapped."""
    found = set()
    for at in range(len(number) + 1):
        head, tail = number[:at], number[at:]
        found.update(head + digit + tail for digit in string.digits)
        if tail:
            found.add(head + tail[1:])
            found.update(head + digit + tail[1:] for digit in string.digits)
        if len(tail) > 1:
            found.add(head + tail[1] + tail[0] + tail[2:])
    found.discard(number)
    return {variant for variant in found if variant}


def _first(session: Session, filters: SearchFilters, q: str) -> intent_search.SearchPage:
    return intent_search.search_intents(session, dataclasses.replace(filters, q=q), limit=1)


def event_names(session: Session) -> list[str]:
    """The names before the first ":" of the newest events ("order", "user", ...)."""
    page = intent_search.search_intents(session, SearchFilters())
    names: list[str] = []
    for row in page.rows:
        name = (row.event or row.idempotency_key).partition(":")[0]
        if name and name not in names:
            names.append(name)
    return names[:MOST_NAMES_TRIED]


def _nearest_names(session: Session, typed: str) -> list[str]:
    """The names of recent events `typed` may mean: the same in another case, or a typo away."""
    allowed = 1 if len(typed) <= 4 else 2
    scored = [(edit_distance(name.lower(), typed), name) for name in event_names(session)]
    return [name for distance, name in sorted(scored) if distance <= allowed]


def spellings(session: Session, q: str) -> list[str]:
    """The stored spellings `q` may mean: ``order:1004`` for ``ORDER-1004`` or ``ordr:1004``."""
    text = q.strip()
    if match := _SPELLED.fullmatch(text):
        name, number = match[1].lower(), match[2]
        names = [*_nearest_names(session, name), name]
        return [
            spelled for spelled in dict.fromkeys(f"{n}:{number}" for n in names) if spelled != q
        ]
    if match := _NUMBER.fullmatch(text):
        return [f"{name}:{match[1]}" for name in event_names(session)]
    return [text.lower()] if text.lower() != text else []


def respelled_search(session: Session, filters: SearchFilters) -> Respelled | None:
    """The first page of the first stored spelling of the search text that finds anything."""
    for spelled in spellings(session, filters.q):
        if _first(session, filters, spelled).rows:
            respelled = dataclasses.replace(filters, q=spelled)
            return Respelled(filters.q, respelled, intent_search.search_intents(session, respelled))
    return None


def closest_event(session: Session, filters: SearchFilters) -> str | None:
    """The stored event (or key) one typo from a spelling of the text, the nearest first."""
    for spelled in spellings(session, filters.q) or [filters.q]:
        name, _, number = spelled.rpartition(":")
        if not name or not number.isdigit() or len(number) > LONGEST_NUMBER_VARIED:
            continue
        near = {f"{name}:{variant}" for variant in one_typo_away(number)}
        found = intent_search.stored_events(session, near, filters)
        if found:
            return min(found, key=lambda event: (edit_distance(event, spelled), event))
    return None


def another_try(session: Session, filters: SearchFilters) -> tuple[Respelled | None, str | None]:
    """For a search that found nothing: its stored spelling's results, else the closest event."""
    respelled = respelled_search(session, filters)
    if respelled is not None:
        return respelled, None
    return None, closest_event(session, filters)
