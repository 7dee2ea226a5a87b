"""Why an intent's stored params cannot be rendered, in the words the attempt and the page say."""

from __future__ import annotations

# a JSON value's type -> how the sentence names it
_KINDS = {"array": "an array", "string": "a string", "boolean": "true/false", "number": "a number"}


def params_problem_words(unreadable: str | None, kind: str | None) -> str:
    """ "params unreadable: not JSON (...)", or "params must be a JSON object, found an array"."""
    if unreadable is not None:
        return f"params unreadable: {unreadable}"
    return f"params must be a JSON object, found {_KINDS.get(kind or '', 'another value')}"
