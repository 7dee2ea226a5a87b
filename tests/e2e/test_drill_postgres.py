"""`console drill --database` on PostgreSQL: it holds on an empty database, and refuses one
that holds mail it did not make, in one line, changing nothing."""

from __future__ import annotations

import os

import pytest

from tests.e2e.test_demo_database import snapshot, store_the_applications_rows
from tests.e2e.test_drill import drill, failed, report
from tests.support import pgcluster

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


# The drills whose outcome rests on the database's own work: the claim's lock, the lease,
# the mark and the record. The whole set on PostgreSQL is one command away
# (`console drill --database URL`); on SQLite the suite runs it whole (test_drill.py).
ON_THE_DATABASE = ("killed-after-claim", "killed-after-body", "suppressed-before-body",
                   "same-key", "two-workers")  # fmt: skip


def test_the_drills_that_rest_on_the_database_hold_on_postgresql(pg_cluster, tmp_path):
    url = pgcluster.create_database(pg_cluster, f"drill_{os.getpid()}")
    only = [argument for name in ON_THE_DATABASE for argument in ("--only", name)]
    run = drill("--database", url, *only, cwd=tmp_path)
    assert {row["drill"] for row in report(run)["results"]} == set(ON_THE_DATABASE)
    assert failed(report(run)) == [], run.stderr[-3000:]
    assert run.returncode == 0


def test_a_database_holding_mail_it_did_not_make_is_refused(postgres_url, tmp_path):
    store_the_applications_rows(postgres_url)
    before = snapshot(postgres_url)
    run = drill("--database", postgres_url, cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert "holds accounts or mail that console drill did not create" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert snapshot(postgres_url) == before
