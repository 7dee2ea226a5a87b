"""``console hold``, ``console release`` and ``console holds``: stop a lane, a template or a
recipient domain from the command line, let it go again, and list what is held.

A selector the console does not know (a lane or a template) exits with status 2, as a
usage error; a hold refused for another reason (already held, not held) with status 1.
"""

from __future__ import annotations

import datetime as dt
import getpass

import click
from flask import current_app
from flask.cli import with_appcontext

from console.commands.sessions import command_session
from console.mail.catalog import TemplateCatalog, catalog_for
from console.models import utcnow
from console.ops.hold_targets import known_selector, max_ages
from console.state_tables import HOLD_DOMAIN, HOLD_LANE, HOLD_TEMPLATE
from console.store import holds
from console.store.actions import ActionRefused
from console.words.refusals import said


def _catalog() -> TemplateCatalog:
    return catalog_for(current_app.extensions["console.settings"])


def _selector_options(command):
    command = click.option("--domain", metavar="DOMAIN", help="A recipient domain.")(command)
    command = click.option("--template", metavar="NAME[@N]", help="A template, or one version.")(
        command
    )
    return click.option("--lane", metavar="NAME", help="A lane: critical or bulk.")(command)


def _one_selector(lane: str | None, template: str | None, domain: str | None):
    named = ((HOLD_LANE, lane), (HOLD_TEMPLATE, template), (HOLD_DOMAIN, domain))
    given = [(kind, text) for kind, text in named if text]
    if len(given) != 1:
        raise click.UsageError("name exactly one of --lane, --template or --domain")
    return given[0]


def _until(value: str | None) -> dt.datetime | None:
    if value is None:
        return None
    try:
        until = dt.datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"not an ISO 8601 time: {value!r}", param_hint="--until") from None
    return until if until.tzinfo else until.replace(tzinfo=dt.UTC)


def _actor() -> str:
    return f"cli:{getpass.getuser()}"


@click.command("hold")
@_selector_options
@click.option("--reason", required=True, help="Why; audited and shown on the dashboard.")
@click.option("--until", "until", metavar="ISO8601", help="Release by itself at this time.")
@with_appcontext
def hold_command(lane, template, domain, reason: str, until: str | None) -> None:
    """Send nothing of a lane, a template or a recipient domain until it is released."""
    with command_session() as session:
        kind, text = _one_selector(lane, template, domain)
        try:
            selector = known_selector(kind, text, _catalog())
        except holds.UnknownTarget as exc:
            raise click.UsageError(said(exc)) from None
        try:
            placed = holds.place_hold(
                session, selector, actor=_actor(), reason=reason, now=utcnow(), until=_until(until)
            )
            waiting = holds.waiting_behind(session, selector)
            session.commit()
        except ActionRefused as exc:
            session.rollback()
            raise click.ClickException(said(exc)) from None
        ends = f" until {placed.until:%Y-%m-%d %H:%M:%S} UTC" if placed.until else ""
        click.echo(f"held {selector.notation()}{ends}; {waiting} pending intents wait behind it")


@click.command("release")
@_selector_options
@click.option("--reason", help="Why; required, audited.")
@with_appcontext
def release_command(lane, template, domain, reason: str | None) -> None:
    """Let a held lane, template or recipient domain go out again, in its original order."""
    if not (reason or "").strip():
        raise click.ClickException("a reason is required: give --reason TEXT (it is audited).")
    with command_session() as session:
        kind, text = _one_selector(lane, template, domain)
        catalog = _catalog()
        try:
            selector = holds.Selector.parse(kind, text)
            now = utcnow()
            hold = holds.active_hold(session, selector, now)
            if hold is None:
                known_selector(kind, text, catalog)
                raise click.ClickException(f"{selector.notation()} is not held")
            released = holds.release_hold(
                session, hold.id, actor=_actor(), reason=reason, now=now, max_ages=max_ages(catalog)
            )
            session.commit()
        except holds.UnknownTarget as exc:
            raise click.UsageError(said(exc)) from None
        except ActionRefused as exc:
            session.rollback()
            raise click.ClickException(said(exc)) from None
        expired = f"; {released.expired} expired while held" if released.expired else ""
        click.echo(f"released {selector.notation()}: {released.waiting} intents due now{expired}")


@click.command("holds")
@with_appcontext
def holds_command() -> None:
    """List the holds in force, oldest first, with the intents waiting behind each."""
    with command_session() as session:
        lines = holds.holds_in_force(session, utcnow())
        if not lines:
            click.echo("nothing is held")
        for line in lines:
            hold = line.hold
            ends = f", until {hold.until:%Y-%m-%d %H:%M:%S} UTC" if hold.until else ""
            click.echo(
                f"{line.selector.notation()}\theld since {hold.held_at:%Y-%m-%d %H:%M:%S} UTC by "
                f"{hold.held_by}{ends}\t{line.waiting} waiting\t{hold.reason}"
            )


HOLD_COMMANDS = (hold_command, release_command, holds_command)
