"""`console demo` run in a child process, for tests that read what its terminal shows."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time

from tests.support.commands import CONSOLE_BIN
from tests.support.pgcluster import free_port


class DemoProcess:
    """`console demo` in a child process, its terminal output collected line by line."""

    def __init__(self, database_url: str, **settings: str) -> None:
        self.port, self.smtp_port = free_port(), free_port()
        environment = {**os.environ, **settings, "CONSOLE_DATABASE_URL": database_url}
        environment.pop("CONSOLE_SMTP_URL", None)
        self.process = subprocess.Popen(
            [
                CONSOLE_BIN or "console",
                "demo",
                "--port",
                str(self.port),
                "--smtp-port",
                str(self.smtp_port),
            ],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout_seconds: float = 30) -> re.Match:
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if match := re.search(pattern, line):
                    return match
            assert self.process.poll() is None, "\n".join(self.lines)
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} not printed:\n" + "\n".join(self.lines))

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(20)
        self._reader.join(5)
        return code
