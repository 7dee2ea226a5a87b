"""The drill's report: the table people read, the JSON CI reads, the dashboard's "ago"."""

from __future__ import annotations

import json

from console.drill.report import Result, document, not_applicable, progress_line, table
from console.web.drills import ago

RESULTS = [
    Result("rollback", "welcome", "no intent after the rollback", "0 after", True, 0.12),
    Result(
        "5yz", "welcome", "failed after one attempt", "pending; retried: 2 attempts", False, 3.4
    ),  # fmt: skip
]


def test_the_table_has_a_row_a_result_and_says_how_many_held():
    text = table(RESULTS, width=160)
    head, rule, *rows, blank, summary = text.splitlines()
    assert head.split() == ["drill", "template", "expected", "observed", "result", "s"]
    assert set(rule) == {"-"}
    assert rows[0].startswith("rollback") and "PASS" in rows[0] and rows[0].endswith("0.1")
    assert rows[1].startswith("5yz") and "FAIL" in rows[1] and "retried: 2 attempts" in rows[1]
    assert (blank, summary) == ("", "1 of 2 held")


def test_long_texts_wrap_inside_their_columns():
    long = Result("max-age", "password-reset", "expired " * 20, "expired, 0 body", True, 1.0)
    rows = table([long], width=100).splitlines()[2:-2]
    assert len(rows) > 1 and rows[0].startswith("max-age") and "PASS" in rows[0]
    assert all(not row.startswith("max-age") for row in rows[1:])


def test_the_json_document_counts_and_lists_every_result():
    doc = json.loads(json.dumps(document(RESULTS, {"version": "1.0"})))
    assert (doc["held"], doc["total"], doc["passed"], doc["version"]) == (1, 2, False, "1.0")
    assert doc["results"][1] == {
        "drill": "5yz", "template": "welcome", "expected": "failed after one attempt",
        "observed": "pending; retried: 2 attempts", "passed": False, "verdict": "fail",
        "seconds": 3.4,
    }  # fmt: skip


def test_a_drill_not_applicable_to_the_transport_is_neither_held_nor_failed():
    results = [*RESULTS[:1], not_applicable("421-domain", "a provider throttles the account")]
    doc = json.loads(json.dumps(document(results, {})))
    assert (doc["held"], doc["total"], doc["not_applicable"], doc["passed"]) == (1, 1, 1, True)
    row = doc["results"][1]
    assert (row["verdict"], row["passed"], row["expected"]) == (
        "n/a", None, "not applicable to this transport",
    )  # fmt: skip
    text = table(results, width=160)
    assert "N/A" in text.splitlines()[3]
    assert text.splitlines()[-1] == "1 of 1 held, 1 not applicable to this transport"
    assert progress_line(results[1]).startswith("n/a   421-domain [-]")


def test_a_progress_line_names_the_verdict_drill_and_template():
    assert progress_line(RESULTS[1]) == "fail  5yz [welcome]  3.4 s"


def test_ago_reads_as_people_say_it():
    assert ago(5) == "just now"
    assert ago(60) == "1 minute ago"
    assert ago(3 * 3600 + 100) == "3 hours ago"
    assert ago(3 * 86400 + 60) == "3 days ago"
    assert ago(-10) == "just now"
