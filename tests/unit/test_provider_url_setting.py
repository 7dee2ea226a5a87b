"""CONSOLE_HTTP_PROVIDER_URL carries the API key: https, unless the host is this machine."""

from __future__ import annotations

import pytest

from console.config import ConfigError, load_settings

VARIABLE = "CONSOLE_HTTP_PROVIDER_URL"


@pytest.mark.parametrize(
    "url",
    [
        "https://api.resend.com",
        "https://api.eu.mailgun.net/",
        "http://127.0.0.1:8025",
        "http://127.8.9.10",
        "http://[::1]:9000",
        "http://localhost:8025",
        "http://LOCALHOST",
    ],
)
def test_https_or_a_loopback_host_is_accepted(tmp_path, url):
    settings = load_settings({VARIABLE: url}, instance_path=tmp_path)
    assert settings.http_provider_url == url.rstrip("/")


@pytest.mark.parametrize(
    "url",
    [
        "http://any-host",
        "http://api.resend.com",
        "http://10.0.0.5:8025",
        "http://[::2]",
        "http://localhost.example.com",
        "http://127.0.0.1.example.com",
        "ftp://api.resend.com",
    ],
)
def test_plain_http_to_another_host_stops_start_up_naming_the_setting(tmp_path, url):
    with pytest.raises(ConfigError, match=VARIABLE) as refused:
        load_settings({VARIABLE: url}, instance_path=tmp_path)
    assert "\n" not in str(refused.value)
    assert "https://" in str(refused.value)
