"""CONSOLE_PROVIDER with CONSOLE_TRANSPORT=http builds that provider's native transport."""

from __future__ import annotations

import sys

import pytest

from console.config import ConfigError, load_settings
from console.transports.factory import make_transport
from console.transports.http import HttpTransport
from console.transports.mailgun import MAILGUN_EU_URL, MailgunApi
from console.transports.postmark import PostmarkApi
from console.transports.sendgrid import SendGridApi
from console.transports.ses import EXTRA, SesApi

KEY = "key-0123456789abcdef"


@pytest.fixture
def base(tmp_path):
    return {
        "CONSOLE_DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
        "CONSOLE_SECRET_KEY": "k" * 32,
        "CONSOLE_TRANSPORT": "http",
    }


@pytest.fixture
def aws(monkeypatch, tmp_path):
    """AWS SDK settings from the environment only: no files, no instance metadata."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_REGION": "eu-west-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)


def transport(env, tmp_path):
    return make_transport(load_settings(env, instance_path=tmp_path))


@pytest.mark.parametrize(
    "provider, api_type, endpoint",
    [
        ("postmark", PostmarkApi, "https://api.postmarkapp.com/email"),
        ("mailgun", MailgunApi, "https://api.mailgun.net/v3/mg.example.com/messages"),
        ("sendgrid", SendGridApi, "https://api.sendgrid.com/v3/mail/send"),
    ],
)
def test_each_provider_has_its_public_api_by_default(base, tmp_path, provider, api_type, endpoint):
    env = {
        **base,
        "CONSOLE_PROVIDER": provider,
        "CONSOLE_HTTP_PROVIDER_KEY": KEY,
        "CONSOLE_MAILGUN_DOMAIN": "mg.example.com",
    }
    built = transport(env, tmp_path)
    assert isinstance(built.api, api_type) and built.api.endpoint == endpoint
    assert built.protocol == f"http/{provider}" and not built.honours_idempotency_keys
    assert KEY not in repr(built)


def test_resend_stays_the_default_and_honours_keys(base, tmp_path):
    built = transport({**base, "CONSOLE_HTTP_PROVIDER_KEY": KEY}, tmp_path)
    assert isinstance(built, HttpTransport) and built.endpoint == "https://api.resend.com/emails"
    assert built.honours_idempotency_keys and built.protocol == "http"
    named = transport(
        {**base, "CONSOLE_HTTP_PROVIDER_KEY": KEY, "CONSOLE_PROVIDER": "resend"}, tmp_path
    )
    assert isinstance(named, HttpTransport)


def test_a_mailgun_domain_in_the_eu_region(base, tmp_path):
    env = {
        **base,
        "CONSOLE_PROVIDER": "mailgun",
        "CONSOLE_HTTP_PROVIDER_KEY": KEY,
        "CONSOLE_MAILGUN_DOMAIN": "mg.example.eu",
        "CONSOLE_HTTP_PROVIDER_URL": MAILGUN_EU_URL,
    }
    assert transport(env, tmp_path).api.endpoint == (
        "https://api.eu.mailgun.net/v3/mg.example.eu/messages"
    )


def test_mailgun_needs_its_domain(base, tmp_path):
    env = {**base, "CONSOLE_PROVIDER": "mailgun", "CONSOLE_HTTP_PROVIDER_KEY": KEY}
    with pytest.raises(ConfigError, match="CONSOLE_MAILGUN_DOMAIN"):
        load_settings(env, instance_path=tmp_path)


def test_postmark_message_stream_is_a_setting(base, tmp_path):
    env = {
        **base,
        "CONSOLE_PROVIDER": "postmark",
        "CONSOLE_HTTP_PROVIDER_KEY": KEY,
        "CONSOLE_POSTMARK_MESSAGE_STREAM": "transactional-eu",
    }
    assert transport(env, tmp_path).api.message_stream == "transactional-eu"


def test_ses_uses_the_sdk_credentials_and_region(base, tmp_path, aws):
    env = {**base, "CONSOLE_PROVIDER": "ses", "CONSOLE_SES_CONFIGURATION_SET": "outbox-events"}
    built = transport(env, tmp_path)  # no CONSOLE_HTTP_PROVIDER_KEY needed
    assert isinstance(built.api, SesApi)
    assert built.api.endpoint == "https://email.eu-west-1.amazonaws.com/v2/email/outbound-emails"
    assert built.api.configuration_set == "outbox-events" and built.api.region == "eu-west-1"
    assert "secret" not in repr(built)


def test_ses_without_a_region_says_so(base, tmp_path, aws, monkeypatch):
    monkeypatch.delenv("AWS_REGION")
    with pytest.raises(ConfigError, match="AWS_REGION"):
        transport({**base, "CONSOLE_PROVIDER": "ses"}, tmp_path)


def test_ses_without_botocore_names_the_extra(base, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "botocore", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'outbox-console\[ses\]'"):
        load_settings({**base, "CONSOLE_PROVIDER": "ses"}, instance_path=tmp_path)
    with pytest.raises(ConfigError, match="botocore"):
        SesApi("https://email.eu-west-1.amazonaws.com", "eu-west-1", credentials=None)
    assert EXTRA == "outbox-console[ses]"
