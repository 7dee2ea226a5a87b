"""``console --help`` ends in a sentence that points to the configuration page."""

from __future__ import annotations

from click.testing import CliRunner

from console.cli import main


def test_help_names_the_configuration_page_and_ends_in_a_sentence():
    said = CliRunner().invoke(main, ["--help"]).output
    assert "CONSOLE_SECRET_KEY..." not in said
    assert "docs/configuration.md" in said
