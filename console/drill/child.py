"""The business process of the "commit, then die" drill, run as a child of ``console drill``.

It enqueues one intent with the deployment's settings (those its environment
carries: the scratch database), commits, and kills itself with SIGKILL before
anything else runs: an in-process wake-up is never sent.
"""

from __future__ import annotations

import json
import os
import signal
import sys

PROGRAM = "import sys; from console.drill.child import main; main(sys.argv[1:])"


def main(argv: list[str]) -> None:
    """argv: key, recipient, template."""
    from console import outbox
    from console.config import load_settings
    from console.mail.catalog import catalog_for
    from console.store.database import make_engine, make_session_factory

    key, recipient, template = argv
    settings = load_settings(instance_path=os.getcwd())
    outbox.configure(settings)
    catalog = catalog_for(settings)
    params = json.loads((catalog.folder(template) / "example.json").read_text(encoding="utf-8"))
    sessions = make_session_factory(make_engine(settings.database_url))
    with sessions() as session:
        outbox.enqueue(session, key=key, to=recipient, template=template, params=params)
        session.commit()
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
