"""In-process wake-up: an enqueue that commits wakes this process's workers at once."""

from __future__ import annotations

import threading
from collections.abc import Callable

_subscribers: list[Callable[[], None]] = []
_lock = threading.Lock()


def subscribe(callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback` (quickly, without blocking) after each committed enqueue."""
    with _lock:
        _subscribers.append(callback)
    return callback


def unsubscribe(callback: Callable[[], None]) -> None:
    with _lock:
        if callback in _subscribers:
            _subscribers.remove(callback)


def notify() -> None:
    """Tell every subscriber that due mail may be waiting."""
    with _lock:
        callbacks = list(_subscribers)
    for callback in callbacks:
        callback()
