"""CONSOLE_TRUSTED_PROXIES: X-Forwarded-* believed for N hops, and only then."""

from __future__ import annotations

import pytest
from flask import request

from console.app import create_app
from console.config import ConfigError, load_settings
from console.web.extensions import db
from tests.conftest import TEST_SECRET_KEY

FORWARDED = {
    "X-Forwarded-For": "203.0.113.66",
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Host": "console.example.com",
}


@pytest.fixture
def make_app(sqlite_url):
    apps = []

    def make(**settings: str):
        app = create_app(
            {
                "CONSOLE_DATABASE_URL": sqlite_url,
                "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
                "TESTING": True,
                **settings,
            }
        )

        @app.get("/_seen")
        def seen():
            return {"addr": request.remote_addr, "scheme": request.scheme, "host": request.host}

        apps.append(app)
        return app

    yield make
    for app in apps:
        with app.app_context():
            db.engine.dispose()


def test_without_trusted_proxies_forwarded_headers_are_ignored(make_app):
    client = make_app().test_client()
    seen = client.get("/_seen", headers=FORWARDED, environ_base={"REMOTE_ADDR": "10.0.0.2"}).json
    assert seen == {"addr": "10.0.0.2", "scheme": "http", "host": "localhost"}
    page = client.get("/login", headers=FORWARDED)
    assert "Secure" not in page.headers["Set-Cookie"]
    assert "Strict-Transport-Security" not in page.headers


def test_one_trusted_proxy_gives_the_client_address_scheme_and_host(make_app):
    client = make_app(CONSOLE_TRUSTED_PROXIES="1").test_client()
    seen = client.get("/_seen", headers=FORWARDED, environ_base={"REMOTE_ADDR": "10.0.0.2"}).json
    assert seen == {"addr": "203.0.113.66", "scheme": "https", "host": "console.example.com"}


def test_only_the_trusted_hops_are_believed(make_app):
    client = make_app(CONSOLE_TRUSTED_PROXIES="1").test_client()
    spoofed = {"X-Forwarded-For": "198.51.100.1, 203.0.113.66"}  # the client wrote the first
    assert client.get("/_seen", headers=spoofed).json["addr"] == "203.0.113.66"
    two = make_app(CONSOLE_TRUSTED_PROXIES="2").test_client()
    assert two.get("/_seen", headers=spoofed).json["addr"] == "198.51.100.1"


def test_https_at_the_proxy_makes_the_cookie_secure_and_sends_hsts(make_app):
    client = make_app(CONSOLE_TRUSTED_PROXIES="1").test_client()
    page = client.get("/login", headers=FORWARDED)
    assert "Secure" in page.headers["Set-Cookie"]
    assert page.headers["Strict-Transport-Security"].startswith("max-age=")
    plain = make_app(CONSOLE_TRUSTED_PROXIES="1").test_client()
    page = plain.get("/login", headers={"X-Forwarded-Proto": "http"})
    assert "Secure" not in page.headers["Set-Cookie"]
    assert "Strict-Transport-Security" not in page.headers


@pytest.mark.parametrize("raw", ["-1", "one", "1.5"])
def test_a_bad_hop_count_is_refused(tmp_path, raw):
    with pytest.raises(ConfigError, match="CONSOLE_TRUSTED_PROXIES"):
        load_settings({"CONSOLE_TRUSTED_PROXIES": raw}, instance_path=tmp_path)
    assert load_settings({}, instance_path=tmp_path).trusted_proxies == 0
