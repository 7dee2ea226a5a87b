"""Back and Forward: htmx's history restore gets the full page; fragments say Vary: HX-Request."""

from __future__ import annotations

import pytest

FRAGMENT = {"HX-Request": "true"}
RESTORE = {"HX-Request": "true", "HX-History-Restore-Request": "true"}
LIVE_PAGES = ["/", "/intents?q=order:1", "/suppressions?q=a", "/events?type=bounced"]


@pytest.mark.parametrize("path", LIVE_PAGES)
def test_history_restore_gets_the_full_page(console_client, path):
    client = console_client("operator")
    restored = client.get(path, headers=RESTORE)
    assert restored.status_code == 200
    assert "<nav" in restored.text and "<title>" in restored.text
    assert "HX-Request" in restored.headers.get("Vary", "")


@pytest.mark.parametrize("path", LIVE_PAGES)
def test_an_htmx_request_gets_the_fragment_and_says_it_varies(console_client, path):
    client = console_client("operator")
    fragment = client.get(path, headers=FRAGMENT)
    assert fragment.status_code == 200
    assert "<nav" not in fragment.text
    assert "HX-Request" in fragment.headers.get("Vary", "")
    full = client.get(path)
    assert "<nav" in full.text
    assert "HX-Request" in full.headers.get("Vary", "")
