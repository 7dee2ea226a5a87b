"""Support types an event the way people write it: ``order-1004``, ``order 1004``, ``1004``.
The search finds ``order:1004``; one that finds nothing says what the box reads and offers
the closest event."""

from __future__ import annotations

import html
import re

import pytest


def text_of(page: str) -> str:
    page = re.sub(r"<wbr>", "", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


@pytest.fixture
def orders(add_intent):
    return {
        number: add_intent("submitted", event=f"order:{number}", key=f"order:{number}:confirmation")
        for number in (1001, 1004)
    }


@pytest.mark.parametrize(
    "typed",
    ["order-1004", "order 1004", "Order_1004", "1004", "#1004", "ORDER:1004", "Order:1004",
     "ordr:1004", "oder-1004", "ORDRE 1004"],
)  # fmt: skip
def test_the_way_people_type_an_event_finds_it(console_client, orders, typed):
    page = console_client("viewer").get("/intents", query_string={"q": typed}).text
    assert f'id="intent-{orders[1004]}"' in page, typed
    assert f'id="intent-{orders[1001]}"' not in page
    said = text_of(page)
    assert f"Nothing is stored as “{typed}”: showing “order:1004”" in said


def test_the_stored_spelling_is_not_retried(console_client, orders):
    page = console_client("viewer").get("/intents?q=order:1004").text
    assert 'id="respelled"' not in page and f'id="intent-{orders[1004]}"' in page


def test_an_empty_result_offers_the_closest_event_and_the_formats(console_client, orders):
    page = console_client("viewer").get("/intents?q=order-1040").text
    said = text_of(page)
    assert "No intent matches “order-1040”" in said
    assert "Closest event: order:1004" in said
    assert 'href="/intents?q=order:1004"' in page
    assert "a recipient's whole address" in said and "an intent's number (#42)" in said
    assert "e.g. order:1004" in said


def test_an_unlike_text_gets_the_formats_without_a_closest_event(console_client, orders):
    said = text_of(console_client("viewer").get("/intents?q=zzz-nothing").text)
    assert "No intent matches “zzz-nothing”" in said and "Closest event" not in said
    assert "The search box finds" in said


def test_the_placeholder_shows_the_stored_format(console_client):
    page = console_client("viewer").get("/intents").text
    assert 'placeholder="order:1004 · ada@example.com · #42"' in page


@pytest.mark.parametrize(
    ("typed", "closest"), [("order:1014", "order:1004"), ("ORDER:1041", "order:1001")]
)
def test_the_closest_event_is_the_nearest_by_edit_distance(console_client, orders, typed, closest):
    said = text_of(console_client("viewer").get("/intents", query_string={"q": typed}).text)
    assert f"Closest event: {closest}" in said


def test_a_number_far_from_every_stored_one_gets_no_closest_event(
    console_client, orders, add_intent
):
    add_intent("submitted", event="order:991", key="order:991:confirmation")
    said = text_of(console_client("viewer").get("/intents?q=order:9999").text)
    assert "No intent matches “order:9999”" in said and "Closest event" not in said


def test_a_whole_key_in_another_case_is_found(console_client, orders):
    page = console_client("viewer").get("/intents?q=ORDER:1004:CONFIRMATION").text
    assert f'id="intent-{orders[1004]}"' in page
    assert "showing “order:1004:confirmation”" in text_of(page)
