"""The ``console`` command of the interpreter running the tests (its venv), whatever PATH says."""

import shutil
import sys
from pathlib import Path

_beside_python = Path(sys.executable).with_name("console")
CONSOLE_BIN = str(_beside_python) if _beside_python.exists() else shutil.which("console")
