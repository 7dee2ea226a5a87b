"""When the search box finds nothing: the same event as stored, or the closest one.

Applications store events as ``order:1004``; support staff type ``order-1004``,
``order 1004`` or ``1004``. A search that finds nothing is tried again with the
event's usual spelling (``name:number``, the names taken from recent events);
if that finds nothing either, the page offers the event whose number shares the
longest start with the one typed.
"""

from __future__ import annotations

import dataclasses
import re

from sqlalchemy.orm import Session

from console.store import intent_search
from console.store.intent_search import SearchFilters

_SPELLED = re.compile(r"([A-Za-z][A-Za-z0-9_.]*?)(?:\s*[-_ #/.]\s*|)(\d+)")
_NUMBER = re.compile(r"#?(\d{1,18})")
MOST_NAMES_TRIED = 5
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


def spellings(session: Session, q: str) -> list[str]:
    """The stored spellings `q` may mean: ``order:1004`` for ``order-1004`` or ``1004``."""
    if match := _SPELLED.fullmatch(q.strip()):
        spelled = f"{match[1].lower()}:{match[2]}"
        return [spelled] if spelled != q else []
    if match := _NUMBER.fullmatch(q.strip()):
        return [f"{name}:{match[1]}" for name in event_names(session)]
    return []


def respelled_search(session: Session, filters: SearchFilters) -> Respelled | None:
    """The first page of the first stored spelling of the search text that finds anything."""
    for spelled in spellings(session, filters.q):
        if _first(session, filters, spelled).rows:
            respelled = dataclasses.replace(filters, q=spelled)
            return Respelled(filters.q, respelled, intent_search.search_intents(session, respelled))
    return None


def closest_event(session: Session, filters: SearchFilters) -> str | None:
    """The event (or key) that shares the longest start with a stored spelling of the text."""
    for spelled in spellings(session, filters.q) or [filters.q]:
        name, _, number = spelled.rpartition(":")
        if not name or not number.isdigit():
            continue
        for cut in range(len(number) - 1, 0, -1):
            page = _first(session, filters, f"{name}:{number[:cut]}")
            if page.rows:
                row = page.rows[0]
                return row.event or row.idempotency_key
    return None


def another_try(session: Session, filters: SearchFilters) -> tuple[Respelled | None, str | None]:
    """For a search that found nothing: its stored spelling's results, else the closest event."""
    respelled = respelled_search(session, filters)
    if respelled is not None:
        return respelled, None
    return None, closest_event(session, filters)
