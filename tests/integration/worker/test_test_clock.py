"""The tests' clock and ``enqueue()`` agree on the time, however slow the machine is.

Workers in tests read a ``TestClock`` that stands still. An intent enqueued while it does
is due at its reading whether the enqueue came a millisecond or several seconds (a busy
machine) after the clock was made: before, ``enqueue()`` stamped the real time, so a test
whose enqueues took more than the clock's one second of lead found nothing due.
"""

from __future__ import annotations

import time

import pytest

from console.core.clock import utcnow
from console.transports.smtp import SmtpTransport
from tests.support.orders import enqueue_orders
from tests.support.smtp_server import ScriptedSMTPServer


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer() as server:
        yield server


def test_an_intent_enqueued_after_real_time_passed_the_clock_is_due_at_its_reading(
    session_factory, make_worker, smtp_server, clock
):
    worker = make_worker(SmtpTransport(smtp_server.url, timeout_seconds=2))
    deadline = time.monotonic() + 10
    while utcnow() <= clock() and time.monotonic() < deadline:  # as on a slow machine
        time.sleep(0.05)
    assert utcnow() > clock()
    enqueue_orders(session_factory, ["late@shop.example"])
    assert worker.run_once().claimed == 1
