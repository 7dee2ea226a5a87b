"""Operator accounts: creation, password hashing, and the ``console user`` commands."""

from __future__ import annotations

import sys

import click
from flask.cli import with_appcontext
from sqlalchemy import select
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from console.models import ROLES, OperatorUser, utcnow

MIN_PASSWORD_LENGTH = 8


class UserError(ValueError):
    """The account cannot be created or changed as asked."""


def create_user(session: Session, username: str, password: str, role: str) -> OperatorUser:
    """Add an operator with a scrypt-hashed password to `session` (no commit)."""
    username = username.strip()
    if not username or len(username) > 100:
        raise UserError("username must be 1 to 100 characters")
    if role not in ROLES:
        raise UserError(f"role must be one of {', '.join(ROLES)}")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UserError(f"password must be at least {MIN_PASSWORD_LENGTH} characters")
    exists = session.execute(select(OperatorUser.id).where(OperatorUser.username == username))
    if exists.first() is not None:
        raise UserError(f"user {username!r} already exists")
    user = OperatorUser(
        username=username,
        password_hash=generate_password_hash(password),
        role=role,
        active=True,
        created_at=utcnow(),
    )
    session.add(user)
    return user


def verify_password(user: OperatorUser, password: str) -> bool:
    """Return whether `password` matches the stored hash of `user`."""
    return check_password_hash(user.password_hash, password)


@click.group("user")
def user_cli() -> None:
    """Manage operator accounts."""


@user_cli.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True, help="What the user may do.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@with_appcontext
def create_command(name: str, role: str, password_stdin: bool) -> None:
    """Create an operator account NAME."""
    from console.extensions import db

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    try:
        create_user(db.session, name, password, role)
        db.session.commit()
    except UserError as exc:
        db.session.rollback()
        raise click.ClickException(str(exc)) from None
    click.echo(f"created {role} {name}")
