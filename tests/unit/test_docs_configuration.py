"""docs/configuration.md lists exactly the CONSOLE_* variables console/config.py reads.

Both files are read as text: nothing from the console package is imported, so
the check keeps working while modules move.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "console" / "config.py"
DOC = ROOT / "docs" / "configuration.md"

LITERAL = re.compile(r"\"(CONSOLE_[A-Z0-9_]+)\"")
DOC_NAME = re.compile(r"`(CONSOLE_[A-Z0-9_]+)`")
TABLE_HEADER = re.compile(r"^\|\s*variable\s*\|\s*default\s*\|\s*meaning\s*\|\s*$")

# Switches of the test suite, not settings of the product.
TEST_ONLY_PREFIX = "CONSOLE_TEST_"


def config_names() -> set[str]:
    """Every CONSOLE_* name that appears as a string literal in console/config.py."""
    names = set(LITERAL.findall(CONFIG.read_text(encoding="utf-8")))
    return {name for name in names if not name.startswith(TEST_ONLY_PREFIX)}


def documented_rows() -> list[str]:
    """The variable of every row of the one table headed `| variable | default | meaning |`."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    headers = [i for i, line in enumerate(lines) if TABLE_HEADER.match(line.strip())]
    assert len(headers) == 1, (
        f"{DOC.relative_to(ROOT)} must have exactly one '| variable | default | meaning |' "
        f"table, found {len(headers)}"
    )
    rows = []
    for line in lines[headers[0] + 2 :]:  # skip the header and its | --- | line
        line = line.strip()
        if not line.startswith("|"):
            break
        first_cell = line.strip("|").split("|")[0]
        names = DOC_NAME.findall(first_cell)
        assert len(names) == 1, f"each row names one variable in its first cell: {line!r}"
        rows.append(names[0])
    return rows


def test_the_table_lists_each_variable_once() -> None:
    rows = documented_rows()
    repeated = sorted({name for name in rows if rows.count(name) > 1})
    assert not repeated, f"listed more than once in docs/configuration.md: {repeated}"


def test_the_table_lists_exactly_the_variables_config_reads() -> None:
    documented = {name for name in documented_rows() if not name.startswith(TEST_ONLY_PREFIX)}
    read = config_names()
    undocumented = sorted(read - documented)
    unread = sorted(documented - read)
    problems = []
    if undocumented:
        problems.append(
            "read by console/config.py but missing from docs/configuration.md: "
            + ", ".join(undocumented)
        )
    if unread:
        problems.append(
            "listed in docs/configuration.md but not read by console/config.py: "
            + ", ".join(unread)
        )
    assert not problems, "\n".join(problems)
