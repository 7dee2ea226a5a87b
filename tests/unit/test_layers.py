"""The layering rules, read off every module's imports (lazy ones inside functions too).

Arrows point down: web and the command line call ops, outbox, worker and store;
ops calls the worker, the store and what lies below; the worker calls the store,
core, mail and transports; the store calls core and reads no setting (its callers
pass the values); core and transports import nothing of the application but the
shared vocabulary and each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "console"

TABLES = ("models", "model_columns", "state_tables")  # the tables and their column types

# a layer (a package or module under console/) and the layers it must not import
FORBIDDEN = {
    "core": ("store", "worker", "ops", "web", "mail", "outbox", "transports", "cli", "app",
             "demo", "events", *TABLES),
    "transports": ("store", "worker", "ops", "web", "outbox", "cli", "app", "demo", *TABLES),
    "mail": ("store", "worker", "ops", "web", "outbox", "cli", "app", "demo", *TABLES),
    "store": ("worker", "ops", "web", "mail", "outbox", "cli", "app", "demo", "config"),
    "outbox": ("worker", "ops", "web", "cli", "app", "demo"),
    "worker": ("ops", "web", "cli", "app", "demo"),
    "ops": ("web", "cli", "app", "demo"),
}  # fmt: skip


def imported_layers(path: Path) -> set[str]:
    """The first name under ``console.`` of everything `path` imports."""
    layers = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "console" and len(parts) > 1:
                layers.add(parts[1])
    return layers


def layer_modules(layer: str) -> list[Path]:
    folder = PACKAGE / layer
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [PACKAGE / f"{layer}.py"]


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_layer_imports_one_above_it(layer):
    broken = {
        str(path.relative_to(PACKAGE)): sorted(imported_layers(path) & set(FORBIDDEN[layer]))
        for path in layer_modules(layer)
    }
    assert {path: above for path, above in broken.items() if above} == {}


def test_the_store_words_nothing_for_people():
    """The store returns facts; the console and the commands put them in words."""
    wording = {
        str(path.relative_to(PACKAGE))
        for path in layer_modules("store")
        if "console.core.plurals" in path.read_text(encoding="utf-8")
    }
    assert wording == set()


def test_the_rules_see_a_broken_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from console.web.extensions import db\n")
    assert imported_layers(module) == {"web"}


def test_the_worker_asks_the_store_which_database_it_is_on():
    """No dialect check in worker/ but the PostgreSQL wake-up listener's (LISTEN/NOTIFY)."""
    checks = {
        str(path.relative_to(PACKAGE)): line.strip()
        for path in layer_modules("worker")
        if path.name != "pg_wakeup.py"
        for line in path.read_text(encoding="utf-8").splitlines()
        if "dialect" in line and not line.strip().startswith("#")
    }
    assert checks == {}
