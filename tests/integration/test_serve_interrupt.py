"""`console serve` stopped by SIGTERM or Ctrl-C exits 0 whenever the signal comes.

The signal becomes a KeyboardInterrupt in the main thread, at whatever line runs
then. Once the "console on" line is printed, a supervisor (or a person) may stop the
process: a signal that lands before the web server's loop has started is a stop
like any other, not an abort.
"""

from __future__ import annotations

import os
import signal

import click
import pytest
from click.testing import CliRunner

from console.cli import main
from tests.support.pgcluster import free_port


@pytest.fixture
def restored_signal_handlers():
    """A new process's handlers for the test (an earlier test in this process may have
    installed its own, e.g. an in-process `console worker`'s), the old ones after it."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for number, handler in handlers.items():
        signal.signal(number, handler)


@pytest.mark.parametrize(
    "signal_number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"]
)
def test_a_signal_right_after_the_console_on_line_stops_serve_cleanly(
    sqlite_url, tmp_path, monkeypatch, restored_signal_handlers, signal_number
):
    echo = click.echo

    def echo_then_signal(message=None, *args, **kwargs):
        echo(message, *args, **kwargs)
        if str(message).startswith("console on "):
            os.kill(os.getpid(), signal_number)  # before the web server's loop starts

    monkeypatch.setattr(click, "echo", echo_then_signal)
    environment = {
        "CONSOLE_DATABASE_URL": sqlite_url,
        "CONSOLE_SECRET_KEY": "test" * 8,
        "CONSOLE_SMTP_URL": "smtp://127.0.0.1:9",  # nothing is queued: never dialled
        "CONSOLE_LOG_LEVEL": "WARNING",
    }
    result = CliRunner().invoke(main, ["serve", "--port", str(free_port())], env=environment)

    assert "console on http://127.0.0.1:" in result.output
    assert "Aborted" not in result.output
    assert result.exit_code == 0, result.output
