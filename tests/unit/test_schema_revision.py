"""The schema revision start-up lets through without Alembic is the newest migration."""

from alembic.script import ScriptDirectory

from console.paths import MIGRATIONS_DIR
from console.store.schema_check import SCHEMA_REVISION, head_revision, is_behind


def test_the_schema_revision_is_alembic_s_head():
    assert SCHEMA_REVISION == ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert head_revision() == SCHEMA_REVISION


def test_only_the_head_and_revisions_this_code_does_not_know_are_not_behind():
    assert not is_behind(SCHEMA_REVISION)
    assert not is_behind("9999")  # a newer code's migration: a rolling upgrade
    assert is_behind(None)
    assert is_behind("0001")
    assert is_behind("0017")
