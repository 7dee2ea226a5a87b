"""The bulk and erasure summaries agree with their counts: "1 intent", "2 intents"."""

from __future__ import annotations

import datetime as dt

import pytest

from console.store.bulk_actions import BulkPreview
from console.store.bulk_confirmations import BulkConfirmation
from console.store.erasure import ErasureReport
from console.store.intent_search import SearchFilters
from console.web.action_words import bulk_summary, confirmation_summary
from console.web.erasure_words import summary

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def preview(**counts) -> BulkPreview:
    values = dict(matched=1, eligible=1, suppressed_skipped=0, skipped_by_status={})
    values.update(counts)
    return BulkPreview("requeue", SearchFilters(), max_id=9, previewed_at=NOW, **values)


@pytest.mark.parametrize(
    ("count", "words"),
    [(1, "1 suppressed recipient skipped"), (2, "2 suppressed recipients skipped")],
)
def test_bulk_preview_counts_suppressed_recipients(count, words):
    assert words in bulk_summary(preview(suppressed_skipped=count))


@pytest.mark.parametrize(("count", "words"), [(1, "requeued 1 intent"), (3, "requeued 3 intents")])
def test_bulk_confirmation_counts_intents(count, words):
    confirmation = BulkConfirmation("requeue", "olga", NOW, count)
    assert confirmation_summary(confirmation).endswith(words)


def report(**counts) -> ErasureReport:
    values = dict(intents_deleted=1, cancelled=0, events_deleted=1, audit_entries=1,
                  suppression_kept=False, params_scrubbed=0, unsent_elsewhere=[])  # fmt: skip
    values.update(counts)
    return ErasureReport("sha256:abc", **values)


def test_erasure_summary_of_one_of_each():
    text = summary(report(params_scrubbed=1))
    assert "deleted 1 intent (0 cancelled first) and 1 provider event;" in text
    assert "1 audit entry now names sha256:abc" in text
    assert "params scrubbed from 1 intent to other people" in text


def test_erasure_summary_of_many():
    text = summary(report(intents_deleted=2, events_deleted=3, audit_entries=4, params_scrubbed=5))
    assert "deleted 2 intents (0 cancelled first) and 3 provider events;" in text
    assert "4 audit entries now name sha256:abc" in text
    assert "params scrubbed from 5 intents to other people" in text
