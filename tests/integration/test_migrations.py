"""The migrations create exactly the schema the models describe."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

import console.models  # noqa: F401 - registers every table on Base.metadata
from console.model_columns import Base


def test_models_and_migrations_agree(engine):
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True}
        )
        assert compare_metadata(context, Base.metadata) == []


def test_six_public_tables_exist(engine):
    tables = set(inspect(engine).get_table_names())
    expected = {
        "email_intent",
        "email_attempt",
        "provider_event",
        "suppression",
        "operator_user",
        "audit_entry",
    }
    assert expected <= tables


def test_sqlite_uses_wal(sqlite_url):
    from console.store.database import make_engine

    engine = make_engine(sqlite_url)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    engine.dispose()
