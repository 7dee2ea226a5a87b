"""The benchmarks the docs cite still run against today's code: each script imports and
answers ``--help``, and each phase ``profile_send`` times names a function that exists
(a phase naming a function the code no longer has fails the profile before it starts)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(
    path.stem for path in (ROOT / "tests" / "bench").glob("*.py") if path.stem != "__init__"
)


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_answers_help(script):
    done = subprocess.run(
        [sys.executable, "-m", f"tests.bench.{script}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower()


def test_each_phase_of_the_profile_names_a_function_that_exists():
    from tests.bench.profile_send import PHASES

    missing = []
    for phase, module_name, dotted in PHASES:
        owner = importlib.import_module(module_name)
        for part in dotted.split("."):
            owner = getattr(owner, part, None)
            if owner is None:
                missing.append(f"{phase}: {module_name}.{dotted}")
                break
    assert missing == []
