"""Every name README.md and docs/*.md give exists: files, links, modules, commands, settings.

A file path in backticks (``console/store/intents.py``, ``tests/e2e/``, a bare
``bench_send.py``) is on disk, from the repository's root or from ``console/`` for
``store/claims.py``-style paths; a relative link leads to a file, and its ``#anchor`` to
a heading there; a module (``console.outbox.enqueue``, in backticks or a ``from console...
import`` line) is a file under ``console/`` and each name after it is defined there; a
``console <command>`` with its sub-commands and ``--options`` is in the CLI; a
``CONSOLE_*`` name is read by console/config.py, or is a test switch the suite reads.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import click
import pytest

from console.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# instance/ holds a deployment's own files, made at run time (a checkout that ran the demo
# has one): the docs name its files as examples, never as the repository's
TOP_LEVEL = {p.name for p in ROOT.iterdir() if not p.name.startswith(".git")} - {"instance"}
PACKAGES = {path.name for path in (ROOT / "console").iterdir() if path.is_dir()}
DATA_FILES = (".db", ".md", ".toml", ".json", ".pem", ".key", ".service")
FILE_SUFFIXES = (".py", ".md", ".sh", ".html", ".txt", ".json", ".toml", ".sql", ".png")

FENCE = re.compile(r"^\s*```.*?^\s*```", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"`([^`]+)`")
PATH_LIKE = re.compile(r"[\w.-]+(?:/[\w.-]*)*")
MODULE_LIKE = re.compile(r"console(?:\.[A-Za-z_]\w*)+(?:\(\))?")
FROM_IMPORT = re.compile(r"^\s*from (console(?:\.\w+)*) import \(?([\w, ]+)", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)
# `console ...` at the start of a shell line (after VAR=value), after bin/ or after &&
COMMAND_IN_FENCE = re.compile(
    r"(?:^\s*(?:[A-Z_]+=\S+ +)*|bin/|&& )console((?: +[^\s#;&|`'\"()]+)+)"
)
ENV_NAME = re.compile(r"CONSOLE_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_]*\*)")  # not CONSOLE_TEST_*


def document_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def split_text(path: Path) -> tuple[str, list[str]]:
    """The document's prose (fenced blocks cut out, indented ones kept) and its fenced blocks."""
    text = path.read_text(encoding="utf-8")
    fences = FENCE.findall(text)
    return FENCE.sub("", text), fences


def path_problem(name: str) -> str | None:
    """Why the repository path `name` is not on disk, or None; None also when it is no path."""
    if name.startswith("/") or not PATH_LIKE.fullmatch(name):
        return None  # a URL route, an absolute path on a server, or not a path at all
    first = name.split("/")[0]
    if first in TOP_LEVEL:
        return None if (ROOT / name).exists() else f"no such file: {name}"
    names_a_file = name.endswith("/") or name.endswith(FILE_SUFFIXES)
    if "/" in name and first in PACKAGES and names_a_file:
        return None if (ROOT / "console" / name).exists() else f"no such file: console/{name}"
    if "/" not in name and name.endswith(".py"):
        found = [*(ROOT / "console").rglob(name), *(ROOT / "tests").rglob(name)]
        return None if found else f"no file {name} under console/ or tests/"
    return None  # an example (`v1/body.html`, `instance/console.db`), not a repository path


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[`*]|\]\([^)]*\)|\[", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    prose, _ = split_text(path)
    return {slug(heading) for heading in HEADING.findall(prose)}


def link_problem(document: Path, target: str) -> str | None:
    if target.startswith(("http://", "https://", "mailto:")):
        return None
    file_part, _, anchor = target.partition("#")
    linked = (document.parent / file_part).resolve() if file_part else document
    if not linked.exists():
        return f"link to a missing file: {target}"
    if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
        return f"link to a missing heading: {target}"
    return None


def module_problem(dotted: str) -> str | None:
    """Why `dotted` (a module, then attributes) names nothing, or None."""
    parts = dotted.removesuffix("()").split(".")
    for length in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:length])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            break
    else:
        return f"no module {dotted}"
    if length == len(parts):
        return None
    found = importlib.import_module(".".join(parts[:length]))
    for attribute in parts[length:]:
        if not hasattr(found, attribute):
            return f"{'.'.join(parts[:length])} defines no {attribute} (named as {dotted})"
        found = getattr(found, attribute)
    return None


def command_problem(words: list[str]) -> str | None:
    """Why ``console`` followed by `words` is no command line of the CLI, or None."""
    said = "console " + " ".join(words)
    command: click.Command = main
    context = click.Context(main)
    for word in words:
        word = word.strip("[]")
        if word.startswith("--"):
            option = word.split("=")[0]
            known = {opt for param in command.params for opt in param.opts} | {"--help"}
            if option not in known:
                return f"{said}: no option {option}"
        elif isinstance(command, click.Group):
            sub = command.get_command(context, word)
            if sub is None:
                return f"{said}: no command {word}"
            context = click.Context(sub, parent=context, info_name=word)
            command = sub
        # anything else is an argument or a placeholder (NAME, ADDRESS, 5000)
    return None


def commands_named(prose: str, fences: list[str]) -> list[list[str]]:
    lines = [span.split()[1:] for span in SPAN.findall(prose) if span.startswith("console ")]
    indented = [line for line in prose.splitlines() if line.startswith("    ")]
    code_lines = indented + [line for fence in fences for line in fence.splitlines()[1:]]
    for line in code_lines:
        line = line.split(" #")[0]
        lines += [found.split() for found in COMMAND_IN_FENCE.findall(line)]
    return lines


def config_names() -> set[str]:
    source = (ROOT / "console" / "config.py").read_text(encoding="utf-8")
    return set(re.findall(r"\"(CONSOLE_[A-Z0-9_]+)\"", source))


def switches_the_suite_reads() -> set[str]:
    """The CONSOLE_TEST_* switches that some test or tests/run.sh reads."""
    sources = [*(ROOT / "tests").rglob("*.py"), ROOT / "tests" / "run.sh"]
    text = "\n".join(path.read_text(encoding="utf-8") for path in sources)
    return set(re.findall(r"CONSOLE_TEST_[A-Z0-9_]+", text))


def problems_of(document: Path) -> list[str]:
    prose, fences = split_text(document)
    problems = []
    for span in SPAN.findall(prose):
        problems.append(path_problem(span))
        if MODULE_LIKE.fullmatch(span) and not span.endswith(DATA_FILES):  # not `console.db`
            problems.append(module_problem(span))
    for target in LINK.findall(prose):
        problems.append(link_problem(document, target))
    for fence in fences:
        for module, names in FROM_IMPORT.findall(fence):
            problems.append(module_problem(module))
            for name in filter(None, (name.strip() for name in names.split(","))):
                problems.append(module_problem(f"{module}.{name}"))
    for words in commands_named(prose, fences):
        problems.append(command_problem(words))
    settings = config_names() | switches_the_suite_reads()
    text = document.read_text(encoding="utf-8")
    for name in sorted(set(ENV_NAME.findall(text)) - settings):
        problems.append(f"{name} is no setting console/config.py reads, nor a test switch")
    return sorted({problem for problem in problems if problem})


@pytest.mark.parametrize("document", DOCUMENTS, ids=document_id)
def test_every_name_the_document_gives_exists(document: Path) -> None:
    problems = problems_of(document)
    assert not problems, f"{document_id(document)}:\n  " + "\n  ".join(problems)


def test_the_check_sees_a_wrong_name_of_each_kind(tmp_path: Path) -> None:
    document = tmp_path / "wrong.md"
    document.write_text(
        "`console/store/nothing.py` and [a page](nowhere.md), [a heading](#nowhere),\n"
        "`console.outbox.enqueue_later`, `console sernd`, `console serve --hots 1`,\n"
        "`CONSOLE_NO_SUCH_SETTING`.\n\n"
        "```python\nfrom console.outbox import enqueue, enqueue_later\n```\n\n"
        "# A heading\n",
        encoding="utf-8",
    )
    assert problems_of(document) == sorted(
        [
            "no such file: console/store/nothing.py",
            "link to a missing file: nowhere.md",
            "link to a missing heading: #nowhere",
            "console.outbox defines no enqueue_later (named as console.outbox.enqueue_later)",
            "console sernd: no command sernd",
            "console serve --hots 1: no option --hots",
            "CONSOLE_NO_SUCH_SETTING is no setting console/config.py reads, nor a test switch",
        ]
    )
