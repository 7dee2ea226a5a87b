"""The store's refusals carry facts, and one table words them.

The store raises ``ActionRefused("intent_missing", intent_id=7)``: a reason code and the facts by
name. ``console/words/refusals.py`` holds the sentence of each reason, read by the console, the
commands and ``str()`` alike. Read off the source (AST), so a sentence put back in the store, a
reason without words or a fact the words do not take fails here, not in front of an operator.
"""

from __future__ import annotations

import ast
import datetime as dt
import inspect
import re
import string
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "console"
STORE = PACKAGE / "store"
# the refusals whose reasons console/words/refusals.py words
REFUSAL_CLASSES = {
    "ActionRefused",
    "StaleAction",
    "UserError",
    "UnknownTarget",
    "UsernameTaken",
    "InvalidFilter",
    "DatabaseNotReady",
}
REASON_CODE = re.compile(r"[a-z][a-z_]*")


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def refusal_calls(folder: Path) -> list[tuple[str, ast.Call]]:
    """Every construction of a refusal under `folder`, as ("store/x.py:12", the call)."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _called_name(node) in REFUSAL_CLASSES:
                found.append((f"{where}:{node.lineno}", node))
    return found


def reason_of(call: ast.Call) -> str | None:
    """The reason code a refusal is built with; None when it is given anything else."""
    if len(call.args) != 1 or not isinstance(call.args[0], ast.Constant):
        return None
    reason = call.args[0].value
    return reason if isinstance(reason, str) and REASON_CODE.fullmatch(reason) else None


def test_the_store_raises_reasons_not_sentences():
    """Each refusal in store/ names its reason by code; a string or an f-string is a sentence."""
    worded = [
        f"{where}: {ast.unparse(call)[:90]}"
        for where, call in refusal_calls(STORE)
        if reason_of(call) is None
    ]
    assert worded == []


def test_the_store_words_no_refusal_of_its_own():
    """No sentence-shaped string literal (three words or more) in a store module's raise."""
    sentences = []
    for path in sorted(STORE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
                continue
            if _called_name(node.exc) not in REFUSAL_CLASSES:
                continue
            for value in ast.walk(node.exc):
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    if len(value.value.split()) >= 3:
                        sentences.append(f"{where}:{node.lineno}: {value.value[:60]}")
    assert sentences == []


def _table():
    from console.words.refusals import REFUSALS

    return REFUSALS


def takes(wording) -> set[str]:
    """The facts a wording reads: a format string's fields, or a function's parameters."""
    if isinstance(wording, str):
        return {field for _, field, _, _ in string.Formatter().parse(wording) if field}
    return set(inspect.signature(wording).parameters)


def test_every_refusal_names_a_reason_with_words_and_the_facts_they_take():
    """Everywhere in console/: the reason is in the table and the facts are the ones it reads."""
    table = _table()
    wrong = {}
    for where, call in refusal_calls(PACKAGE):
        reason = reason_of(call)
        given = {keyword.arg for keyword in call.keywords}
        if reason not in table:
            wrong[where] = f"no words for {reason!r}"
        elif None in given or given != takes(table[reason]):
            wrong[where] = f"{reason}: gives {sorted(map(str, given))}"
    assert wrong == {}


def test_each_reason_is_worded_once_and_used():
    """One entry per reason in the table's source; no words left for a reason nobody raises."""
    source = (PACKAGE / "words" / "refusals.py").read_text(encoding="utf-8")
    tables = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict)
        if "REFUSALS" in ast.unparse(node)
    ]
    keys = [key.value for table in tables for key in table.keys if isinstance(key, ast.Constant)]
    assert sorted(keys) == sorted(set(keys)), "a reason worded twice"
    raised = {reason_of(call) for _, call in refusal_calls(PACKAGE)}
    assert set(_table()) - raised == set(), "words for a reason nobody raises"


def test_a_refusal_says_its_sentence_and_keeps_its_facts():
    from console.store.accounts import UserError
    from console.store.actions import ActionRefused, StaleAction
    from console.store.intent_search import InvalidFilter
    from console.store.schema_check import DatabaseNotReady

    refused = ActionRefused("reason_too_long", limit=2000)
    assert str(refused) == "the reason is longer than 2000 characters"
    assert (refused.reason, refused.facts, refused.limit) == (
        "reason_too_long",
        {"limit": 2000},
        2000,
    )
    stale = StaleAction("status_moved", intent_id=7, status="dead", expected="failed")
    assert str(stale) == "intent 7 is now dead, no longer failed: nothing was done"
    assert isinstance(stale, ActionRefused) and isinstance(stale, ValueError)
    assert issubclass(UserError, ValueError) and issubclass(InvalidFilter, ValueError)
    roles = UserError("role_unknown", roles=("viewer", "operator", "admin"))
    assert str(roles) == "role must be one of viewer, operator, admin"
    assert str(InvalidFilter("filter_unknown", name="fact", value="x")) == (
        "unknown provider report 'x'"
    )
    behind = DatabaseNotReady("schema_behind", url="sqlite:///x.db", revision=None, needs="0019")
    assert str(behind) == (
        "the database at sqlite:///x.db has no schema, the code needs 0019: "
        'run "console db upgrade"'
    )
    with pytest.raises(AttributeError):
        refused.username  # noqa: B018 - not one of its facts


@pytest.mark.parametrize(
    ("facts", "said"),
    [
        (dict(unfinished=[(3, "pending")], count=1), "intents not finished: 3 (pending); "),
        (
            dict(unfinished=[(3, "pending"), (4, "sending")], count=25),
            "intents not finished: 3 (pending), 4 (sending) and 23 more; ",
        ),
    ],
)
def test_an_erasure_refusal_names_the_unfinished_intents(facts, said):
    from console.store.actions import ActionRefused

    assert str(ActionRefused("intents_unfinished", **facts)).startswith(said)


def test_a_stale_intent_says_what_changed():
    from console.store.actions import StaleAction

    at = dt.datetime(2026, 12, 1, 9, 5, 7, tzinfo=dt.UTC)
    moved = StaleAction("next_attempt_moved", intent_id=4, next_attempt_at=at)
    assert str(moved) == (
        "Intent 4: its next attempt was moved to 09:05:07 UTC since you opened this page. "
        "Nothing was done; read the page again before acting."
    )
    status = StaleAction(
        "status_changed", intent_id=4, status="dead", status_reason="5 attempts", was="failed"
    )
    assert "now dead (5 attempts), no longer failed." in str(status)


@pytest.mark.parametrize(
    ("stored", "said"),
    [
        ("[1]", "params must be a JSON object, found an array"),
        ('"x"', "params must be a JSON object, found a string"),
        ("true", "params must be a JSON object, found true/false"),
        ("2.5", "params must be a JSON object, found a number"),
        ("[" * 100 + "]" * 100, "params unreadable: nested deeper than 64 levels"),
    ],
)
def test_params_that_cannot_be_rendered_are_facts_worded_once(stored, said):
    """The store says what is wrong with stored params; the attempt and the page word it."""
    from console.store.json_values import params_problem, read_json
    from console.words.params import params_problem_words

    problem = params_problem(read_json(stored))
    assert params_problem_words(problem.unreadable, problem.kind) == said
    assert params_problem(read_json("{}")) is None
