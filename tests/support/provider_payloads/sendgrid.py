"""SendGrid Event Webhook batches and SendGrid's published signed request.

Each function returns a fresh copy; the comment above each payload names where
its shape comes from. Values are kept as published except where a comment says
a test needs its own.
"""

from __future__ import annotations

import copy
import json

# sendgrid/sendgrid-python test/unit/test_eventwebhook.py: a real signed request (key,
# signature, timestamp and the exact body, with its trailing CRLF).
SENDGRID_VECTOR = {
    "public_key": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1f"
    "lpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==",
    "signature": "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIq"
    "Hh89M15TluLtEZtM=",
    "timestamp": "1600112502",
    "body": (
        json.dumps(
            [
                {
                    "email": "hello@world.com",
                    "event": "dropped",
                    "reason": "Bounced Address",
                    "sg_event_id": "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
                    "sg_message_id": "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-"
                    "18-5F5FC76C-9.0",
                    "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>",
                    "timestamp": 1600112492,
                }
            ],
            sort_keys=True,
            separators=(",", ":"),
        )
        + "\r\n"
    ).encode(),
}

# SendGrid "Event Webhook Reference": the example event of each kind, about one message
# (sg_message_id 14c5d75ce93.dfd.64b469...); "bounce" and "dropped" as the reference shows them.
_SG_MESSAGE = "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0"
_SG_COMMON = {"email": "example@test.com", "timestamp": 1513299569,
              "smtp-id": "<14c5d75ce93.dfd.64b469@ismtpd-555>", "sg_message_id": _SG_MESSAGE,
              "category": "cat facts"}  # fmt: skip
SENDGRID_BATCH = [
    {**_SG_COMMON, "event": "processed", "sg_event_id": "sg_event_id_processed"},
    {
        **_SG_COMMON,
        "event": "deferred",
        "sg_event_id": "sg_event_id_deferred",
        "response": "400 try again later",
        "attempt": "5",
    },  # fmt: skip
    {
        **_SG_COMMON,
        "event": "delivered",
        "sg_event_id": "sg_event_id_delivered",
        "response": "250 OK",
    },  # fmt: skip
    {
        **_SG_COMMON,
        "event": "bounce",
        "sg_event_id": "sg_event_id_bounce",
        "reason": "500 unknown recipient",
        "status": "5.0.0",
        "type": "bounce",
        "bounce_classification": "Invalid Address",
    },  # fmt: skip
    {**_SG_COMMON, "event": "spamreport", "sg_event_id": "sg_event_id_spamreport"},
    {
        **_SG_COMMON,
        "email": "dropped@test.com",
        "event": "dropped",
        "sg_event_id": "sg_event_id_dropped",
        "reason": "Bounced Address",
        "status": "5.0.0",
    },  # fmt: skip
    {
        **_SG_COMMON,
        "event": "open",
        "sg_event_id": "sg_event_id_open",
        "useragent": "Mozilla/4.0",
        "ip": "255.255.255.255",
    },  # fmt: skip
]


def sendgrid_batch() -> list[dict]:
    return copy.deepcopy(SENDGRID_BATCH)
