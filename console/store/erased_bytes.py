"""SQLite keeps what a transaction deleted: in the free space of its pages and in the WAL.

An erasure therefore turns on ``secure_delete`` for its connection (what it deletes or rewrites
is overwritten with zeros) and, once its transaction commits, checkpoints the WAL with TRUNCATE:
the pages as they were go from the ``-wal`` file, which is left empty. PostgreSQL needs neither:
nothing here runs there.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, scoped_session

log = logging.getLogger(__name__)


def wipe_when_committed(session: Session | scoped_session) -> None:
    """On SQLite, zero what `session` deletes from now on; empty the WAL after its commit."""
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        return
    connection.exec_driver_sql("PRAGMA secure_delete = ON")  # this connection, from now on
    engine = connection.engine
    own = session.registry() if isinstance(session, scoped_session) else session
    event.listen(own, "after_commit", lambda _: checkpoint_wal(engine), once=True)


def checkpoint_wal(engine: Engine) -> bool:
    """Copy the WAL into the database file and truncate it; False if a reader held it."""
    with engine.connect() as connection:
        busy = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").first()[0]
    if busy:
        log.warning("the WAL could not be emptied yet: a reader holds it; the next checkpoint will")
    return not busy
