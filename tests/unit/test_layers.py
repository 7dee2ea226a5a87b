"""The layering rules and the import graph, read off every module's imports (lazy ones too).

Arrows point down: the entry point, the demo and the command line call the app, the
web console and the commands' bodies; they call ops (alerts, metrics, background
jobs); ops calls the worker, the worker the outbox and the store; the store calls
the tables, which call core; core imports nothing of the application but the shared
vocabulary. No module imports, even inside a function, one that imports it back.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "console"

# Every package and root module of console/, lowest first: each imports only from the
# rows below its own. The layers of one row do not import each other, but config and
# transports (see MUTUAL).
LAYERS = (
    ("__init__", "vocabulary", "logs", "wakeup"),  # nothing of the application
    ("core",),  # pure decisions: no IO, no Flask
    ("words",),  # the sentences people read, made from facts (the refusals' reasons)
    ("events", "paths"),  # provider payloads (verify, parse); where the files live
    ("config", "transports"),  # every CONSOLE_* setting; the wire
    ("mail",),  # template catalog, render, the bytes for the wire
    ("model_columns",),  # the tables' column types
    ("state_tables",),  # the tables the worker and the ops keep state in
    ("models",),  # the tables
    ("store",),  # every SQL statement
    ("outbox",),  # enqueue(), supersede(): the application's door
    ("engine",),  # the send path's database work, one module a database
    ("worker",),  # claim, send, record
    ("ops",),  # alerts, metrics, background jobs
    ("commands", "web"),  # the bodies of the CLI commands; the blueprints
    ("app",),  # create_app()
    ("cli",),  # the command group
    ("entry", "demo"),  # the ``console`` program; ``console demo``
    ("drill",),  # ``console drill``: the practice drills, the demo's casework among them
)
# config checks a relay's EHLO name and SES's signer with the transports' own checks;
# transports.factory builds the transport the settings name
MUTUAL = {"config": {"transports"}, "transports": {"config"}}
# below the store in its row order, but never imported by it: the store holds no template
# and reads no setting (its callers pass the values)
APART = {"store": {"mail", "config"}}
ROW = {layer: row for row, layers in enumerate(LAYERS) for layer in layers}


def forbidden(layer: str) -> set[str]:
    """The layers `layer` must not import: those of its row and above (but MUTUAL), and APART."""
    above = {other for other, row in ROW.items() if row >= ROW[layer] and other != layer}
    return (above - MUTUAL.get(layer, set())) | APART.get(layer, set())


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_names(path: Path) -> set[str]:
    """Every dotted name under ``console`` that `path` imports, inside functions too
    (``from a import b`` as ``a.b``: a module, or a name of module ``a``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {name for name in names if name.split(".")[0] == "console"}


def imported_layers(path: Path) -> set[str]:
    """The first name under ``console.`` of everything `path` imports."""
    return {name.split(".")[1] for name in imported_names(path) if "." in name}


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the modules it imports (``from a import b``: a.b if a module, else a)."""
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_names(path):
            parent = imported.rpartition(".")[0]
            if imported in modules:
                targets.add(imported)
            elif parent in modules:
                targets.add(parent)
        graph[name] = targets - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set(stack[stack.index(node) :])
                    del stack[stack.index(node) :]
                    if len(component) > 1:
                        found.append(component)
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                work.append((target, iter(sorted(graph.get(target, ())))))
            elif target in stack:
                low[node] = min(low[node], index[target])
    return found


def layer_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def test_every_package_and_root_module_has_a_layer():
    entries = {layer_of(path) for path in MODULES.values()}
    assert entries ^ set(ROW) == set(), "a layer of LAYERS missing, or one of console/ unplaced"


@pytest.mark.parametrize("layer", sorted(ROW))
def test_no_layer_imports_its_row_or_one_above_it(layer):
    broken = {
        str(path.relative_to(PACKAGE)): sorted(imported_layers(path) & forbidden(layer))
        for path in MODULES.values()
        if layer_of(path) == layer
    }
    assert {path: above for path, above in broken.items() if above} == {}


def test_no_module_imports_one_that_imports_it_back():
    found = [sorted(cycle) for cycle in cycles(import_graph(MODULES))]
    assert found == []


def test_the_store_words_nothing_for_people():
    """The store returns facts; the console and the commands put them in words.

    Its refusals are ``console.words.refusals.Refusal``s: a reason and facts, worded there.
    """
    wording = {
        str(path.relative_to(PACKAGE))
        for path in MODULES.values()
        if layer_of(path) == "store"
        if "console.core.plurals" in path.read_text(encoding="utf-8") or _words_used(path)
    }
    assert wording == set()


def _words_used(path: Path) -> set[str]:
    """What `path` imports of console/words/ but the refusals' base class."""
    words = {name for name in imported_names(path) if name.split(".")[:2] == ["console", "words"]}
    return words - {"console.words.refusals.Refusal"}


def test_the_rules_see_a_broken_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from console.web.extensions import db\n")
    assert imported_layers(module) == {"web"}
    assert "web" in forbidden("store") and "mail" in forbidden("store")
    assert "transports" not in forbidden("config") and "events" not in forbidden("config")


def test_the_graph_sees_a_cycle_through_a_lazy_import(tmp_path):
    (tmp_path / "a.py").write_text("from console.b import f\n")
    (tmp_path / "b.py").write_text("def f():\n    from console import c\n")
    (tmp_path / "c.py").write_text("import console.a\n")
    (tmp_path / "d.py").write_text("from console.a import f\n")
    modules = {f"console.{name}": tmp_path / f"{name}.py" for name in "abcd"}
    assert cycles(import_graph(modules)) == [{"console.a", "console.b", "console.c"}]
    (tmp_path / "c.py").write_text("import console.vocabulary\n")
    assert cycles(import_graph(modules)) == []


def test_the_worker_asks_its_engine_which_database_it_is_on():
    """No dialect check in worker/: the engines (``console/engine/``, with the PostgreSQL
    wake-up listener) hold what differs by database."""
    checks = {
        str(path.relative_to(PACKAGE)): line.strip()
        for path in MODULES.values()
        if layer_of(path) == "worker"
        for line in path.read_text(encoding="utf-8").splitlines()
        if "dialect" in line and not line.strip().startswith("#")
    }
    assert checks == {}


MODULE_LINES_LIMIT = 400
FUNCTION_LINES_LIMIT = 60


def test_no_module_over_400_lines_and_no_function_over_60():
    """A module a reader holds at once, a function that fits on a screen."""
    long_modules, long_functions = {}, {}
    for name, path in MODULES.items():
        source = path.read_text(encoding="utf-8")
        if (lines := len(source.splitlines())) > MODULE_LINES_LIMIT:
            long_modules[name] = lines
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if (length := node.end_lineno - node.lineno + 1) > FUNCTION_LINES_LIMIT:
                    long_functions[f"{name}.{node.name}"] = length
    assert (long_modules, long_functions) == ({}, {})


SECTION_HEADER = re.compile(r"^# [A-Z][^\n]* -{10,}$", re.MULTILINE)


def test_no_module_is_sections_standing_in_for_modules():
    """A ``# Name -----`` header marks a part that wants a module of its own."""
    headed = [
        str(path.relative_to(PACKAGE))
        for path in MODULES.values()
        if SECTION_HEADER.search(path.read_text(encoding="utf-8"))
    ]
    assert headed == []
