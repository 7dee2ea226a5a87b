"""What an erasure did, in the words the console and ``console forget`` print."""

from __future__ import annotations

from console.store.erasure import LISTED, ErasureReport
from console.web.display import plural


def summary(report: ErasureReport) -> str:
    """One paragraph saying what an erasure did, naming the address by its hash only."""
    intents = plural(report.intents_deleted, "intent")
    events = plural(report.events_deleted, "provider event")
    entries = plural(report.audit_entries, "audit entry", "audit entries")
    name = "names" if report.audit_entries == 1 else "name"
    lines = [
        f"forgot {report.token}: deleted {intents} ({report.cancelled} cancelled first) "
        f"and {events}; {entries} now {name} {report.token}",
        f"suppression kept as {report.token}" if report.suppression_kept else "not suppressed",
    ]
    if report.params_scrubbed:
        scrubbed = plural(report.params_scrubbed, "intent")
        lines.append(f"params scrubbed from {scrubbed} to other people")
    if report.unsent_elsewhere:
        named = ", ".join(str(i) for i in report.unsent_elsewhere[:LISTED])
        lines.append(f"unsent intents to other people still quote the address: {named}")
    return "\n".join(lines)
