"""``console user create | set-password | list``: operator accounts from the command line."""

from __future__ import annotations

import sys

import click
from flask.cli import with_appcontext

from console.commands.sessions import command_session
from console.store.accounts import (
    UserError,
    create_user,
    find_user,
    list_users,
    set_password,
)
from console.vocabulary import ROLES
from console.words.refusals import said

COMMAND_LINE_ACTOR = "command line"  # the audit log's actor for these commands


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return click.prompt("Password", hide_input=True, confirmation_prompt=True)


@click.group("user")
def user_cli() -> None:
    """Manage operator accounts."""


@user_cli.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True, help="What the user may do.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@with_appcontext
def create_user_command(name: str, role: str, password_stdin: bool) -> None:
    """Create an operator account NAME."""
    with command_session() as session:
        password = _read_password(password_stdin)
        try:
            user = create_user(session, name, password, role)
            session.commit()
        except UserError as exc:
            session.rollback()
            raise click.ClickException(said(exc)) from None
        click.echo(f"created {role} {user.username}")


@user_cli.command("set-password")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@with_appcontext
def set_password_command(name: str, password_stdin: bool) -> None:
    """Give the account NAME a new password; every session of it ends (audited)."""
    with command_session() as session:
        user = find_user(session, name)
        if user is None:
            raise click.ClickException(f"there is no user {name!r} (see: console user list)")
        password = _read_password(password_stdin)
        try:
            set_password(session, user.id, password, actor=COMMAND_LINE_ACTOR)
            session.commit()
        except UserError as exc:
            session.rollback()
            raise click.ClickException(said(exc)) from None
        click.echo(f"new password set for {user.username}; their sessions have ended")


@user_cli.command("list")
@with_appcontext
def list_users_command() -> None:
    """List every account: name, role, state and last login (UTC)."""
    with command_session() as session:
        users = list_users(session)
        width = max([len("username"), *(len(u.username) for u in users)])
        click.echo(f"{'username':<{width}}  {'role':<8}  {'state':<11}  last login (UTC)")
        for user in users:
            state = "active" if user.active else "deactivated"
            last = user.last_login_at.strftime("%Y-%m-%d %H:%M") if user.last_login_at else "never"
            click.echo(f"{user.username:<{width}}  {user.role:<8}  {state:<11}  {last}")
