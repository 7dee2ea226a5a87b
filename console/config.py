"""CONSOLE_* settings, read from the environment and validated at start-up."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from console.core import setting_values as values
from console.core.setting_values import ConfigError
from console.events.keys import ec_public_key, provider_name, svix_secret
from console.paths import default_secret, secret_key_setting


def _ehlo_name(name: str, raw: str) -> str:
    from console.transports.smtp_endpoint import valid_ehlo_name

    if not valid_ehlo_name(raw.strip()):
        raise ConfigError(f"{name} must be a domain name or an address literal, got {raw!r}")
    return raw.strip()


def _classify_overrides(name: str, raw: str) -> str:
    from console.core.classify import parse_overrides

    try:
        parse_overrides(raw)
    except ValueError as error:
        raise ConfigError(f"{name}: {error}") from None
    return raw.strip()


# the console's own forms are a few KiB; a smaller limit would refuse them
MIN_REQUEST_BYTES = 16 * 1024


def _request_bytes(name: str, raw: str) -> int:
    value = values.positive_int(name, raw.strip())
    if value < MIN_REQUEST_BYTES:
        raise ConfigError(f"{name} must be at least {MIN_REQUEST_BYTES} bytes, got {value}")
    return value


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of the product, with the environment variable it comes from."""

    database_url: str
    secret_key: str
    smtp_url: str = "smtp://127.0.0.1:1025"
    smtp_connections: int = 4
    smtp_timeout_seconds: float = 30.0
    smtp_ehlo_name: str | None = None  # None: the FQDN, else an address literal
    smtp_discard_ehlo_keywords: frozenset[str] = frozenset()  # offered, but not to be used
    poll_seconds: float = 1.0
    batch_size: int | None = None  # None: BATCH_PER_CONNECTION a connection
    lease_seconds: float = 300.0
    retry_base_seconds: float = 30.0
    retry_cap_seconds: float = 3600.0
    retry_floor_seconds: float = 5.0
    max_attempts: int = 8
    max_age_seconds: float = 86400.0
    message_id_domain: str = "outbox.localhost"
    mail_from: str = "Outbox Console <noreply@outbox.localhost>"
    max_params_bytes: int = 65536
    eligibility_module: str | None = None
    cookie_secure: bool = False
    classify_overrides: str | None = None
    transport: str = "smtp"
    http_provider_url: str | None = None  # None: the provider's public API
    http_provider_key: str | None = None
    http_idempotency_window_seconds: float = 86400.0
    mailgun_domain: str | None = None  # the Mailgun sending domain (CONSOLE_TRANSPORT=http)
    postmark_message_stream: str = "outbound"
    ses_configuration_set: str | None = None
    reconcile_seconds: float = 300.0  # how often ambiguous sends are looked up at the provider
    reconcile_after_seconds: float = 1800.0  # "not found" this long after the attempt counts
    sns_topic_arns: tuple[str, ...] = ()
    webhook_secret: str | None = None
    webhook_tolerance_seconds: float = 300.0
    resend_webhook_secret: str | None = None  # native provider webhooks (docs/provider-events.md)
    postmark_webhook_user: str | None = None
    postmark_webhook_password: str | None = None
    mailgun_signing_key: str | None = None
    mailgun_parent_signing_key: str | None = None  # a subaccount's events, signed by the parent
    mailgun_replay_seconds: float = 28800.0  # Mailgun retries for 8 hours with the same token
    sendgrid_public_key: str | None = None
    provider: str | None = None  # behind the relay or HTTP transport; None: a plain SMTP relay
    # operations: metrics, health, retention, alerts, breaker, per-domain back-off
    metrics_cache_seconds: float = 10.0
    metrics_token: str | None = None  # None: /metrics answers anyone, as the network allows
    health_max_tick_age_seconds: float = 60.0
    retention_days: float = 30.0
    retention_batch_size: int = 1000
    retention_delete_days: float = 180.0  # finished mail deleted after this; 0: never
    alert_webhook_url: str | None = None
    alert_email: str | None = None
    alert_interval_seconds: float = 30.0
    alert_webhook_timeout_seconds: float = 5.0
    alert_ambiguous_after_seconds: float = 900.0
    alert_dead_window_seconds: float = 3600.0
    alert_auth_window_seconds: float = 900.0
    alert_pending_age_critical_seconds: float = 120.0
    alert_pending_age_bulk_seconds: float = 3600.0
    breaker_window_attempts: int = 50
    breaker_failure_rate: float = 0.5
    breaker_open_seconds: float = 30.0
    domain_backoff_run: int = 3
    domain_backoff_seconds: float = 60.0
    suppress_refused_mailboxes: bool = True  # a synchronous 550 5.1.1 suppresses the address
    send_rate: float | None = None  # messages a second, shared by every worker; None: unlimited
    send_burst: float | None = None  # None: one second's worth
    send_daily_quota: int | None = None  # messages a rolling 24 hours; None: unlimited
    send_daily_critical_reserve: int | None = None  # None: 5 % of the quota
    worker_metrics_port: int | None = None  # `console worker` serves /metrics here when set
    worker_metrics_host: str = "127.0.0.1"
    email_templates_dir: Path | None = None  # the application's own templates, beside ours
    log_level: str = "INFO"
    trusted_proxies: int = 0  # reverse-proxy hops whose X-Forwarded-* headers are believed
    session_idle_minutes: float = 60.0
    session_max_hours: float = 12.0
    db_lock_timeout_seconds: float = 5.0  # how long a console request waits for a lock
    max_request_bytes: int = 1024 * 1024  # a larger request body is refused (413) unread
    test_crash_at: str | None = None  # test suite only: see console.worker.sending


# variable name -> (field, parser)
_PARSERS = {
    "CONSOLE_DATABASE_URL": ("database_url", values.database_url),
    "CONSOLE_SECRET_KEY": ("secret_key", secret_key_setting),
    "CONSOLE_SMTP_URL": ("smtp_url", values.smtp_url),
    "CONSOLE_SMTP_CONNECTIONS": ("smtp_connections", values.positive_int),
    "CONSOLE_SMTP_TIMEOUT_SECONDS": ("smtp_timeout_seconds", values.positive_float),
    "CONSOLE_SMTP_EHLO_NAME": ("smtp_ehlo_name", _ehlo_name),
    "CONSOLE_SMTP_DISCARD_EHLO_KEYWORDS": ("smtp_discard_ehlo_keywords", values.ehlo_keywords),
    "CONSOLE_POLL_SECONDS": ("poll_seconds", values.positive_float),
    "CONSOLE_BATCH_SIZE": ("batch_size", values.positive_int),
    "CONSOLE_LEASE_SECONDS": ("lease_seconds", values.positive_float),
    "CONSOLE_RETRY_BASE_SECONDS": ("retry_base_seconds", values.positive_float),
    "CONSOLE_RETRY_CAP_SECONDS": ("retry_cap_seconds", values.positive_float),
    "CONSOLE_RETRY_FLOOR_SECONDS": ("retry_floor_seconds", values.non_negative_float),
    "CONSOLE_MAX_ATTEMPTS": ("max_attempts", values.positive_int),
    "CONSOLE_MAX_AGE_SECONDS": ("max_age_seconds", values.positive_float),
    "CONSOLE_MESSAGE_ID_DOMAIN": ("message_id_domain", values.domain),
    "CONSOLE_MAIL_FROM": ("mail_from", values.mailbox),
    "CONSOLE_MAX_PARAMS_BYTES": ("max_params_bytes", values.positive_int),
    "CONSOLE_ELIGIBILITY_MODULE": ("eligibility_module", values.string),
    "CONSOLE_COOKIE_SECURE": ("cookie_secure", values.boolean),
    "CONSOLE_CLASSIFY_OVERRIDES": ("classify_overrides", _classify_overrides),
    "CONSOLE_TRANSPORT": ("transport", values.transport),
    "CONSOLE_HTTP_PROVIDER_URL": ("http_provider_url", values.secure_http_url),
    "CONSOLE_HTTP_PROVIDER_KEY": ("http_provider_key", values.string),
    "CONSOLE_HTTP_IDEMPOTENCY_WINDOW_SECONDS": (
        "http_idempotency_window_seconds",
        values.positive_float,
    ),
    "CONSOLE_MAILGUN_DOMAIN": ("mailgun_domain", values.domain),
    "CONSOLE_POSTMARK_MESSAGE_STREAM": ("postmark_message_stream", values.string),
    "CONSOLE_SES_CONFIGURATION_SET": ("ses_configuration_set", values.string),
    "CONSOLE_RECONCILE_SECONDS": ("reconcile_seconds", values.positive_float),
    "CONSOLE_RECONCILE_AFTER_SECONDS": ("reconcile_after_seconds", values.positive_float),
    "CONSOLE_SNS_TOPIC_ARNS": ("sns_topic_arns", values.comma_list),
    "CONSOLE_WEBHOOK_SECRET": ("webhook_secret", values.string),
    "CONSOLE_WEBHOOK_TOLERANCE_SECONDS": ("webhook_tolerance_seconds", values.positive_float),
    "CONSOLE_RESEND_WEBHOOK_SECRET": ("resend_webhook_secret", svix_secret),
    "CONSOLE_POSTMARK_WEBHOOK_USER": ("postmark_webhook_user", values.string),
    "CONSOLE_POSTMARK_WEBHOOK_PASSWORD": ("postmark_webhook_password", values.string),
    "CONSOLE_MAILGUN_SIGNING_KEY": ("mailgun_signing_key", values.string),
    "CONSOLE_MAILGUN_PARENT_SIGNING_KEY": ("mailgun_parent_signing_key", values.string),
    "CONSOLE_MAILGUN_REPLAY_SECONDS": ("mailgun_replay_seconds", values.positive_float),
    "CONSOLE_SENDGRID_PUBLIC_KEY": ("sendgrid_public_key", ec_public_key),
    "CONSOLE_PROVIDER": ("provider", provider_name),
    "CONSOLE_METRICS_CACHE_SECONDS": ("metrics_cache_seconds", values.non_negative_float),
    "CONSOLE_METRICS_TOKEN": ("metrics_token", values.string),
    "CONSOLE_HEALTH_MAX_TICK_AGE_SECONDS": ("health_max_tick_age_seconds", values.positive_float),
    "CONSOLE_RETENTION_DAYS": ("retention_days", values.positive_float),
    "CONSOLE_RETENTION_BATCH_SIZE": ("retention_batch_size", values.positive_int),
    "CONSOLE_RETENTION_DELETE_DAYS": ("retention_delete_days", values.non_negative_float),
    "CONSOLE_ALERT_WEBHOOK_URL": ("alert_webhook_url", values.http_url),
    "CONSOLE_ALERT_EMAIL": ("alert_email", values.mailbox),
    "CONSOLE_ALERT_INTERVAL_SECONDS": ("alert_interval_seconds", values.positive_float),
    "CONSOLE_ALERT_WEBHOOK_TIMEOUT_SECONDS": (
        "alert_webhook_timeout_seconds",
        values.positive_float,
    ),
    "CONSOLE_ALERT_AMBIGUOUS_AFTER_SECONDS": (
        "alert_ambiguous_after_seconds",
        values.positive_float,
    ),
    "CONSOLE_ALERT_DEAD_WINDOW_SECONDS": ("alert_dead_window_seconds", values.positive_float),
    "CONSOLE_ALERT_AUTH_WINDOW_SECONDS": ("alert_auth_window_seconds", values.positive_float),
    "CONSOLE_ALERT_PENDING_AGE_CRITICAL_SECONDS": (
        "alert_pending_age_critical_seconds",
        values.positive_float,
    ),
    "CONSOLE_ALERT_PENDING_AGE_BULK_SECONDS": (
        "alert_pending_age_bulk_seconds",
        values.positive_float,
    ),
    "CONSOLE_BREAKER_WINDOW_ATTEMPTS": ("breaker_window_attempts", values.positive_int),
    "CONSOLE_BREAKER_FAILURE_RATE": ("breaker_failure_rate", values.fraction),
    "CONSOLE_BREAKER_OPEN_SECONDS": ("breaker_open_seconds", values.positive_float),
    "CONSOLE_DOMAIN_BACKOFF_RUN": ("domain_backoff_run", values.positive_int),
    "CONSOLE_DOMAIN_BACKOFF_SECONDS": ("domain_backoff_seconds", values.positive_float),
    "CONSOLE_SUPPRESS_REFUSED_MAILBOXES": ("suppress_refused_mailboxes", values.boolean),
    "CONSOLE_SEND_RATE": ("send_rate", values.positive_float),
    "CONSOLE_SEND_BURST": ("send_burst", values.positive_float),
    "CONSOLE_SEND_DAILY_QUOTA": ("send_daily_quota", values.positive_int),
    "CONSOLE_SEND_DAILY_CRITICAL_RESERVE": ("send_daily_critical_reserve", values.hop_count),
    "CONSOLE_WORKER_METRICS_PORT": ("worker_metrics_port", values.positive_int),
    "CONSOLE_WORKER_METRICS_HOST": ("worker_metrics_host", values.string),
    "CONSOLE_EMAIL_TEMPLATES": ("email_templates_dir", values.directory),
    "CONSOLE_LOG_LEVEL": ("log_level", values.log_level),
    "CONSOLE_TRUSTED_PROXIES": ("trusted_proxies", values.hop_count),
    "CONSOLE_SESSION_IDLE_MINUTES": ("session_idle_minutes", values.positive_float),
    "CONSOLE_SESSION_MAX_HOURS": ("session_max_hours", values.positive_float),
    "CONSOLE_DATABASE_LOCK_TIMEOUT_SECONDS": ("db_lock_timeout_seconds", values.positive_float),
    "CONSOLE_MAX_REQUEST_BYTES": ("max_request_bytes", _request_bytes),
    "CONSOLE_TEST_CRASH_AT": ("test_crash_at", values.string),
}


def _read_variables(
    environ: Mapping[str, str] | None, overrides: Mapping[str, str] | None
) -> dict[str, object]:
    """Parse every CONSOLE_* variable that is set: the one place that reads the environment."""
    environ = os.environ if environ is None else environ
    merged = {**environ, **(overrides or {})}
    values: dict[str, object] = {}
    for variable, (field, parse) in _PARSERS.items():
        raw = merged.get(variable)
        if raw is not None and (raw.strip() or variable == "CONSOLE_COOKIE_SECURE"):
            values[field] = parse(variable, raw)
    return values


def _checked(settings: Settings) -> Settings:
    """Refuse combinations of settings that are valid one by one but not together."""
    if settings.retry_floor_seconds > settings.retry_cap_seconds:
        raise ConfigError("CONSOLE_RETRY_FLOOR_SECONDS must not exceed CONSOLE_RETRY_CAP_SECONDS")
    if settings.transport == "http":
        _check_http_provider(settings)
    return settings


def _check_http_provider(settings: Settings) -> None:
    """What the HTTP transport of CONSOLE_PROVIDER needs besides the key."""
    from console.transports.ses import botocore_missing

    if settings.provider == "ses":  # signed with the AWS SDK's own credentials
        missing = botocore_missing()
        if missing:
            raise ConfigError(missing)
    elif not settings.http_provider_key:
        raise ConfigError("CONSOLE_TRANSPORT=http needs CONSOLE_HTTP_PROVIDER_KEY")
    if settings.provider == "mailgun" and not settings.mailgun_domain:
        raise ConfigError(
            "CONSOLE_PROVIDER=mailgun over CONSOLE_TRANSPORT=http needs CONSOLE_MAILGUN_DOMAIN"
        )


def load_settings(
    environ: Mapping[str, str] | None = None,
    *,
    instance_path: str | os.PathLike[str],
    overrides: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from CONSOLE_* variables; raise ConfigError naming a bad one.

    `environ` defaults to the process environment; `overrides` (CONSOLE_* names)
    take precedence over it. Without CONSOLE_DATABASE_URL the database is a
    SQLite file in the instance folder, and without CONSOLE_SECRET_KEY a key is
    generated and kept there too.
    """
    values = _read_variables(environ, overrides)
    instance = Path(instance_path)
    uses_default_database = "database_url" not in values
    if uses_default_database:
        instance.mkdir(parents=True, exist_ok=True)
        values["database_url"] = f"sqlite:///{instance / 'console.db'}"
    if "secret_key" not in values:
        values["secret_key"] = default_secret(instance if uses_default_database else None)
    return _checked(Settings(**values))  # type: ignore[arg-type]


def load_enqueue_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings for an application that only enqueues, without the console.

    The same variables, parsed and checked the same way as load_settings, but
    nothing is created: the application's own session holds the database and no
    session is signed, so `database_url` and `secret_key` are empty unless set.
    """
    values = _read_variables(environ, None)
    values.setdefault("database_url", "")
    values.setdefault("secret_key", "")
    return _checked(Settings(**values))  # type: ignore[arg-type]
