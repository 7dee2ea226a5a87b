"""The search's typo rules: an edit distance that counts a swap as one edit, and the numbers
one typo from the one typed."""

from __future__ import annotations

import pytest

from console.web.search_hints import edit_distance, one_typo_away


@pytest.mark.parametrize(
    ("first", "second", "distance"),
    [
        ("order", "order", 0),
        ("ordr", "order", 1),
        ("ordre", "order", 1),
        ("order:1040", "order:1004", 1),
        ("order:9999", "order:991", 2),
        ("", "abc", 3),
    ],
)
def test_edit_distance(first, second, distance):
    assert edit_distance(first, second) == distance == edit_distance(second, first)


def test_one_typo_away_is_every_number_at_distance_one():
    near = one_typo_away("104")
    assert {"1004", "14", "140", "105", "0104", "1040"} <= near
    assert "104" not in near and "991" not in near
    assert all(edit_distance(variant, "104") == 1 for variant in near)
