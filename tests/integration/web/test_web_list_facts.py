"""Support reads the provider's latest word on each mail in the list itself: delivered,
deferred, bounced, complained or rejected beside the status, with its time; the search
filters by that word and the dashboard's rates link to the lists they count."""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest

from console.models import utcnow


def text_of(page: str) -> str:
    page = re.sub(r"<wbr>", "", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def row_of(page: str, intent_id: int) -> str:
    match = re.search(rf'<tr id="intent-{intent_id}".*?</tr>', page, re.DOTALL)
    assert match, f"no row for intent {intent_id}"
    return text_of(match.group(0))


@pytest.fixture
def reported(add_intent):
    now = utcnow()
    ago = {minutes: now - dt.timedelta(minutes=minutes) for minutes in (3, 10, 90)}
    return {
        "delivered": add_intent("submitted", to="grace@example.com", delivered_at=ago[3]),
        "hard": add_intent(
            "submitted", to="gone@example.com", bounced_at=ago[10], bounce_type="permanent"
        ),
        "soft": add_intent(
            "submitted", to="full@example.com", bounced_at=ago[10], bounce_type="transient"
        ),
        "complained": add_intent(
            "submitted", to="annoyed@example.com", delivered_at=ago[90], complained_at=ago[3]
        ),
        "deferred": add_intent("submitted", to="slow@example.com", delayed_at=ago[10]),
        "later_delivered": add_intent(
            "submitted", to="late@example.com", delayed_at=ago[90], delivered_at=ago[10]
        ),
        "rejected": add_intent("failed", to="nobody@example.com", rejected_at=ago[10]),
        "quiet": add_intent("submitted", to="quiet@example.com"),
        "old_bounce": add_intent(
            "submitted",
            to="old@example.com",
            bounce_type="permanent",
            bounced_at=now - dt.timedelta(days=3),
        ),  # fmt: skip
    }


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("delivered", "delivered 3 min ago"),
        ("hard", "bounced (permanent) 10 min ago"),
        ("soft", "bounced (temporary) 10 min ago"),
        ("complained", "complained 3 min ago"),
        ("deferred", "deferred 10 min ago"),
        ("later_delivered", "delivered 10 min ago"),
        ("rejected", "rejected 10 min ago"),
    ],
)
def test_each_row_shows_the_latest_provider_fact_beside_the_status(
    console_client, reported, name, words
):
    page = console_client("viewer").get("/intents").text
    assert words in row_of(page, reported[name])


def test_a_row_without_a_report_says_so_quietly(console_client, reported):
    page = console_client("viewer").get("/intents").text
    assert "no report yet" in row_of(page, reported["quiet"])


def test_a_search_by_recipient_shows_the_bounce_not_only_the_acceptance(console_client, reported):
    page = console_client("viewer").get("/intents?q=gone@example.com").text
    row = row_of(page, reported["hard"])
    assert "submitted" in row and "bounced (permanent)" in row
    assert 'class="fact fact-bounced"' in page


def test_the_search_filters_by_fact_and_window(console_client, reported):
    client = console_client("viewer")
    bounced = client.get("/intents?fact=bounced&within=24h").text
    found = set(map(int, re.findall(r'<tr id="intent-(\d+)"', bounced)))
    assert found == {reported["hard"], reported["soft"]}
    hard = client.get("/intents?fact=hard_bounced").text
    found = set(map(int, re.findall(r'<tr id="intent-(\d+)"', hard)))
    assert found == {reported["hard"], reported["old_bounce"]}
    complained = client.get("/intents?fact=complained&within=7d").text
    assert re.findall(r'<tr id="intent-(\d+)"', complained) == [str(reported["complained"])]
    assert 'option value="complained" selected' in complained


def test_an_unknown_fact_is_refused_in_one_line(console_client):
    response = console_client("viewer").get("/intents?fact=opened")
    assert response.status_code == 400
    assert "unknown provider report 'opened'" in text_of(response.text)


def test_the_dashboard_rates_link_to_the_lists_they_count(console_client, reported):
    page = console_client("viewer").get("/").text
    assert 'href="/intents?fact=hard_bounced&amp;within=24h"' in page
    assert 'href="/intents?fact=complained&amp;within=7d"' in page


def test_the_export_carries_the_latest_fact(console_client, reported):
    csv = console_client("viewer").get("/intents/export.csv?q=gone@example.com").text
    header, row = csv.splitlines()[:2]
    assert header.split(",")[-2:] == ["latest_fact", "latest_fact_at"]
    assert row.split(",")[-2] == "bounced"
