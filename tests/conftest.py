"""Shared fixtures: a fresh migrated database per test on SQLite and on PostgreSQL.

Tests that take ``db_url`` (or anything built on it) run once per backend.
PostgreSQL is a throwaway cluster started once per test session; when it is not
installed those tests are skipped with a loud warning, unless
CONSOLE_TEST_REQUIRE_POSTGRES=1 makes that a failure.
"""

from __future__ import annotations

import itertools
import os
import shutil
import warnings

import pytest
from sqlalchemy.orm import Session, sessionmaker

from console.store.database import make_engine, make_session_factory
from tests.support import pgcluster

REQUIRE_POSTGRES = os.environ.get("CONSOLE_TEST_REQUIRE_POSTGRES") == "1"
TEST_SECRET_KEY = "test-secret-key" * 3
_database_numbers = itertools.count(1)


def migrate_to_head(url: str) -> None:
    """Run every migration against `url`, as ``console db upgrade`` does."""
    import flask_migrate

    from console.app import create_app

    app = create_app({"CONSOLE_DATABASE_URL": url, "CONSOLE_SECRET_KEY": TEST_SECRET_KEY})
    with app.app_context():
        flask_migrate.upgrade()
        from console.web.extensions import db

        db.engine.dispose()


@pytest.fixture(scope="session")
def pg_cluster():
    """A PostgreSQL cluster for the whole test session, or a skip/failure."""
    if pgcluster.postgres_bin_dir() is None:
        message = "PostgreSQL is NOT installed: every PostgreSQL test is SKIPPED"
        if REQUIRE_POSTGRES:
            pytest.fail(message + " and CONSOLE_TEST_REQUIRE_POSTGRES=1", pytrace=False)
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    cluster = pgcluster.start_cluster()
    template_url = pgcluster.create_database(cluster, "migrated_template")
    migrate_to_head(template_url)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> str:
    """Path of a SQLite file migrated to head, copied for each test."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    migrate_to_head(f"sqlite:///{path}")
    return str(path)


def fresh_database_url(backend: str, request, tmp_path) -> str:
    """Return the URL of a new, migrated, empty database on `backend`."""
    if backend == "sqlite":
        target = tmp_path / "console.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), target)
        return f"sqlite:///{target}"
    cluster = request.getfixturevalue("pg_cluster")
    name = f"test_{os.getpid()}_{next(_database_numbers)}"
    return pgcluster.create_test_database(cluster, request, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request) -> str:
    """The database backend this test runs on."""
    return request.param


# Tests whose outcome depends on how busy the machine is: rates and latencies measured.
# tests/run.sh runs them alone, after the rest of the suite has run in two processes.
SERIAL_FILES = {
    "tests/e2e/test_send_rate.py",
    "tests/e2e/test_send_quota.py",
    "tests/e2e/test_send_throttle.py",
    "tests/e2e/test_send_concurrency.py",
    "tests/e2e/test_scale_out.py",
    "tests/integration/web/test_busy_database.py",
}
SERIAL_TESTS: set[str] = set()


def pytest_collection_modifyitems(items) -> None:
    """Mark each PostgreSQL run of a test, and each test run only there, with `postgres`, so
    `-m "not postgres"` selects the SQLite half (the fast loop) and the whole suite runs
    both; mark the tests of ``SERIAL_FILES`` and ``SERIAL_TESTS`` `serial`."""
    for item in items:
        path = item.nodeid.split("::")[0]
        if path in SERIAL_FILES or item.nodeid.split("[")[0] in SERIAL_TESTS:
            item.add_marker(pytest.mark.serial)
        if runs_on_postgres(item):
            item.add_marker(pytest.mark.postgres)


POSTGRES_FIXTURES = {"postgres_url", "pg_cluster"}


def runs_on_postgres(item) -> bool:
    """Whether `item` is the PostgreSQL run of a test, or a test that only runs there."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "postgresql":
        return True
    return bool(POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.fixture
def db_url(backend, request, tmp_path) -> str:
    """URL of a fresh migrated database, once on SQLite and once on PostgreSQL."""
    return fresh_database_url(backend, request, tmp_path)


@pytest.fixture
def sqlite_url(request, tmp_path) -> str:
    return fresh_database_url("sqlite", request, tmp_path)


@pytest.fixture
def postgres_url(request, tmp_path) -> str:
    return fresh_database_url("postgresql", request, tmp_path)


@pytest.fixture
def engine(db_url):
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session_factory(engine) -> sessionmaker[Session]:
    return make_session_factory(engine)


@pytest.fixture
def session(session_factory):
    with session_factory() as session:
        yield session


@pytest.fixture
def clock():
    """A clock that moves only when the test says so (``TestClock``); workers read it."""
    from tests.support.workers import TestClock

    return TestClock()


@pytest.fixture
def make_worker(request, clock):
    """Build workers (``build_worker``) on this test's database and clock; close them after.

    ``make_worker(transport, **options)``: `session_factory` and `clock` may be given
    to use others than this test's. A worker on this test's clock has ``enqueue()`` stamp
    intents with that clock too, so that one enqueued is due at the clock's reading however
    slow the machine (with the real time, only while the clock's second of lead lasted).
    """
    from tests.support.workers import build_worker

    workers = []

    def make(transport, *, session_factory=None, **options):
        options.setdefault("clock", clock)
        if options["clock"] is clock:
            request.getfixturevalue("monkeypatch").setattr("console.outbox.utcnow", clock)
        factory = session_factory or request.getfixturevalue("session_factory")
        worker = build_worker(factory, transport, **options)
        workers.append(worker)
        return worker

    yield make
    for worker in workers:
        worker.close()


@pytest.fixture
def app(db_url):
    """The console app on the fresh database of this test."""
    from console.app import create_app

    app = create_app(
        {"CONSOLE_DATABASE_URL": db_url, "CONSOLE_SECRET_KEY": TEST_SECRET_KEY, "TESTING": True}
    )
    yield app
    with app.app_context():
        from console.web.extensions import db

        db.engine.dispose()


@pytest.fixture
def console_user(app):
    """Create a console account; a cheap password hash keeps tests fast."""
    from werkzeug.security import generate_password_hash

    from console.models import OperatorUser, utcnow
    from console.web.extensions import db

    def create(username: str, role: str, password: str = "correct horse", active: bool = True):
        with app.app_context():
            user = OperatorUser(
                username=username,
                password_hash=generate_password_hash(password, method="pbkdf2:sha256:1000"),
                role=role,
                active=active,
                created_at=utcnow(),
            )
            db.session.add(user)
            db.session.commit()
            return user.id

    return create


@pytest.fixture
def console_client(app, console_user):
    """Return a test client logged in (through /login) as a new user with `role`."""

    def logged_in(role: str, username: str | None = None):
        username = username or f"{role}-user"
        console_user(username, role)
        client = app.test_client()
        with client.session_transaction() as flask_session:
            flask_session["_csrf_token"] = "login-form-token"
        response = client.post(
            "/login",
            data={
                "username": username,
                "password": "correct horse",
                "csrf_token": "login-form-token",
            },
        )
        assert response.status_code == 302, response.text
        with client.session_transaction() as flask_session:
            flask_session["_csrf_token"] = f"{username}-token"
        client.csrf_token = f"{username}-token"
        return client

    return logged_in


@pytest.fixture
def add_intent(app):
    """Enqueue an intent, then give it `status` and any other column values; return its id."""
    import itertools

    from console.models import Intent
    from console.outbox import enqueue
    from console.web.extensions import db

    numbers = itertools.count(1)

    def add(status: str = "pending", *, to: str = "ada@example.com", **columns) -> int:
        number = next(numbers)
        with app.app_context():
            intent = enqueue(
                db.session,
                key=columns.pop("key", f"order:{number}:confirmation"),
                event=columns.pop("event", f"order:{number}"),
                to=to,
                template="login-code",
                params={"code": f"{number:06d}"},
            )
            db.session.flush()
            values = {"status": status, **columns}
            db.session.query(Intent).filter_by(id=intent.id).update(values)
            db.session.commit()
            return intent.id

    return add
