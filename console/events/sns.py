"""Amazon SNS message verification, exactly as AWS documents it.

A message is trusted only when its signing certificate comes from a URL of the
one shape SNS uses,
``https://sns.<region>.amazonaws.com[.cn]/SimpleNotificationService-<hex>.pem``
(a region of three or more letters, digits and hyphens, never an S3 host; no
port, user info, query or fragment) — checked before any network call — and
the RSA signature over the canonical string of its type verifies with that certificate's key
(SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA). Its TopicArn must be on
the configured allow-list. Network access goes through injectable fetchers so
the checks can be exercised without AWS.

Forged messages cannot multiply certificate fetches, nor spend a budget a genuine
message needs: only a message of an allowed topic naming a URL of that shape is
fetched for, each URL is fetched by one request at a time, and a failed fetch is
remembered for FAILED_FETCH_TTL_SECONDS, so a URL costs at most one fetch in that
time. There is no shared count of new URLs for made-up ones to use up: the
certificate of a genuine message after a key rotation is always fetched. A
verified message whose ``Timestamp`` is more than MAX_MESSAGE_AGE_SECONDS old,
or more than FUTURE_SKEW_SECONDS ahead, is refused (403).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from console.events import EventRejected, load_json, refuse_unstorable_text

NOTIFICATION = "Notification"
SUBSCRIPTION_CONFIRMATION = "SubscriptionConfirmation"
UNSUBSCRIBE_CONFIRMATION = "UnsubscribeConfirmation"

# The fields of the canonical string, in the order AWS signs them.
_SIGNED_FIELDS = {
    NOTIFICATION: ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    SUBSCRIPTION_CONFIRMATION: (
        "Message",
        "MessageId",
        "SubscribeURL",
        "Timestamp",
        "Token",
        "TopicArn",
        "Type",
    ),
}
_SIGNED_FIELDS[UNSUBSCRIBE_CONFIRMATION] = _SIGNED_FIELDS[SUBSCRIPTION_CONFIRMATION]
_OPTIONAL_FIELDS = frozenset({"Subject"})
_SIGNATURE_HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}
# A region of at least three characters; "s3..." would be an S3 bucket named "sns".
_SNS_HOST = r"sns\.(?!s3)[a-z0-9-]{3,}\.amazonaws\.com(?:\.cn)?"
_SNS_HOST_NAME = re.compile(_SNS_HOST, re.IGNORECASE)
_CERTIFICATE_URL = re.compile(
    f"https://{_SNS_HOST}/SimpleNotificationService-[0-9a-f]+\\.pem", re.IGNORECASE
)
_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]+")  # urlsplit drops tabs and newlines unseen
MAX_CERTIFICATE_BYTES = 64 * 1024
FETCH_TIMEOUT_SECONDS = 10.0
FAILED_FETCH_TTL_SECONDS = 300.0
MAX_MESSAGE_AGE_SECONDS = 3600.0
FUTURE_SKEW_SECONDS = 60.0  # how far ahead of ours SNS's clock may be

CertificateFetcher = Callable[[str], bytes]  # URL -> PEM bytes
UrlVisitor = Callable[[str], None]  # GET the URL; raise when it fails


class SnsRejected(EventRejected):
    """The request is not a verified SNS message from an allowed topic."""


def is_sns_url(url: str, *, pem: bool) -> bool:
    """Whether `url` is https on an SNS host; with `pem`, exactly a signing certificate's URL."""
    if pem:
        return _CERTIFICATE_URL.fullmatch(url) is not None
    if not _VISIBLE_ASCII.fullmatch(url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = parts.hostname or ""
    return (
        parts.scheme == "https"
        and parts.netloc.lower() == host  # no user info, no port
        and _SNS_HOST_NAME.fullmatch(host) is not None
    )


def parse_message(body: bytes) -> dict[str, Any]:
    """Decode an SNS request body into its JSON object; SnsRejected when it is not one."""
    try:
        message = load_json(body)
    except (UnicodeDecodeError, ValueError):
        raise SnsRejected("the body is not JSON") from None
    if not isinstance(message, dict):
        raise SnsRejected("the body is not a JSON object")
    refuse_unstorable_text(message)
    return message


def canonical_string(message: Mapping[str, Any]) -> bytes:
    """Build the string AWS signed for this message type: "Key\\nValue\\n" per field."""
    fields = _SIGNED_FIELDS.get(message.get("Type"))  # type: ignore[arg-type]
    if fields is None:
        raise SnsRejected(f"unknown SNS message type {message.get('Type')!r}")
    lines: list[str] = []
    for field in fields:
        value = message.get(field)
        if value is None and field in _OPTIONAL_FIELDS:
            continue
        if not isinstance(value, str):
            raise SnsRejected(f"SNS message field {field} is missing or not a string")
        lines.append(f"{field}\n{value}\n")
    return "".join(lines).encode()


def fetch_over_https(url: str) -> bytes:
    """Download a signing certificate (the URL was already checked)."""
    response = httpx.get(url, timeout=FETCH_TIMEOUT_SECONDS, follow_redirects=False)
    response.raise_for_status()
    if len(response.content) > MAX_CERTIFICATE_BYTES:
        raise ValueError(f"certificate at {url} is larger than {MAX_CERTIFICATE_BYTES} bytes")
    return response.content


def visit_over_https(url: str) -> None:
    """GET a SubscribeURL (the URL was already checked) and fail on a non-2xx answer."""
    response = httpx.get(url, timeout=FETCH_TIMEOUT_SECONDS, follow_redirects=False)
    response.raise_for_status()


class CertificateCache:
    """Signing certificates by URL, fetched once through `fetch` and kept in memory.

    Failures are kept too, for FAILED_FETCH_TTL_SECONDS, so each URL is fetched at
    most once in that time; concurrent requests for one URL share one fetch.
    """

    def __init__(
        self,
        fetch: CertificateFetcher = fetch_over_https,
        max_entries: int = 32,
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._fetch = fetch
        self._max_entries = max_entries
        self._clock = clock
        self._certificates: OrderedDict[str, x509.Certificate] = OrderedDict()
        self._failures: OrderedDict[str, tuple[float, SnsRejected]] = OrderedDict()
        self._in_flight: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def certificate(self, url: str) -> x509.Certificate:
        """Return the certificate at `url`; SnsRejected when the URL or the PEM is bad."""
        if not is_sns_url(url, pem=True):
            raise SnsRejected(f"SigningCertURL {url!r} is not an SNS signing certificate URL")
        while True:
            with self._lock:
                known = self._known(url)
                if known is not None:
                    return known
                waiting = self._in_flight.get(url)
                if waiting is None:
                    self._in_flight[url] = threading.Event()
                    break
            waiting.wait(FETCH_TIMEOUT_SECONDS + 1)  # then look again: cached, failed, or ours
        try:
            certificate = self._load(url)
        except SnsRejected as refusal:
            with self._lock:
                self._failures[url] = (self._clock() + FAILED_FETCH_TTL_SECONDS, refusal)
                while len(self._failures) > self._max_entries * 8:
                    self._failures.popitem(last=False)
            raise
        else:
            with self._lock:
                self._certificates[url] = certificate
                while len(self._certificates) > self._max_entries:
                    self._certificates.popitem(last=False)
            return certificate
        finally:
            with self._lock:
                self._in_flight.pop(url).set()

    def _known(self, url: str) -> x509.Certificate | None:
        """The cached certificate, or raise the remembered failure (with the lock held)."""
        if url in self._certificates:
            self._certificates.move_to_end(url)
            return self._certificates[url]
        failure = self._failures.get(url)
        if failure is not None:
            if failure[0] > self._clock():
                raise failure[1]
            del self._failures[url]
        return None

    def _load(self, url: str) -> x509.Certificate:
        try:
            return x509.load_pem_x509_certificate(self._fetch(url))
        except ValueError as exc:
            raise SnsRejected(f"the signing certificate is not a PEM certificate: {exc}") from None
        except httpx.HTTPError as exc:
            raise SnsRejected(f"the signing certificate could not be fetched: {exc}", 502) from None


class SnsVerifier:
    """Check SNS messages against the topic allow-list and their signatures."""

    def __init__(
        self,
        topic_arns: Iterable[str],
        certificates: CertificateCache,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.topic_arns = frozenset(topic_arns)
        self.certificates = certificates
        self._clock = clock

    def verify(self, message: Mapping[str, Any]) -> None:
        """Return quietly for a genuine message of an allowed topic; raise SnsRejected."""
        version = message.get("SignatureVersion")
        if version not in _SIGNATURE_HASHES:
            raise SnsRejected(f"unsupported SignatureVersion {version!r}")
        signed = canonical_string(message)
        certificate_url = message.get("SigningCertURL")
        if not isinstance(certificate_url, str) or not is_sns_url(certificate_url, pem=True):
            raise SnsRejected("SigningCertURL is not an SNS signing certificate URL")
        if message.get("TopicArn") not in self.topic_arns:
            raise SnsRejected(f"topic {message.get('TopicArn')!r} is not allowed", 403)
        if message["Type"] != NOTIFICATION and not is_sns_url(message["SubscribeURL"], pem=False):
            raise SnsRejected("SubscribeURL is not an https URL on an SNS host")
        signature = _decode_signature(message.get("Signature"))
        certificate = self.certificates.certificate(certificate_url)
        self._check_validity(certificate)
        _check_signature(certificate, signature, signed, _SIGNATURE_HASHES[version]())
        self._check_freshness(message.get("Timestamp"))

    def _check_freshness(self, timestamp: Any) -> None:
        """Refuse a replay: a message more than an hour old, or from the future (403)."""
        try:
            sent = dt.datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
        except ValueError:
            raise SnsRejected("the message Timestamp is not a time", 403) from None
        if sent.tzinfo is None:
            raise SnsRejected("the message Timestamp has no time zone", 403)
        age = (self._clock() - sent).total_seconds()
        if age > MAX_MESSAGE_AGE_SECONDS:
            raise SnsRejected("the message is more than an hour old", 403)
        if age < -FUTURE_SKEW_SECONDS:
            raise SnsRejected("the message Timestamp is in the future", 403)

    def _check_validity(self, certificate: x509.Certificate) -> None:
        now = self._clock()
        if not certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc:
            raise SnsRejected("the signing certificate is not valid at this time", 403)


def _decode_signature(raw: Any) -> bytes:
    if not isinstance(raw, str):
        raise SnsRejected("Signature is missing")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise SnsRejected("Signature is not base64") from None


def _check_signature(
    certificate: x509.Certificate, signature: bytes, signed: bytes, algorithm: hashes.HashAlgorithm
) -> None:
    public_key = certificate.public_key()
    if not isinstance(public_key, rsa.RSAPublicKey):
        raise SnsRejected("the signing certificate does not hold an RSA key", 403)
    try:
        public_key.verify(signature, signed, padding.PKCS1v15(), algorithm)
    except InvalidSignature:
        raise SnsRejected("the SNS signature does not verify", 403) from None


def confirm_subscription(message: Mapping[str, Any], visit: UrlVisitor = visit_over_https) -> str:
    """Confirm the subscription of a verified SubscriptionConfirmation; return the topic."""
    url = message["SubscribeURL"]
    if not is_sns_url(url, pem=False):
        raise SnsRejected("SubscribeURL is not an https URL on an SNS host")
    try:
        visit(url)
    except (httpx.HTTPError, OSError) as exc:
        raise SnsRejected(f"confirming the subscription failed: {exc}", 502) from None
    return message["TopicArn"]
