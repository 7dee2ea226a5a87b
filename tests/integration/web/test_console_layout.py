"""Layout: a chart with a y-axis, plurals that agree, a favicon, the first intents a bulk
action touches (long values that wrap: tests/e2e/browser/test_layout.py)."""

from __future__ import annotations

import html
import re

from console.web.dashboard import chart_axis


def test_chart_axis_has_round_ticks_from_zero_to_the_peak():
    assert [value for value, _ in chart_axis(0)] == [0]
    assert [value for value, _ in chart_axis(3)] == [0, 1, 2, 3]
    assert [value for value, _ in chart_axis(7)] == [0, 2, 4, 6]
    assert [value for value, _ in chart_axis(120)] == [0, 50, 100]
    ticks = dict(chart_axis(3))
    assert ticks[0] == 120 and ticks[3] == 4  # the peak's bar top, as chart_shapes draws it


def test_dashboard_chart_labels_its_y_axis(console_client):
    page = console_client("viewer").get("/").text
    assert 'class="y-tick"' in page
    assert ">attempts / min<" in page


def test_bulk_preview_speaks_in_correct_plurals_and_lists_what_it_touches(
    console_client, add_intent
):
    one = add_intent("failed", event="campaign:7", key="campaign:7:a")
    client = console_client("operator")
    page = client.get("/intents/bulk?action=requeue&q=campaign:7&preview=abcdefgh12345678").text
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    assert "1 intents" not in text
    assert "1 intent matches" in text
    assert "requeue 1 intent" in text
    assert f'href="/intents/{one}"' in page
    assert 'id="bulk-targets"' in page


def test_bulk_preview_lists_at_most_twenty(console_client, add_intent):
    ids = [add_intent("failed", event=f"wave:{n:02d}", key=f"wave:{n:02d}") for n in range(23)]
    page = (
        console_client("operator")
        .get("/intents/bulk?action=requeue&q=wave:&preview=abcdefgh12345678")
        .text
    )
    [listing] = re.findall(r'<ol id="bulk-targets">(.*?)</ol>', page, re.DOTALL)
    linked = [int(found) for found in re.findall(r'href="/intents/(\d+)"', listing)]
    assert linked == ids[:20]
    assert "and 3 more" in page


def test_every_page_links_a_favicon_that_exists(app, console_client):
    client = console_client("viewer")
    page = client.get("/").text
    [href] = re.findall(r'<link rel="icon" href="([^"]+)"', page)
    assert client.get(href).status_code == 200


def test_favicon_ico_answers_the_icon_without_a_login(app):
    response = app.test_client().get("/favicon.ico")
    assert response.status_code == 200
    assert response.mimetype == "image/svg+xml" and b"<svg" in response.data


def test_counts_agree_with_their_nouns():
    from console.web.display import noun_for, plural

    assert plural(1, "intent") == "1 intent" and plural(0, "intent") == "0 intents"
    assert plural(2, "entry", "entries") == "2 entries"
    assert noun_for(1, "entry", "entries") == "entry"


def test_the_dashboard_counts_attempts_with_the_plural_filter(console_client):
    page = console_client("viewer").get("/").text
    assert "0 attempts accepted" in page


def test_the_erasure_preview_speaks_in_agreeing_plurals(console_client, add_intent):
    admin = console_client("admin", "dpo")
    add_intent("submitted", to="solo@example.com")
    form = {"address": "solo@example.com", "reason": "ticket 9", "csrf_token": admin.csrf_token}
    admin.post("/erasure/preview", data=form)
    page = admin.get("/erasure").text
    assert "finished intent, with its attempts" in page
    assert "<strong>0</strong> provider events" in page


def test_the_suppression_form_and_list_call_the_free_text_a_note(console_client):
    page = console_client("operator").get("/suppressions").text
    form = page[page.index('id="add-suppression"') :]
    form = form[: form.index("</form>")]
    assert "<label>Note " in form and "Reason" not in form
