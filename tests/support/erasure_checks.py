"""Where an address is still written after an erasure: the columns and the database files."""

from __future__ import annotations

import json
import os
import re
from urllib.parse import quote, quote_plus

from sqlalchemy import inspect, text


def written_forms(address: str) -> set[str]:
    """`address` as text may hold it: plain, URL-encoded, JSON-escaped (lower-cased)."""
    plain = address.lower()
    escaped = json.dumps(plain)[1:-1]  # non-ASCII as \\uXXXX
    return {
        plain,
        plain.replace("@", "%40"),
        quote(plain, safe=""),
        quote_plus(plain),
        escaped,
        escaped.replace("@", "\\u0040"),
    }


def places_holding(engine, needle: str) -> list[str]:
    """Every table.column whose text, in any letter case, holds `needle` in any written form."""
    found = []
    inspector = inspect(engine)
    with engine.connect() as connection:
        for table in inspector.get_table_names():
            for column in inspector.get_columns(table):
                name = column["name"]
                query = text(
                    f'SELECT count(*) FROM "{table}" '
                    f"WHERE lower(CAST(\"{name}\" AS TEXT)) LIKE :pattern ESCAPE '!'"
                )
                for form in written_forms(needle):
                    pattern = "%" + re.sub(r"([!%_])", r"!\1", form) + "%"
                    if connection.execute(query, {"pattern": pattern}).scalar_one():
                        found.append(f"{table}.{name}")
                        break
    return found


def files_holding(engine, needle: str) -> list[str]:
    """The files of a SQLite database (main, -wal) whose bytes hold `needle` in any form."""
    path = engine.url.database
    found = []
    for file in (path, f"{path}-wal"):
        if os.path.exists(file):
            with open(file, "rb") as handle:
                data = handle.read().lower()
            if any(form.encode() in data for form in written_forms(needle)):
                found.append(os.path.basename(file))
    return found
