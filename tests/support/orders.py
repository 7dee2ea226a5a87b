"""The order confirmation most tests enqueue, and a one-line way to enqueue it."""

from __future__ import annotations

from console.outbox import enqueue

ORDER = dict(
    template="order-confirmation",
    params={
        "customer_name": "Ada",
        "order_number": "1",
        "items": [{"quantity": 1, "name": "Lamp", "price": "9.00"}],
        "total": "9.00",
    },
)


def enqueue_orders(session_factory, addresses, prefix: str = "order") -> list[int]:
    """Enqueue one order confirmation to each address, keyed `prefix:N`; commit; their ids."""
    ids = []
    with session_factory() as session:
        for number, address in enumerate(addresses):
            ids.append(enqueue(session, key=f"{prefix}:{number}", to=address, **ORDER).id)
        session.commit()
    return ids


def enqueue_login_code(session_factory, key: str = "login:7") -> int:
    """Enqueue a login code (the critical lane) to ada@example.com; commit; its id."""
    with session_factory() as session:
        intent = enqueue(
            session, key=key, to="ada@example.com", template="login-code", params={"code": "424242"}
        )
        session.commit()
    return intent.id
