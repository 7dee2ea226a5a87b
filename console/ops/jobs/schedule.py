"""Background operations jobs of every ``console serve`` and ``console worker`` process.

* alerts: evaluate the alert conditions every ``CONSOLE_ALERT_INTERVAL_SECONDS``;
* retention: one pass a day (``console prune`` does the same by hand);
* reconcile: ask the provider about ambiguous sends every ``CONSOLE_RECONCILE_SECONDS``,
  where it can answer (``console.ops.jobs.provider_asking``).

They run on a scheduler of their own, so a long retention pass never delays the
send loop. Several processes may run them at once: alert transitions are
compare-and-set and retention batches skip rows another process holds.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading

from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import Engine

from console.config import Settings
from console.ops.alerts import cycle
from console.ops.jobs import provider_asking, retention
from console.store.database import make_engine, make_session_factory

log = logging.getLogger(__name__)

RETENTION_INTERVAL_HOURS = 24
RETENTION_FIRST_RUN_MAX_DELAY_SECONDS = 3600.0  # spread the processes' first passes


class OpsJobs:
    """A scheduler holding the alert and retention jobs, with a database engine of its own."""

    def __init__(self, settings: Settings, engine: Engine | None = None) -> None:
        self.settings = settings
        self._own_engine = engine is None
        self.engine = engine or make_engine(settings.database_url)
        self.session_factory = make_session_factory(self.engine)
        self.scheduler = BackgroundScheduler(timezone=dt.UTC)
        self.lookup: provider_asking.ProviderLookup | None = None  # set by start()
        self.stopping = threading.Event()  # set by shutdown(): a reconcile run asks no further

    def start(self, first_retention_delay_seconds: float | None = None) -> OpsJobs:
        now = dt.datetime.now(dt.UTC)
        if first_retention_delay_seconds is None:
            first_retention_delay_seconds = random.uniform(0, RETENTION_FIRST_RUN_MAX_DELAY_SECONDS)
        self.scheduler.add_job(
            self.check_alerts,
            "interval",
            seconds=self.settings.alert_interval_seconds,
            id="alerts",
            max_instances=1,
            coalesce=True,
            next_run_time=now + dt.timedelta(seconds=self.settings.alert_interval_seconds),
        )
        self.scheduler.add_job(
            self.prune,
            "interval",
            hours=RETENTION_INTERVAL_HOURS,
            id="retention",
            max_instances=1,
            coalesce=True,
            next_run_time=now + dt.timedelta(seconds=first_retention_delay_seconds),
        )
        self._add_reconcile_job(now)
        self.scheduler.start()
        return self

    def _add_reconcile_job(self, now: dt.datetime) -> None:
        self.lookup = provider_asking.lookup_for(self.settings)
        if self.lookup is None:
            return
        self.scheduler.add_job(
            self.reconcile_by_asking,
            "interval",
            seconds=self.settings.reconcile_seconds,
            id="reconcile",
            max_instances=1,
            coalesce=True,
            next_run_time=now + dt.timedelta(seconds=self.settings.reconcile_seconds),
        )

    def reconcile_by_asking(self) -> None:
        from console.mail.catalog import catalog_for

        try:
            catalog = catalog_for(self.settings)
            provider_asking.run(
                self.session_factory, self.settings, self.lookup, catalog, stop=self.stopping
            )
        except Exception:  # noqa: BLE001 - logged; the next interval tries again
            log.exception("reconcile by asking failed", extra={"stage": "reconcile"})

    def check_alerts(self) -> None:
        try:
            cycle.run_alert_cycle(self.session_factory, self.settings)
        except Exception:  # noqa: BLE001 - logged; the next interval tries again
            log.exception("alert check failed", extra={"stage": "alert"})

    def prune(self) -> None:
        try:
            retention.prune(
                self.session_factory,
                retention_days=self.settings.retention_days,
                batch_size=self.settings.retention_batch_size,
                delete_days=self.settings.retention_delete_days,
                address_key=self.settings.secret_key,
            )
        except Exception:  # noqa: BLE001 - logged; tomorrow's pass tries again
            log.exception("retention pass failed", extra={"stage": "retention"})

    def shutdown(self) -> None:
        """Stop the jobs, waiting for those running (a reconcile run: its lookup in flight)."""
        self.stopping.set()
        self.scheduler.shutdown(wait=True)
        if self.lookup is not None:
            self.lookup.close()
        if self._own_engine:
            self.engine.dispose()


def start_ops_jobs(settings: Settings) -> OpsJobs:
    """Start the alert and retention jobs for this process."""
    return OpsJobs(settings).start()
