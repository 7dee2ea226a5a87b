"""A database session for one command of the command line, on its own engine."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from flask import current_app
from sqlalchemy.orm import Session

from console.store.database import make_engine


@contextlib.contextmanager
def command_session() -> Iterator[Session]:
    """A session on the configured database; what is not committed is rolled back."""
    settings = current_app.extensions["console.settings"]
    engine = make_engine(
        settings.database_url, lock_timeout_seconds=settings.db_lock_timeout_seconds
    )
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()
