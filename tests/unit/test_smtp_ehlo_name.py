"""The name the worker gives in EHLO: CONSOLE_SMTP_EHLO_NAME, else this host's FQDN, else
an address literal (RFC 5321 §4.1.3) of the address that reaches the relay."""

from __future__ import annotations

import pytest

from console.config import ConfigError, load_settings
from console.transports.smtp_endpoint import default_ehlo_name

BASE = {"CONSOLE_DATABASE_URL": "sqlite://", "CONSOLE_SECRET_KEY": "k" * 32}


@pytest.mark.parametrize(
    "fqdn,local_address,expected",
    [
        ("mail.example.com", "10.0.0.5", "mail.example.com"),
        ("vm", "10.0.0.5", "[10.0.0.5]"),
        ("localhost", "127.0.0.1", "[127.0.0.1]"),
        ("localhost.localdomain", "127.0.0.1", "[127.0.0.1]"),
        ("vm", "::1", "[IPv6:::1]"),
        ("vm.", "192.0.2.1", "[192.0.2.1]"),
    ],
)
def test_the_default_is_the_fqdn_or_an_address_literal(fqdn, local_address, expected):
    assert default_ehlo_name(fqdn=fqdn, local_address=local_address) == expected


def test_the_setting_is_read_and_checked(tmp_path):
    settings = load_settings(
        {**BASE, "CONSOLE_SMTP_EHLO_NAME": "mta.example.org"}, instance_path=tmp_path
    )
    assert settings.smtp_ehlo_name == "mta.example.org"
    assert load_settings(BASE, instance_path=tmp_path).smtp_ehlo_name is None
    literal = load_settings(
        {**BASE, "CONSOLE_SMTP_EHLO_NAME": "[192.0.2.7]"}, instance_path=tmp_path
    )
    assert literal.smtp_ehlo_name == "[192.0.2.7]"


@pytest.mark.parametrize("value", ["two words", "bad\r\nname", "x@y.z", "<a.b>", "[not-an-ip]"])
def test_a_bad_ehlo_name_names_the_variable(tmp_path, value):
    with pytest.raises(ConfigError, match="CONSOLE_SMTP_EHLO_NAME"):
        load_settings({**BASE, "CONSOLE_SMTP_EHLO_NAME": value}, instance_path=tmp_path)


def test_the_factory_passes_the_name_to_the_transport(tmp_path):
    from console.transports.factory import make_transport

    settings = load_settings(
        {**BASE, "CONSOLE_SMTP_EHLO_NAME": "mta.example.org"}, instance_path=tmp_path
    )
    assert make_transport(settings).ehlo_name == "mta.example.org"
