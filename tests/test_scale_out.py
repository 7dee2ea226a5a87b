"""Several processes on one PostgreSQL: wake-up by LISTEN/NOTIFY, and a crash mid-run."""

from __future__ import annotations

import threading

from sqlalchemy.orm import Session

from console.database import make_engine
from console.outbox import enqueue
from console.pg_wakeup import NotifyListener

LOGIN = dict(to="ada@example.com", template="login-code", params={"code": "1"})


def test_a_committed_enqueue_wakes_a_listener_and_a_rolled_back_one_does_not(postgres_url):
    woken = threading.Event()
    listener = NotifyListener(postgres_url, on_notify=woken.set).start()
    engine = make_engine(postgres_url)
    try:
        assert listener.wait_listening(10)
        assert woken.wait(5)  # the wake-up given on (re)connecting
        woken.clear()
        with Session(engine) as session:
            enqueue(session, key="rolled-back", **LOGIN)
            session.rollback()
        assert not woken.wait(1.5)
        with Session(engine) as session:
            enqueue(session, key="committed", **LOGIN)
            assert not woken.wait(0.5), "a NOTIFY is delivered on commit, not before"
            session.commit()
        assert woken.wait(5)
    finally:
        listener.stop()
        engine.dispose()
