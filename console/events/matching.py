"""Which intent a provider event is about, or why it waits unmatched; pure, no SQL.

Provider ids repeat: a relay reuses its queue ids, and a demo server started
again hands out its first ids again. So an event is matched by its identifiers
*and* the recipient it names:

1. its Message-ID, when it carries one (ours, unique), else its provider id,
   names the candidate intents (``console.store.provider_events`` looks them up);
2. of those, only intents to the event's recipient remain (compared without
   case); an event naming no recipient keeps them all;
3. exactly one left: the event is about it. None or several: the event waits
   unmatched with the reason, and is never attached to another recipient's mail.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

LISTED_INTENTS = 5  # how many intent ids a reason names before "and N more"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """An intent an event's identifiers point at, and its attempt with that provider id."""

    intent_id: int
    recipient: str
    attempt_id: int | None = None


def same_address(left: str, right: str) -> bool:
    """Whether two addresses are the same mailbox, as events and intents write them."""
    return left.strip().lower() == right.strip().lower()


def describe_identifier(provider_message_id: str | None, message_id: str | None) -> str | None:
    """Name what identifies the event's message ("Message-ID <..>", "provider id X")."""
    if message_id:
        return f"Message-ID {message_id}"
    if provider_message_id:
        return f"provider id {provider_message_id}"
    return None


def choose(
    candidates: Sequence[Candidate],
    *,
    recipient: str | None,
    provider_message_id: str | None,
    message_id: str | None,
) -> Candidate | str:
    """Return the one candidate the event is about, or the reason it waits unmatched."""
    recipient = recipient or None
    named = describe_identifier(provider_message_id, message_id)
    if named is None:
        return "the event names no provider id and no Message-ID: it cannot be matched"
    same = [c for c in candidates if recipient is None or same_address(c.recipient, recipient)]
    if not same:
        return _none_to(recipient, named, candidates, waiting_for_the_id=not message_id)
    if len(same) == 1:
        return same[0]
    if recipient:
        return f"{named} is on {len(same)} intents to {recipient} ({_ids(same)}): cannot tell which"
    return f"{named} is on {len(same)} intents ({_ids(same)}) and the event names no recipient"


def _none_to(
    recipient: str | None,
    named: str,
    others: Sequence[Candidate],
    *,
    waiting_for_the_id: bool,
) -> str:
    """The reason of an event no candidate fits; it stays true while the event waits."""
    if recipient is None:
        return f"no intent has {named}" + (" yet" if waiting_for_the_id else "")
    reason = f"no intent to {recipient} has {named}"
    if others:
        whose = "another recipient" if len(others) == 1 else "other recipients"
        return f"{reason}; it is on {_intents(others)} of {whose}"
    return reason + (" yet" if waiting_for_the_id else "")


def _intents(candidates: Sequence[Candidate]) -> str:
    noun = "intent" if len(candidates) == 1 else "intents"
    return f"{noun} {_ids(candidates)}"


def _ids(candidates: Sequence[Candidate]) -> str:
    ids = sorted(c.intent_id for c in candidates)
    listed = ", ".join(str(i) for i in ids[:LISTED_INTENTS])
    more = len(ids) - LISTED_INTENTS
    return f"{listed} and {more} more" if more > 0 else listed
