"""The ``console`` command: a Flask CLI group around the app factory."""

from __future__ import annotations

import click
from flask.cli import FlaskGroup

from console import create_app
from console.demo import demo_command
from console.retention import prune_command
from console.runner import serve_command, worker_command
from console.users import user_cli


@click.group(cls=FlaskGroup, create_app=create_app, add_version_option=False)
def main() -> None:
    """Operator console and worker for transactional email."""


main.add_command(user_cli)
main.add_command(prune_command)
main.add_command(worker_command)
main.add_command(serve_command)
main.add_command(demo_command)
