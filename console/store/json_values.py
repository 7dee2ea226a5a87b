"""JSON columns read so that one unreadable value never breaks the read of the rows around it.

Every engine decodes its JSON columns with ``read_json`` (SQLAlchemy's ``json_deserializer``,
which psycopg uses for PostgreSQL's ``json`` too). A value that is not JSON, or is nested deeper
than ``MAX_DEPTH``, comes back as an ``UnreadableJSON`` naming the problem instead of raising in
the middle of a batch; whoever uses the value decides what that row's failure is.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

MAX_DEPTH = 64  # arrays and objects inside each other; no template needs more
PREVIEW_CHARACTERS = 200


@dataclasses.dataclass(frozen=True)
class UnreadableJSON:
    """A stored JSON value that could not be decoded: why, and the start of its text."""

    problem: str
    preview: str

    def __bool__(self) -> bool:
        return True  # never mistaken for an empty value (`params or {}`)


def read_json(raw: str | bytes) -> Any:
    """Decode `raw`; an UnreadableJSON when it is not JSON or is nested too deep."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    try:
        value = json.loads(raw)
    except RecursionError:
        return UnreadableJSON(f"nested deeper than {MAX_DEPTH} levels", raw[:PREVIEW_CHARACTERS])
    except ValueError as error:
        return UnreadableJSON(f"not JSON ({error})", raw[:PREVIEW_CHARACTERS])
    if _depth_exceeds(value, MAX_DEPTH):
        return UnreadableJSON(f"nested deeper than {MAX_DEPTH} levels", raw[:PREVIEW_CHARACTERS])
    return value


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` holds containers more than `limit` deep (walked without recursion)."""
    level = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return any(isinstance(item, dict | list) for item in level)


@dataclasses.dataclass(frozen=True)
class ParamsProblem:
    """Why stored params cannot be rendered: unreadable, or JSON of a `kind` other than an
    object ("array", "string", "boolean", "number"). ``console/words/params.py`` words it."""

    unreadable: str | None = None  # the UnreadableJSON's problem
    kind: str | None = None


def params_problem(params: Any) -> ParamsProblem | None:
    """Why an intent's stored params cannot be rendered, or None when they can."""
    if params is None or isinstance(params, dict):
        return None
    if isinstance(params, UnreadableJSON):
        return ParamsProblem(unreadable=params.problem)
    return ParamsProblem(kind=_json_kind(params))


def _json_kind(value: Any) -> str:
    """The JSON type of a decoded value that is not an object."""
    kinds = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return kinds.get(type(value), "other")
