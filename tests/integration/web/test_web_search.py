"""Search order and keyset pages: exact lookups newest first, then prefixes in key order."""

from __future__ import annotations

import datetime as dt
import itertools
import random

import pytest
from sqlalchemy import insert

from console.models import Intent, utcnow
from console.store.intent_search import InvalidFilter, SearchFilters, search_intents
from console.web.extensions import db

_numbers = itertools.count(1)


def add_rows(app, rows: list[dict]) -> list[int]:
    """Insert intents (event, key and any other columns given); return their ids in order."""
    now = utcnow()
    values = []
    for offset, row in enumerate(rows):
        number = next(_numbers)
        values.append(
            {
                "message_id": f"<search.{number}@test.localhost>",
                "recipient": f"r{number}@example.com",
                "template": "welcome",
                "status": "pending",
                "created_at": now - dt.timedelta(minutes=len(rows) - offset),
                **row,
            }
        )
    with app.app_context():
        ids = [db.session.execute(insert(Intent).values(**v).returning(Intent.id)).scalar_one()
               for v in values]  # fmt: skip
        db.session.commit()
    return ids


def walk(app, filters: SearchFilters, limit: int, most_rows: int = 200) -> list[int]:
    """Every page of a search, following the keyset positions; the ids in page order."""
    seen, after = [], None
    with app.app_context():
        while len(seen) <= most_rows:
            page = search_intents(db.session, filters, after=after, limit=limit)
            assert len(page.rows) <= limit
            seen += [row.id for row in page.rows]
            if page.next_after is None:
                return seen
            after = page.next_after
    raise AssertionError(f"the pages never end: {seen}")


def sort_value(event: str | None, key: str, q: str) -> str:
    return min(value for value in (event, key) if value is not None and value.startswith(q))


def test_prefix_matches_come_in_key_order_placed_by_their_smaller_matching_value(app):
    rows = [
        dict(event="ord-2", idempotency_key="ord-2:b"),
        dict(event="ord-2", idempotency_key="ord-2:a"),  # same event: the lower id first
        dict(event="ord-10", idempotency_key="zz:1"),  # only the event matches
        dict(event=None, idempotency_key="ord-1:x"),  # only the key, no event at all
        dict(event="other:5", idempotency_key="ord-3:y"),  # only the key
        dict(event="ord-9", idempotency_key="ord-0:z"),  # both: placed by the key
        dict(event="ord-é", idempotency_key="k:1"),  # past every ASCII character
        dict(event="ordZ", idempotency_key="k:2"),  # "Z" sorts between "-" and "é"
        dict(event="ORD-1", idempotency_key="ord-4"),  # the event differs in case
        dict(event="nothing", idempotency_key="k:3"),  # no match
        dict(event="ord-5", idempotency_key="ord-5:k", provider_message_id="ord"),  # exact too
    ]
    ids = add_rows(app, rows)
    names = ["2b", "2a", "10", "1x", "3y", "9", "e", "Z", "4", "no", "exact"]
    by_name = dict(zip(names, ids, strict=True))
    # "ord-0:z" < "ord-10" < "ord-1:x" ("0" < ":") < "ord-2" (twice) < ... < "ord-é" < "ordZ"
    expected = [by_name[name] for name in ["exact", "9", "10", "1x", "2b", "2a"]]
    expected += [by_name[name] for name in ["3y", "4", "e", "Z"]]
    for limit in (1, 2, 3, 4, 50):
        assert walk(app, SearchFilters(q="ord"), limit) == expected, limit


@pytest.mark.parametrize("seed", [1, 2])
def test_random_prefixes_page_without_gaps_or_repeats(app, seed):
    """Every match exactly once, in (sort value, id) order, whatever the page size."""
    rng = random.Random(seed)
    alphabet = ["a", "b", "-", "Z", "é", ":"]

    def word() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))

    rows = []
    for number in range(90):
        event = rng.choice([None, "q" + word(), "q" + word(), "x" + word(), "qa"])
        key = rng.choice(["q", "x", "qa"]) + word() + f"#{number}"
        status = rng.choice(["pending", "failed"])
        rows.append(dict(event=event, idempotency_key=key, status=status))
    ids = add_rows(app, rows)
    for q in ("q", "qa", "qb-", "qé"):
        for status in (None, "failed"):
            matching = [
                (sort_value(row["event"], row["idempotency_key"], q), intent_id)
                for intent_id, row in zip(ids, rows, strict=True)
                if (row["event"] or "").startswith(q) or row["idempotency_key"].startswith(q)
                if status is None or row["status"] == status
            ]
            expected = [intent_id for _, intent_id in sorted(matching)]
            for limit in (1, 4, 7):
                filters = SearchFilters(q=q, status=status)
                assert walk(app, filters, limit) == expected, (q, status, limit)


def test_exact_lookups_come_first_newest_first_and_once(app):
    ids = add_rows(
        app,
        [
            dict(event="ada@example.com:welcome", idempotency_key="w:1", recipient="x@example.com"),
            dict(event="order:1", idempotency_key="o:1", recipient="ada@example.com"),
            dict(event="order:2", idempotency_key="o:2", recipient="ada@example.com"),
            dict(event="ada@example.com", idempotency_key="o:3", recipient="ada@example.com"),
        ],
    )
    # exact recipients newest first (the last one also matches as a prefix: listed once)
    assert walk(app, SearchFilters(q="ada@example.com"), 2) == [ids[3], ids[2], ids[1], ids[0]]
    assert walk(app, SearchFilters(q="ada@example.com"), 3) == [ids[3], ids[2], ids[1], ids[0]]


def test_a_position_from_another_kind_of_list_is_refused(app):
    add_rows(app, [dict(event=f"e:{n}", idempotency_key=f"k:{n}") for n in range(3)])
    with app.app_context():
        page = search_intents(db.session, SearchFilters(q="e:"), limit=1)
        assert page.next_after.startswith("p")
        with pytest.raises(InvalidFilter, match="search with text"):
            search_intents(db.session, SearchFilters(), after=page.next_after)
        with pytest.raises(InvalidFilter, match="not one this console made"):
            search_intents(db.session, SearchFilters(q="e:"), after="q12:e")
