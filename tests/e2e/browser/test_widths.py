"""Every page in every state at a phone's, a laptop's and a wide screen's width: no page
scrolls sideways, no id, status, lane, role or name breaks inside a word, and the words
on screen hold no raw ISO time, bare second count, exception name or doubled punctuation."""

from __future__ import annotations

import pytest

from console.web.extensions import db
from tests.support.browser_console import add_intent, log_in
from tests.support.console_states import add_every_state, page_problems, pages

pytestmark = pytest.mark.browser

# every word of a table cell, a status, a role or a navigation link that sits on two lines
BROKEN_WORDS = """() => {
  const broken = [];
  const roots = document.querySelectorAll(
    'main td, main th, .status, .token, .role, .tile span, .topbar nav a, .whoami a');
  for (const root of roots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      // prose may wrap after a hyphen; what is kept on one line may not wrap at all
      const kept = getComputedStyle(node.parentElement).whiteSpace === 'nowrap';
      for (const match of node.textContent.matchAll(kept ? /\\S+/g : /[^\\s-]+-?/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set([...range.getClientRects()]
          .filter((rect) => rect.width > 0).map((rect) => Math.round(rect.top)));
        if (lines.size > 1) broken.push(match[0]);
      }
    }
  }
  return broken;
}"""
# a table that scrolls in its own box: welcome on a phone, not on a laptop or wider
SCROLLING_TABLES = """() => [...document.querySelectorAll('.table-wrap')]
  .filter((box) => box.scrollWidth > box.clientWidth + 1)
  .map((box) => box.querySelector('table').id || box.querySelector('table').className)"""
RUNS = [("ada", 390), ("ada", 1366), ("ada", 1920), ("olga", 1366), ("vic", 390)]


@pytest.fixture(scope="module")
def states(live_console):
    with live_console.app.app_context():
        found = add_every_state(db.session)
        db.session.commit()
        return found


@pytest.mark.parametrize(("username", "width"), RUNS)
def test_every_page_fits_and_reads_cleanly(live_console, chromium, states, username, width):
    context = chromium.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    found = {}
    try:
        log_in(page, live_console, username)
        for path in pages(states):
            page.goto(live_console.url(path))
            problems = page_problems(page.inner_text("body"))
            scroll_width = page.evaluate("document.documentElement.scrollWidth")
            if scroll_width > width:
                problems.append(f"{scroll_width} px wide")
            problems += [f"broken word: {word}" for word in page.evaluate(BROKEN_WORDS)]
            if width >= 1366:
                problems += [f"table scrolls: {name}" for name in page.evaluate(SCROLLING_TABLES)]
            if problems:
                found[path] = problems
    finally:
        context.close()
    assert found == {}


# each row's status and provider report, and whether any part of it lies past the screen's edge
ROW_STATES = """() => [...document.querySelectorAll('#result-table tbody tr')].map((row) => {
  const parts = [...row.querySelectorAll('.status, .fact')];
  return {
    id: row.id,
    words: parts.map((part) => part.textContent.trim()),
    off_screen: parts.some((part) => part.getBoundingClientRect().right > window.innerWidth),
  };
})"""


@pytest.fixture(scope="module")
def bounced(live_console):
    from console.models import Intent, utcnow

    intent_id = add_intent(live_console, "order:4711:confirmation", "submitted", "order:4711")
    with live_console.app.app_context():
        db.session.query(Intent).filter_by(id=intent_id).update(
            {"bounced_at": utcnow(), "bounce_type": "permanent"}
        )
        db.session.commit()
    return intent_id


@pytest.mark.parametrize("width", [390, 1366])
def test_each_search_result_shows_its_status_and_report_without_a_sideways_scroll(
    live_console, chromium, bounced, width
):
    context = chromium.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        log_in(page, live_console, "vic")
        page.goto(live_console.url("/intents?q=ORDER-4711"))
        page.wait_for_selector(f"#intent-{bounced} .fact")
        rows = page.evaluate(ROW_STATES)
        scrolling = page.evaluate(SCROLLING_TABLES)
    finally:
        context.close()
    assert rows == [
        {
            "id": f"intent-{bounced}",
            "words": ["submitted", "bounced (permanent)"],
            "off_screen": False,
        }
    ]
    assert scrolling == []


# the users table's controls that lie past the screen's right edge
CONTROLS_OFF_SCREEN = """() => [...document.querySelectorAll(
  '#user-table button, #user-table select, #user-table input:not([type=hidden])')]
  .filter((control) => control.getBoundingClientRect().right > window.innerWidth + 1)
  .map((control) => control.getAttribute('aria-label') || control.textContent.trim())"""
# each chart label's size on screen, and the labels that overlap one another or leave the chart
CHART_LABELS = """() => {
  const svg = document.querySelector('svg.chart');
  const box = svg.getBoundingClientRect();
  const labels = [...svg.querySelectorAll('text')].map((text) => ({
    text: text.textContent,
    px: parseFloat(getComputedStyle(text).fontSize) * text.getScreenCTM().a,
    rect: text.getBoundingClientRect(),
  }));
  const overlaps = (a, b) =>
    a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  return {
    small: labels.filter((l) => l.px < 10).map((l) => `${l.text} at ${l.px.toFixed(1)} px`),
    overlapping: labels.flatMap((a, i) => labels.slice(i + 1)
      .filter((b) => overlaps(a.rect, b.rect)).map((b) => `${a.text} / ${b.text}`)),
    clipped: labels.filter((l) => l.rect.left < box.left - 0.5 || l.rect.right > box.right + 0.5
      || l.rect.top < box.top - 0.5 || l.rect.bottom > box.bottom + 0.5).map((l) => l.text),
  };
}"""


def test_a_phone_reaches_every_user_control_and_reads_the_chart(live_console, chromium, states):
    context = chromium.new_context(viewport={"width": 390, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        log_in(page, live_console, "ada")
        page.goto(live_console.url("/users"))
        page.wait_for_selector("#user-table button")
        off_screen = page.evaluate(CONTROLS_OFF_SCREEN)
        page.goto(live_console.url("/"))
        page.wait_for_selector("svg.chart text")
        labels = page.evaluate(CHART_LABELS)
    finally:
        context.close()
    assert off_screen == []
    assert labels == {"small": [], "overlapping": [], "clipped": []}
