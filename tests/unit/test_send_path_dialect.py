"""The send path does not ask which database it is on: the engine was chosen once.

Each database's SQL lives in its engine (``console/engine/``); the worker, the transports
and the store modules the send loop calls take what differs from their engine (a ``SqlKit``)
or share one statement. Read off each module's syntax: no database named in a string, no
dialect looked up, no dialect-specific construct imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "console"
SEND_PATH = sorted(
    [
        *(PACKAGE / "worker").glob("*.py"),
        *(PACKAGE / "transports").glob("*.py"),
        *(PACKAGE / "store" / f"{name}.py" for name in ("claims", "records", "send_budget")),
        *(PACKAGE / "store" / f"{name}.py" for name in ("send_guards", "holds", "heartbeats")),
    ]
)
DATABASE_NAMES = {"postgresql", "sqlite"}
ASKING = {"dialect", "dialect_of", "insert_for", "get_bind"}  # identifiers that ask


def dialect_tests(path: Path) -> list[str]:
    """Each place in `path` that names a database or asks for the dialect, as line: what."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and node.value in DATABASE_NAMES:
            found.append(f"{line}: {node.value!r}")
        elif isinstance(node, ast.ImportFrom) and "dialects" in (node.module or ""):
            found.append(f"{line}: from {node.module}")
        else:
            names = [
                getattr(node, field, None) for field in ("id", "attr", "name", "arg", "asname")
            ]
            found += [
                f"{line}: {name}"
                for name in names
                if isinstance(name, str) and any(word in name for word in ASKING)
            ]
    return found


@pytest.mark.parametrize("path", SEND_PATH, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_send_path_module_asks_no_dialect(path):
    assert dialect_tests(path) == [], f"{path.relative_to(PACKAGE.parent)} asks the database"


def test_the_check_sees_a_dialect_test(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "from sqlalchemy.dialects.postgresql import insert\n"
        "def f(session):\n"
        "    if session.get_bind().dialect.name == 'postgresql':\n"
        "        return insert_for(dialect_of(session))\n"
    )
    assert sorted(dialect_tests(module)) == [
        "1: from sqlalchemy.dialects.postgresql",
        "3: 'postgresql'",
        "3: dialect",
        "3: get_bind",
        "4: dialect_of",
        "4: insert_for",
    ]
