"""A drill's result, the terminal table and the JSON document of a run."""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
from typing import Any

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "n/a"
NOT_APPLICABLE_TEXT = "not applicable to this transport"


@dataclasses.dataclass(frozen=True)
class Result:
    """What one drill (for one template, where it runs per template) expected and saw."""

    drill: str
    template: str
    expected: str
    observed: str
    passed: bool
    seconds: float
    applicable: bool = True  # False: the drill has no meaning on this transport (said why)

    @property
    def verdict(self) -> str:
        if not self.applicable:
            return NOT_APPLICABLE
        return PASS if self.passed else FAIL

    @property
    def failed(self) -> bool:
        return self.applicable and not self.passed

    def as_dict(self) -> dict[str, Any]:
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k != "applicable"}
        passed = self.passed if self.applicable else None
        return {**fields, "passed": passed, "verdict": self.verdict,
                "seconds": round(self.seconds, 2)}  # fmt: skip


def not_applicable(drill: str, why: str) -> Result:
    """The row of a drill this transport has no counterpart for: never a pass, never a fail."""
    return Result(drill, "-", NOT_APPLICABLE_TEXT, why, False, 0.0, applicable=False)


def progress_line(result: Result) -> str:
    """The line printed as each drill ends."""
    return f"{result.verdict:4}  {result.drill} [{result.template}]  {result.seconds:.1f} s"


def summary_line(results: list[Result]) -> str:
    held = sum(1 for r in results if r.applicable and r.passed)
    drilled = sum(1 for r in results if r.applicable)
    line = f"{held} of {drilled} held"
    if drilled < len(results):
        line += f", {len(results) - drilled} {NOT_APPLICABLE_TEXT}"
    return line


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
    """The run as one JSON document: what was drilled, each result, the count held (of the
    drills that apply to this transport: ``total``; those that do not: ``not_applicable``)."""
    return {
        **about,
        "held": sum(1 for r in results if r.applicable and r.passed),
        "total": sum(1 for r in results if r.applicable),
        "not_applicable": sum(1 for r in results if not r.applicable),
        "passed": not any(r.failed for r in results),
        "results": [r.as_dict() for r in results],
    }
