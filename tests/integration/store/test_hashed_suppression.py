"""A suppression kept only as the address's keyed hash still stops mail, at enqueue and at send.

An erasure request (``console forget``) leaves the suppression of the address as
``addr:<12 hex>``; every suppression check compares that form too.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from console.core.address_hash import address_hash, is_address_hash, replace_address_in
from console.models import Intent, Suppression, utcnow
from console.store import claims, suppressions
from console.transports.memory import MemoryTransport
from console.vocabulary import PENDING, SUPPRESSED
from tests.conftest import TEST_SECRET_KEY
from tests.support.orders import enqueue_orders

ADDRESS = "Forgotten.Person@Example.com"


@pytest.fixture
def address_key():
    """This process compares suppressions with keyed hashes under the test key."""
    suppressions.use_address_key(TEST_SECRET_KEY)
    yield TEST_SECRET_KEY
    suppressions.use_address_key(TEST_SECRET_KEY)


def suppress_hash_of(session_factory, address: str) -> str:
    token = address_hash(TEST_SECRET_KEY, address)
    with session_factory() as session:
        session.add(Suppression(recipient=token, reason="manual", created_at=utcnow()))
        session.commit()
    return token


def test_the_hash_ignores_letter_case_and_depends_on_the_key():
    token = address_hash("key-one", ADDRESS)
    assert token == address_hash("key-one", " forgotten.person@example.COM ")
    assert token != address_hash("key-two", ADDRESS)
    assert is_address_hash(token) and len(token) == len("addr:") + 12
    assert not is_address_hash("ada@example.com") and not is_address_hash(None)
    with pytest.raises(ValueError):
        address_hash("", ADDRESS)


def test_replacing_an_address_in_json_reaches_every_string():
    value = {"note": "from FORGOTTEN.person@example.com", "to": [ADDRESS, 3], ADDRESS: None}
    replaced = replace_address_in(value, ADDRESS.lower(), "addr:x")
    assert replaced == {"note": "from addr:x", "to": ["addr:x", 3], "addr:x": None}


def test_enqueue_to_a_hashed_suppression_is_suppressed(session_factory, address_key):
    suppress_hash_of(session_factory, ADDRESS)
    [intent_id] = enqueue_orders(session_factory, [ADDRESS.upper()])
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == SUPPRESSED


def test_the_claim_suppresses_a_pending_intent_whose_address_was_hashed(
    session_factory, make_worker, address_key
):
    [intent_id] = enqueue_orders(session_factory, [ADDRESS])
    suppress_hash_of(session_factory, ADDRESS)
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == PENDING
        found = claims.suppressed_among(session, {ADDRESS.lower(), "ada@example.com"})
        assert found == {ADDRESS.lower()}
    transport = MemoryTransport()
    make_worker(transport).run_once()
    assert transport.sent == []
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == SUPPRESSED


def test_the_lookups_just_before_a_send_compare_the_hash(session_factory, engine, address_key):
    suppress_hash_of(session_factory, ADDRESS)
    with session_factory() as session:
        assert suppressions.is_suppressed(session, ADDRESS)
        assert not suppressions.is_suppressed(session, "ada@example.com")
    with engine.connect() as connection:
        assert suppressions.is_suppressed_now(connection, ADDRESS.upper())


def test_without_a_key_only_the_address_itself_is_compared(session_factory):
    suppressions.use_address_key("")
    try:
        suppress_hash_of(session_factory, ADDRESS)
        [intent_id] = enqueue_orders(session_factory, [ADDRESS])
        with session_factory() as session:
            assert session.get(Intent, intent_id).status == PENDING
            rows = session.scalars(select(Suppression.recipient)).all()
            assert all(is_address_hash(row) for row in rows)
    finally:
        suppressions.use_address_key(TEST_SECRET_KEY)


def test_suppressing_a_forgotten_address_again_says_it_is_already_suppressed(
    session_factory, address_key
):
    from console.store.actions import StaleAction
    from console.store.suppressions import add_suppression

    token = suppress_hash_of(session_factory, ADDRESS)
    with session_factory() as session:
        with pytest.raises(StaleAction, match="already on the suppression list"):
            add_suppression(session, ADDRESS.upper(), actor="ops", reason="asked again")
        session.rollback()
        assert session.scalars(select(Suppression.recipient)).all() == [token]


class SuppressingTheHashFirst(MemoryTransport):
    """Has an erasure leave the recipient's hash on the list after the claim, before its send."""

    def __init__(self, session_factory) -> None:
        super().__init__()
        self.session_factory = session_factory

    async def send(self, email, on_stage):
        suppress_hash_of(self.session_factory, email.recipient)
        return await super().send(email, on_stage)


def test_the_mark_before_the_body_compares_the_hash(session_factory, make_worker, address_key):
    [intent_id] = enqueue_orders(session_factory, [ADDRESS])
    transport = SuppressingTheHashFirst(session_factory)
    make_worker(transport).run_once()
    assert transport.sent == [], "the body never left"
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == SUPPRESSED
