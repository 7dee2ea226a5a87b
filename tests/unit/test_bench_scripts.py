"""The benchmarks the docs cite still run against today's code: each script imports and
answers ``--help``, and each phase ``profile_send`` times names a function that exists
(a phase naming a function the code no longer has fails the profile before it starts)."""

from __future__ import annotations

import importlib
import os
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


def test_the_cpu_meter_counts_a_waited_for_child_as_the_sender():
    from tests.support.cpu_split import CpuMeter

    meter = CpuMeter(sink_pid=os.getpid(), postmaster_pid=None)
    before = meter.read()
    burn = "import time\nwhile time.process_time() < 0.3: pass"
    subprocess.run([sys.executable, "-c", burn], check=True, timeout=60)
    spent = meter.read() - before
    assert spent.sender >= 0.3
    assert spent.postgres == 0.0
    assert meter.read().sink > 0  # this process stands in for the sink
    assert spent.per_message_ms(10).sender == spent.sender * 100
