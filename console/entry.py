"""The ``console`` program: ``console worker`` straight to the send loop, the rest to Flask's CLI.

``console worker`` (no arguments) starts without importing Flask at all; any
other command, ``--help`` included, goes to the command group in ``console.cli``.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the command the arguments name."""
    if sys.argv[1:] == ["worker"]:
        from console.commands.worker import main as worker_main

        worker_main()
        return
    from console.cli import main as command_group

    command_group()
