"""A drill's result, the terminal table and the JSON document of a run."""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
from typing import Any

PASS, FAIL = "pass", "fail"


@dataclasses.dataclass(frozen=True)
class Result:
    """What one drill (for one template, where it runs per template) expected and saw."""

    drill: str
    template: str
    expected: str
    observed: str
    passed: bool
    seconds: float

    @property
    def verdict(self) -> str:
        return PASS if self.passed else FAIL

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "seconds": round(self.seconds, 2)}


def progress_line(result: Result) -> str:
    """The line printed as each drill ends."""
    return f"{result.verdict:4}  {result.drill} [{result.template}]  {result.seconds:.1f} s"


def summary_line(results: list[Result]) -> str:
    held = sum(1 for r in results if r.passed)
    return f"{held} of {len(results)} held"


def table(results: list[Result], width: int | None = None) -> str:
    """The report as a table: drill, template, expected, observed, pass/fail, seconds."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    heads = ("drill", "template", "expected", "observed", "result", "s")
    fixed = [max(len(heads[i]), *(len(row) for row in _cells(results, i))) for i in (0, 1)]
    free = max(40, width - sum(fixed) - 6 - 4 - 6 - 10)
    text_width = free // 2
    lines = [_row(heads, fixed, text_width)]
    lines.append("-" * min(width, sum(fixed) + 2 * text_width + 22))
    for r in results:
        expected = textwrap.wrap(r.expected, text_width) or [""]
        observed = textwrap.wrap(r.observed, text_width) or [""]
        for n in range(max(len(expected), len(observed))):
            first = n == 0
            cells = (
                r.drill if first else "",
                r.template if first else "",
                expected[n] if n < len(expected) else "",
                observed[n] if n < len(observed) else "",
                r.verdict.upper() if first else "",
                f"{r.seconds:.1f}" if first else "",
            )
            lines.append(_row(cells, fixed, text_width))
    lines.append("")
    lines.append(summary_line(results))
    return "\n".join(lines)


def _cells(results: list[Result], index: int) -> list[str]:
    return [r.drill if index == 0 else r.template for r in results]


def _row(cells, fixed: list[int], text_width: int) -> str:
    drill, template, expected, observed, verdict, seconds = cells
    return (
        f"{drill:<{fixed[0]}}  {template:<{fixed[1]}}  {expected:<{text_width}}  "
        f"{observed:<{text_width}}  {verdict:<6}  {seconds:>5}"
    ).rstrip()


def document(results: list[Result], about: dict[str, Any]) -> dict[str, Any]:
    """The run as one JSON document: what was drilled, each result, the count held."""
    return {
        **about,
        "held": sum(1 for r in results if r.passed),
        "total": len(results),
        "passed": all(r.passed for r in results),
        "results": [r.as_dict() for r in results],
    }
