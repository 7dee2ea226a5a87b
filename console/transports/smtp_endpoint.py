"""Where the SMTP transport connects and the name it gives in EHLO."""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import socket
from urllib.parse import parse_qs, unquote, urlsplit

_TRUE = ("1", "true", "yes", "on")
_LOCAL_NAMES = ("localhost", "localhost.localdomain")


@dataclasses.dataclass(frozen=True)
class SmtpEndpoint:
    """Where and how to connect, parsed from ``CONSOLE_SMTP_URL``."""

    host: str
    port: int
    use_tls: bool = False  # smtps://: TLS from the first byte
    start_tls: bool = False  # ?starttls=1: upgrade after the greeting
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_url(cls, url: str) -> SmtpEndpoint:
        """Parse ``smtp://user:pass@host:port``, ``smtps://...`` or ``...?starttls=1``."""
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError("an SMTP URL looks like smtp://user:pass@host:port")
        use_tls = parts.scheme == "smtps"
        query = parse_qs(parts.query)
        start_tls = query.get("starttls", ["0"])[-1].lower() in _TRUE
        if use_tls and start_tls:
            raise ValueError("smtps:// already uses TLS; drop ?starttls=1")
        return cls(
            host=parts.hostname,
            port=parts.port or (465 if use_tls else 25),
            use_tls=use_tls,
            start_tls=start_tls,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )

    @property
    def relay(self) -> str:
        """``host:port``, naming the relay in alerts and logs (never the credentials)."""
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:  # never show the password
        return (
            f"SmtpEndpoint({self.host}:{self.port}, tls={self.use_tls}, starttls={self.start_tls})"
        )


def address_literal(address: str) -> str:
    """RFC 5321 §4.1.3: ``[192.0.2.1]`` or ``[IPv6:2001:db8::1]``."""
    parsed = ipaddress.ip_address(address)
    return f"[{parsed}]" if parsed.version == 4 else f"[IPv6:{parsed}]"


def is_dotted_name(name: str) -> bool:
    """Whether `name` is a fully qualified domain name (not localhost, not a bare label)."""
    name = name.rstrip(".")
    return "." in name and name.lower() not in _LOCAL_NAMES


def default_ehlo_name(*, fqdn: str, local_address: str) -> str:
    """This host's FQDN when it is a dotted name, else the address literal of `local_address`."""
    if is_dotted_name(fqdn):
        return fqdn.rstrip(".")
    return address_literal(local_address)


def local_address_towards(host: str, port: int) -> str:
    """The local address this host would use to reach `host` (no packet is sent)."""
    with contextlib.suppress(OSError):
        for family, _, _, _, target in socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM):
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.connect(target)
                return probe.getsockname()[0]
    return "127.0.0.1"


def ehlo_name_for(endpoint: SmtpEndpoint, configured: str | None = None) -> str:
    """The configured name, else the FQDN, else the address literal towards the relay."""
    if configured:
        return configured
    return default_ehlo_name(
        fqdn=socket.getfqdn(), local_address=local_address_towards(endpoint.host, endpoint.port)
    )


def valid_ehlo_name(name: str) -> bool:
    """Whether `name` may follow EHLO: a domain name or an address literal."""
    if name.startswith("[") and name.endswith("]"):
        with contextlib.suppress(ValueError):
            address_literal(name[1:-1].removeprefix("IPv6:"))
            return True
        return False
    labels = name.rstrip(".").split(".")
    return all(
        0 < len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
        for label in labels
    )
