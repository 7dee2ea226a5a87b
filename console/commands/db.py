"""``console db upgrade``: bring the schema to a revision, saying which database and where to.

Alembic's progress lines stay out of the terminal (its logger writes warnings only);
one line names the database (its password hidden) and the revisions before and after.
Flask-Migrate's other commands (``current``, ``downgrade``, ``revision``...) still
answer by name for whoever maintains the migrations, unlisted.
"""

from __future__ import annotations

import click
from flask import current_app, g
from flask.cli import with_appcontext
from flask_migrate import cli as migrate_cli


class DatabaseGroup(click.Group):
    """Lists its own commands only; Flask-Migrate's answer by name."""

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return super().get_command(ctx, name) or migrate_cli.db.get_command(ctx, name)


@click.group("db", cls=DatabaseGroup)
@with_appcontext
def db_cli() -> None:
    """Create or upgrade the database schema.

    The database is the one CONSOLE_DATABASE_URL names (default: SQLite under instance/).
    """
    g.directory, g.x_arg = None, ()  # what Flask-Migrate's commands read: their defaults


def _revision_at(url: str) -> str | None:
    from console.store import schema_check as database

    with database.connected(url) as connection:
        return database.current_revision(connection)


def upgrade_summary(shown_url: str, before: str | None, after: str | None) -> str:
    """The line that says what an upgrade did to the database at `shown_url`."""
    if before == after:
        return f"the database at {shown_url} is already at revision {after}"
    start = "no schema" if before is None else f"revision {before}"
    return f"upgraded the database at {shown_url} from {start} to revision {after}"


@db_cli.command("upgrade")
@click.argument("revision", default="head")
@with_appcontext
def upgrade_command(revision: str) -> None:
    """Upgrade the schema to REVISION (default: the newest this code has)."""
    from alembic import command
    from alembic.util import CommandError

    from console.store.schema_check import DatabaseNotReady, shown_url
    from console.words.refusals import said

    url = current_app.extensions["console.settings"].database_url
    migrations = current_app.extensions["migrate"].migrate
    try:
        before = _revision_at(url)
        command.upgrade(migrations.get_config(), revision)
    except (CommandError, DatabaseNotReady) as error:
        raise click.ClickException(said(error)) from None
    click.echo(upgrade_summary(shown_url(url), before, _revision_at(url)))
