"""Durations, times and stored reasons as every page writes them: one helper, table-driven."""

from __future__ import annotations

import datetime as dt

import pytest

from console.core.readable import (
    format_age,
    format_relative,
    format_time,
    join_sentences,
    plain_error,
    readable_text,
    sentence,
)
from console.store.intent_search import AGE_BUCKETS, SEARCH_AGES
from console.web.display import AGE_WORDS, age_words, breakable, format_timestamp, timestamp_markup
from console.web.forms import refusal_words
from console.web.holds import hold_until_words, until_placeholder

AT = dt.datetime(2026, 12, 1, 19, 13, 10, 534014, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "–"),
        (-5, "0 s"),
        (45, "45 s"),
        (59.9, "59 s"),
        (60, "1 min"),
        (14 * 60 + 59, "14 min"),
        (3600, "1 h"),
        (3600 + 5 * 60, "1 h 5 min"),
        (86400, "1 d"),
        (172800, "2 d"),
        (172801, "2 d"),
        (90000, "1 d 1 h"),
    ],
)
def test_durations_read_in_the_largest_units(seconds, shown):
    assert format_age(seconds) == shown


def test_times_read_as_utc_to_the_minute():
    assert format_time(AT) == "2026-12-01 19:13 UTC"
    assert format_time(AT, seconds=True) == "2026-12-01 19:13:10 UTC"
    assert format_time(AT.replace(tzinfo=None)) == "2026-12-01 19:13 UTC", "naive is UTC"
    other_zone = AT.astimezone(dt.timezone(dt.timedelta(hours=2)))
    assert format_time(other_zone) == "2026-12-01 19:13 UTC"
    assert format_time(None) == "–"
    assert format_timestamp(AT) == "2026-12-01 19:13 UTC", "the pages' filter is the same"


def test_relative_times():
    assert format_relative(AT + dt.timedelta(minutes=4), AT) == "in 4 min"
    assert format_relative(AT - dt.timedelta(seconds=12), AT) == "12 s ago"
    assert format_relative(AT, AT) == "now"
    assert format_relative(None, AT) == "–"


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (
            "not sent: no longer useful after 2026-12-01T19:13:10.534014+00:00",
            "not sent: no longer useful after 2026-12-01 19:13 UTC",
        ),
        (
            "held until 2026-12-01 19:13:10+00:00, while held",
            "held until 2026-12-01 19:13 UTC, while held",
        ),
        ("at 2026-12-01T19:13Z", "at 2026-12-01 19:13 UTC"),
        ("gave up after 172800 s; last: 451", "gave up after 2 d; last: 451"),
        ("173190 s old (target 3600 s)", "2 d old (target 1 h)"),
        ("retry in 45 s", "retry in 45 s"),
        ("took 120 ms", "took 120 ms"),
        ("3 intent(s) waiting, held for 1 day(s)", "3 intents waiting, held for 1 day"),
        ("1 ambiguous intent(s) waiting", "1 ambiguous intent waiting"),
        ("the 2026-12-01 19:13:10 UTC deferral", "the 2026-12-01 19:13:10 UTC deferral"),
        ("", ""),
        (None, ""),
    ],
)
def test_stored_words_lose_raw_timestamps_and_second_counts(stored, shown):
    assert readable_text(stored) == shown


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        ("SMTPServerDisconnected: Unexpected EOF received", "the server hung up without a reply"),
        (
            "no reply after the body was sent at data_sent "
            "(SMTPServerDisconnected: Unexpected EOF received)",
            "no reply after the body was sent at data_sent (the server hung up without a reply)",
        ),
        (
            "SMTPDataError: (451, '4.3.0 Temporary local problem, try again later')",
            "the server answered 451 4.3.0 Temporary local problem, try again later",
        ),
        (
            "SMTPReadTimeoutError: Timed out waiting for server response",
            "no reply in time (Timed out waiting for server response)",
        ),
        (
            "SMTPConnectError: Error connecting to 127.0.0.1 on port 2525",
            "could not connect (Error connecting to 127.0.0.1 on port 2525)",
        ),
        (
            "ConnectError: [Errno 111] Connection refused",
            "could not connect ([Errno 111] Connection refused)",
        ),
        ("5.1.1 user unknown", "5.1.1 user unknown"),
    ],
)
def test_exception_names_become_plain_words(error, shown):
    assert plain_error(error) == shown
    assert "Error:" not in readable_text(error) and "Disconnected:" not in readable_text(error)


def test_one_sentence_ends_with_one_full_stop():
    assert sentence("nothing was done.") == "Nothing was done."
    assert sentence("It should have a period..") == "It should have a period."
    assert sentence("  Are you sure? ") == "Are you sure?"
    assert sentence("") == ""


def test_sentences_are_joined_once_each():
    joined = join_sentences(
        "forgot addr:1: deleted 2 intents\nsuppression kept as addr:1",
        "suppression kept as addr:1.",
    )
    assert joined == "Forgot addr:1: deleted 2 intents. Suppression kept as addr:1."


@pytest.mark.parametrize(
    ("not_done", "why", "said"),
    [
        (
            "Nothing was done",
            "Intent 5: status changed. Nothing was done; read the page again before acting.",
            "Intent 5: status changed. Nothing was done; read the page again before acting.",
        ),
        ("Not removed", "that suppression was already removed: nothing was done",
         "That suppression was already removed: nothing was done."),
        ("Not removed", "a reason is required", "Not removed: a reason is required."),
        ("Not created", "It should have a period.", "Not created: It should have a period."),
    ],
)  # fmt: skip
def test_a_refusal_says_nothing_was_done_once_with_one_full_stop(not_done, why, said):
    words = refusal_words(not_done, ValueError(why))
    assert words == said
    assert ".." not in words and words.lower().count("nothing was done") <= 1


def test_addresses_and_keys_wrap_between_their_parts_never_inside_one():
    whole = '<span class="nb">{}</span>'.format
    assert str(breakable("ada@example.com")) == whole("ada@") + "<wbr>" + whole("example.com")
    assert str(breakable("order:1004:confirmation")) == "<wbr>".join(
        [whole("order:"), whole("1004:"), whole("confirmation")]
    )
    assert str(breakable("<b>@x")) == whole("&lt;b&gt;@") + "<wbr>" + whole("x"), "escaped"
    assert str(breakable("a" * 40 + "@x")) == "a" * 40 + "@<wbr>" + whole("x"), "too long to keep"
    assert str(breakable(None)) == ""


def test_a_moment_on_a_page_wraps_between_its_date_and_time_only():
    shown = '<span class="nb">2026-12-01</span> <span class="nb">19:13 UTC</span>'
    assert str(timestamp_markup(AT)) == shown
    assert str(timestamp_markup(None)) == '<span class="nb">–</span>'


def test_a_hold_without_an_end_reads_the_same_everywhere():
    assert hold_until_words(None) == "no end: until released"
    assert hold_until_words(AT) == "until 2026-12-01 19:13 UTC"


def test_the_hold_forms_example_end_is_in_the_future():
    example = until_placeholder(AT)
    assert example == "2026-12-02 06:00"
    assert dt.datetime.fromisoformat(example).replace(tzinfo=dt.UTC) > AT


def test_every_age_bucket_has_its_label_in_its_order():
    """The store counts by age bucket; the dashboard and the search name each bucket."""
    assert set(AGE_WORDS) == set(SEARCH_AGES)
    assert list(age_words(AGE_BUCKETS)) == list(AGE_BUCKETS)
    assert age_words(SEARCH_AGES)["1to5m"] == "1–5 min"
