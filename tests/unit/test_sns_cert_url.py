"""Which SigningCertURL and SubscribeURL values the SNS check lets through to the network."""

from __future__ import annotations

import pytest

from console.events import sns

PEM = "/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem"

CERTIFICATE_URLS = [
    ("real us-east-1", f"https://sns.us-east-1.amazonaws.com{PEM}", True),
    ("china", f"https://sns.cn-north-1.amazonaws.com.cn{PEM}", True),
    ("govcloud", f"https://sns.us-gov-west-1.amazonaws.com{PEM}", True),
    ("short hex", "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0a.pem", True),
    ("three-character region", f"https://sns.abc.amazonaws.com{PEM}", True),
    ("http", f"http://sns.us-east-1.amazonaws.com{PEM}", False),
    ("no scheme", f"//sns.us-east-1.amazonaws.com{PEM}", False),
    ("s3 bucket host", f"https://sns.s3.amazonaws.com{PEM}", False),
    ("s3 legacy regional host", f"https://sns.s3-eu-west-1.amazonaws.com{PEM}", False),
    ("s3 external host", f"https://sns.s3-external-1.amazonaws.com{PEM}", False),
    ("s3 dotted regional host", f"https://sns.s3.eu-west-1.amazonaws.com{PEM}", False),
    ("suffix host", f"https://sns.us-east-1.amazonaws.com.evil.com{PEM}", False),
    ("cn suffix host", f"https://sns.cn-north-1.amazonaws.com.cn.evil.com{PEM}", False),
    ("region too short", f"https://sns.ab.amazonaws.com{PEM}", False),
    ("no region", f"https://sns.amazonaws.com{PEM}", False),
    ("dotted region", f"https://sns.a.b.c.amazonaws.com{PEM}", False),
    ("underscore in region", f"https://sns.us_east_1.amazonaws.com{PEM}", False),
    ("trailing dot host", f"https://sns.us-east-1.amazonaws.com.{PEM}", False),
    ("other service", f"https://sqs.us-east-1.amazonaws.com{PEM}", False),
    ("port", f"https://sns.us-east-1.amazonaws.com:443{PEM}", False),
    ("user info", f"https://x@sns.us-east-1.amazonaws.com{PEM}", False),
    ("query", f"https://sns.us-east-1.amazonaws.com{PEM}?x=1", False),
    ("fragment", f"https://sns.us-east-1.amazonaws.com{PEM}#x", False),
    ("wrong path", "https://sns.us-east-1.amazonaws.com/evil.pem", False),
    ("folder", f"https://sns.us-east-1.amazonaws.com/certs{PEM}", False),
    ("not hex", "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-xyz.pem", False),
    ("no hex", "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-.pem", False),
    ("not pem", "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0a.crt", False),
    ("two extensions", f"https://sns.us-east-1.amazonaws.com{PEM}.pem", False),
    (
        "encoded dot",
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0a%2Epem",
        False,
    ),
    ("trailing newline", f"https://sns.us-east-1.amazonaws.com{PEM}\n", False),
    ("newline in host", f"https://sns.us-east-1.amazon\naws.com{PEM}", False),
    ("tab in path", f"https://sns.us-east-1.amazonaws.com/\t{PEM[1:]}", False),
    ("leading space", f" https://sns.us-east-1.amazonaws.com{PEM}", False),
    ("empty", "", False),
]


@pytest.mark.parametrize(
    "url,accepted", [c[1:] for c in CERTIFICATE_URLS], ids=[c[0] for c in CERTIFICATE_URLS]
)
def test_signing_certificate_urls(url, accepted):
    assert sns.is_sns_url(url, pem=True) is accepted


SUBSCRIBE = "/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-east-1:1:t&Token=2336"
SUBSCRIBE_URLS = [
    ("real", f"https://sns.us-east-1.amazonaws.com{SUBSCRIBE}", True),
    ("china", f"https://sns.cn-north-1.amazonaws.com.cn{SUBSCRIBE}", True),
    ("http", f"http://sns.us-east-1.amazonaws.com{SUBSCRIBE}", False),
    ("s3 bucket host", f"https://sns.s3.amazonaws.com{SUBSCRIBE}", False),
    ("s3 legacy regional host", f"https://sns.s3-eu-west-1.amazonaws.com{SUBSCRIBE}", False),
    ("suffix host", f"https://sns.us-east-1.amazonaws.com.evil.com{SUBSCRIBE}", False),
    ("region too short", f"https://sns.ab.amazonaws.com{SUBSCRIBE}", False),
    ("port", f"https://sns.us-east-1.amazonaws.com:8443{SUBSCRIBE}", False),
    ("user info", f"https://x@sns.us-east-1.amazonaws.com{SUBSCRIBE}", False),
    ("newline in host", f"https://sns.us-east-1.amazon\naws.com{SUBSCRIBE}", False),
]


@pytest.mark.parametrize(
    "url,accepted", [c[1:] for c in SUBSCRIBE_URLS], ids=[c[0] for c in SUBSCRIBE_URLS]
)
def test_subscribe_urls(url, accepted):
    assert sns.is_sns_url(url, pem=False) is accepted
