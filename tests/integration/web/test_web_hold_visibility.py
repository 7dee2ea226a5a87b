"""Holds cannot be missed: the top of the dashboard, the navigation on every page, the lanes
line, the templates list; a hold with no end reads the same on every page."""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest

from console.models import utcnow


def text_of(page: str) -> str:
    page = re.sub(r"<wbr>", "", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def ends_of(page: str) -> list[str]:
    return [text_of(cell).strip() for cell in re.findall(r'<td class="hold-ends">(.*?)</td>', page)]


def post(client, path: str, **form):
    return client.post(path, data={"csrf_token": client.csrf_token, **form})


@pytest.fixture
def held(console_client, add_intent):
    """The bulk lane held without an end, by olga; two bulk intents wait behind it."""
    operator = console_client("operator", "olga")
    add_intent("pending", lane="bulk")
    add_intent("pending", lane="bulk")
    assert (
        post(operator, "/holds", kind="lane", value="bulk", reason="maintenance").status_code == 303
    )
    return operator


def test_the_hold_is_the_first_thing_on_the_dashboard(held):
    page = held.get("/").text
    alerts = page.index('<div class="alerts"')
    assert alerts < page.index('<div class="tiles">')
    banner = text_of(page[page.index('id="holds-banner"') : page.index("</div>", alerts)])
    assert "Held: lane bulk since" in banner
    assert "by olga, no end: until released; 2 pending intents wait" in banner


def test_every_page_links_the_holds_with_their_count(held, console_client):
    viewer = console_client("viewer")
    for path in ("/", "/intents", "/events", "/templates", "/suppressions"):
        [link] = re.findall(
            r'<a href="/holds" id="nav-holds"[^>]*>(.*?)</a>', viewer.get(path).text, re.S
        )
        assert text_of(link).split() == ["Holds", "1"], path


def test_the_navigation_links_the_holds_when_nothing_is_held(console_client):
    page = console_client("viewer").get("/intents").text
    [link] = re.findall(r'<a href="/holds" id="nav-holds"[^>]*>(.*?)</a>', page, re.S)
    assert text_of(link).strip() == "Holds"


def test_the_lanes_line_says_a_lane_is_held(held):
    shown = text_of(held.get("/").text)
    assert "Every lane is running" not in shown
    assert "bulk : held by olga since" in shown
    assert "no end: until released; 2 intents wait" in shown


def test_a_hold_without_an_end_reads_the_same_on_both_pages(held):
    on_dashboard = ends_of(held.get("/").text)
    on_holds = ends_of(held.get("/holds").text)
    assert on_dashboard == on_holds == ["no end: until released"]
    assert "released by hand" not in held.get("/").text


def test_a_hold_with_an_end_shows_it(console_client):
    operator = console_client("operator")
    until = utcnow().replace(microsecond=0) + dt.timedelta(days=1)
    post(operator, "/holds", kind="template", value="welcome", reason="typo",
         until=until.strftime("%Y-%m-%d %H:%M"))  # fmt: skip
    ends = ends_of(operator.get("/holds").text)
    assert ends == [f"until {until:%Y-%m-%d %H:%M} UTC"]


def test_the_templates_list_shows_a_held_template(console_client):
    operator = console_client("operator", "olga")
    assert (
        post(operator, "/holds", kind="template", value="welcome", reason="typo").status_code == 303
    )
    for client in (operator, console_client("viewer")):
        page = client.get("/templates").text
        [row] = re.findall(r'<tr id="template-welcome">(.*?)</tr>', page, re.S)
        assert 'class="status status-held"' in row
        assert "by olga since" in text_of(row) and "no end: until released" in text_of(row)
        [other] = re.findall(r'<tr id="template-login-code">(.*?)</tr>', page, re.S)
        assert "status-held" not in other
