"""What every drill works with: the scratch database, the relay (or, with
``CONSOLE_TRANSPORT=http``, the provider's API played locally), and ``console worker``
processes started with the deployment's own settings and the drill's short timings.

The workers get the environment of ``console drill`` with these changes: the
scratch database and the relay (or the play server, with a key of its own) instead of
the configured ones; no alert target, no real provider API, no send rate or quota, no
metrics port (nothing leaves this machine, and a drill is not slowed by a budget it
does not test); and the short
timings of ``DRILL_TIMINGS`` (the report says so), so a lease runs out and a retry
comes due within the drill. Everything else (templates, eligibility module,
classify overrides, attempt and age caps, per-domain back-off run) is the team's.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from console import outbox
from console.config import Settings
from console.drill.provider_play import ProviderPlay
from console.drill.relay import DrillRelay
from console.mail.catalog import TemplateCatalog
from console.models import Attempt, Intent
from console.state_tables import WorkerHeartbeat
from console.store.database import make_engine, make_session_factory
from console.vocabulary import HOLD, PENDING, SENDING

# The drill's timings, replacing the deployment's for the scratch run only.
DRILL_TIMINGS = {
    "CONSOLE_LEASE_SECONDS": "1",
    "CONSOLE_POLL_SECONDS": "0.2",
    "CONSOLE_RETRY_BASE_SECONDS": "0.5",
    "CONSOLE_RETRY_CAP_SECONDS": "1",
    "CONSOLE_RETRY_FLOOR_SECONDS": "0.2",
    "CONSOLE_SMTP_TIMEOUT_SECONDS": "2",
    "CONSOLE_SMTP_CONNECTIONS": "1",
    "CONSOLE_BATCH_SIZE": "10",
}
# Settings that reach outside this machine, or hold sends back: left out of the workers'.
LEFT_OUT = (
    "CONSOLE_ALERT_WEBHOOK_URL",
    "CONSOLE_ALERT_EMAIL",
    "CONSOLE_HTTP_PROVIDER_URL",
    "CONSOLE_HTTP_PROVIDER_KEY",
    "CONSOLE_PROVIDER",
    "CONSOLE_TRANSPORT",
    "CONSOLE_SEND_RATE",
    "CONSOLE_SEND_BURST",
    "CONSOLE_SEND_DAILY_QUOTA",
    "CONSOLE_SEND_DAILY_CRITICAL_RESERVE",
    "CONSOLE_WORKER_METRICS_PORT",
    "CONSOLE_TEST_CRASH_AT",
    "CONSOLE_SMTP_DISCARD_EHLO_KEYWORDS",
)
WORKER_PROGRAM = "from console.entry import main; main()"
UNSETTLED = (PENDING, SENDING)
STOP_SECONDS = 15.0


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    """Look at `condition` every 50 ms until it holds (True) or `seconds` pass (False)."""
    deadline = time.monotonic() + seconds
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


class WorkerExited(RuntimeError):
    """A worker the drill started exited before the drill was over; the message says why."""


@dataclasses.dataclass
class DrillContext:
    """The scratch run: database, relay, settings, and the workers it starts."""

    url: str
    folder: Path
    relay: DrillRelay | ProviderPlay  # the SMTP relay, or the provider's API played
    settings: Settings  # the deployment's, on the scratch database
    catalog: TemplateCatalog
    run: str = dataclasses.field(default_factory=lambda: secrets.token_hex(3))
    sessions: sessionmaker[Session] = dataclasses.field(init=False)
    _workers: int = 0

    def __post_init__(self) -> None:
        self.engine = make_engine(self.url)
        self.sessions = make_session_factory(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # --- names -----------------------------------------------------------------------------

    def key(self, drill: str, n: int | str = 1) -> str:
        return f"drill:{self.run}:{drill}:{n}"

    def address(self, drill: str, n: int | str = 1, domain: str = "example.com") -> str:
        return f"{drill}-{n}-{self.run}@{domain}"

    def example_params(self, template: str) -> dict[str, Any]:
        """The sample params the template folder carries (checked at start-up)."""
        path = self.catalog.folder(template) / "example.json"
        return json.loads(path.read_text(encoding="utf-8"))

    def templates(self) -> list[str]:
        return self.catalog.names()

    def plain_template(self) -> str:
        """The template the drills that are not about templates send: the first that holds."""
        names = self.templates()
        held = [name for name in names if self.catalog.settings(name).ambiguity_policy == HOLD]
        return (held or names)[0]

    # --- the database ----------------------------------------------------------------------

    def enqueue(self, drill: str, template: str, *, n: int | str = 1, to: str | None = None,
                **options: Any) -> Intent:  # fmt: skip
        """Enqueue and commit one intent of `drill`; return it (detached)."""
        with self.sessions() as session:
            intent = outbox.enqueue(
                session, key=self.key(drill, n), to=to or self.address(drill, n),
                template=template, params=self.example_params(template), **options,
            )  # fmt: skip
            session.commit()
            session.refresh(intent)
            session.expunge(intent)
            return intent

    def backdate(self, intent_id: int, seconds: float) -> None:
        """Make the intent look `seconds` older than it is (created and due then)."""
        with self.sessions() as session:
            intent = session.get(Intent, intent_id)
            then = intent.created_at - dt.timedelta(seconds=seconds)
            intent.created_at = intent.next_attempt_at = then
            session.commit()

    def intent(self, intent_id: int) -> Intent:
        with self.sessions() as session:
            intent = session.get(Intent, intent_id)
            session.expunge(intent)
            return intent

    def attempts(self, intent_id: int) -> list[Attempt]:
        with self.sessions() as session:
            query = select(Attempt).where(Attempt.intent_id == intent_id).order_by(Attempt.id)
            rows = list(session.scalars(query))
            session.expunge_all()
            return rows

    def settled(self, *intent_ids: int) -> bool:
        """Whether none of the intents is pending or being sent."""
        return all(self.intent(i).status not in UNSETTLED for i in intent_ids)

    def ticked(self, pid: int) -> bool:
        """Whether the worker with process id `pid` has written its heartbeat: it is polling."""
        with self.sessions() as session:
            query = select(WorkerHeartbeat.worker_id).where(WorkerHeartbeat.pid == pid)
            return session.execute(query.limit(1)).first() is not None

    @property
    def over_http(self) -> bool:
        """Whether the workers send through the provider's HTTP API (played locally)."""
        return self.relay.transport == "http"

    @property
    def accepted_word(self) -> str:
        """How the relay or provider says it took the body, for the report's sentences."""
        return "provider's 200" if self.over_http else "250"

    def received(self, message_id: str) -> int:
        """How many bodies with `message_id` the relay took (accepted or unanswered)."""
        return sum(1 for a in self.relay.arrivals(message_id) if a.accepted_or_unknown)

    # --- workers ---------------------------------------------------------------------------

    def worker_environment(self, **extra: str) -> dict[str, str]:
        environ = {k: v for k, v in os.environ.items() if k not in LEFT_OUT}
        environ.update(DRILL_TIMINGS)
        environ.update(
            CONSOLE_DATABASE_URL=self.url,
            CONSOLE_SECRET_KEY=self.settings.secret_key,
            CONSOLE_LOG_LEVEL=os.environ.get("CONSOLE_LOG_LEVEL", "WARNING"),
        )
        self.relay.environment(environ)
        environ.update(extra)
        return environ

    def start_worker(self, *, crash_at: str | None = None, **extra: str) -> subprocess.Popen:
        """Start a ``console worker`` on the scratch database, from this directory (an
        eligibility module or templates folder named relative to it is found); its output
        goes to a log file of the scratch run."""
        self._workers += 1
        if crash_at is not None:
            extra["CONSOLE_TEST_CRASH_AT"] = crash_at
        log_path = self.folder / f"worker-{self._workers}.log"
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-c", WORKER_PROGRAM, "worker"],
                env=self.worker_environment(**extra),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def killed(self, process: subprocess.Popen, seconds: float) -> bool:
        """Whether `process` died of SIGKILL within `seconds` (it is killed if still running)."""
        try:
            return process.wait(seconds) == -signal.SIGKILL
        except subprocess.TimeoutExpired:
            self.stop(process)
            return False

    def stop(self, process: subprocess.Popen) -> None:
        """SIGTERM, as an operator stops a worker; SIGKILL if it does not stop in time."""
        if process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def run_worker_until(self, condition: Callable[[], bool], seconds: float, **extra: str) -> bool:
        """Run one worker until `condition` holds or `seconds` pass; stop it; return whether.

        A worker that exits on its own (a setting it refuses) stops the drill: WorkerExited.
        """
        process = self.start_worker(**extra)
        try:
            held = wait_for(lambda: condition() or process.poll() is not None, seconds)
            if process.poll() is not None and not condition():
                raise WorkerExited(self._last_words(process))
            return held
        finally:
            self.stop(process)

    def _last_words(self, process: subprocess.Popen) -> str:
        log_path = self.folder / f"worker-{self._workers}.log"
        lines = (
            log_path.read_text(errors="replace").strip().splitlines() if log_path.exists() else []
        )
        said = lines[-1] if lines else "nothing"
        return f"the worker exited with status {process.returncode}: {said}"

    def cancel_unsent(self, *keys: str) -> None:
        """Cancel what a drill leaves pending, so no later drill's worker sends it."""
        with self.sessions() as session:
            for key in keys:
                outbox.supersede(session, key=key, reason="drill over")
            session.commit()
