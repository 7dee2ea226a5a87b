"""What a refused action says: each reason the store (or a page) refuses for, in one sentence.

A refusal carries a reason code and its facts (``ActionRefused("intent_missing",
intent_id=7)``); ``REFUSALS`` words each reason once, as a format string over the facts or a
function of them. The console's pages, flashes and JSON answers, the commands and ``str()`` of
the refusal (what a log line shows) all read these words.
"""

from __future__ import annotations

import datetime as dt
import errno
from collections.abc import Callable, Sequence
from typing import Any

from console.core.readable import format_time

UPGRADE_COMMAND = "console db upgrade"
SINCE = "since you opened this page"
_VERBS = {"dead_letter": "dead-letter"}  # an action's code -> the verb a refusal says
# a search filter's name -> what a refusal calls it
_FILTER_WORDS = {"fact": "provider report", "within": "window"}
_POSITION_SHOWN = 80  # characters of an unknown page position a refusal repeats
_TIME_SHOWN = 40  # characters of an unreadable time a refusal repeats


class Refusal(Exception):
    """A refusal: `reason`, a code of ``REFUSALS``, and the facts it is worded from.

    The facts are attributes too (``refusal.intent_id``); ``str()`` is the sentence.
    """

    def __init__(self, reason: str, **facts: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.facts = facts

    def __getattr__(self, name: str) -> Any:
        facts = self.__dict__.get("facts", {})
        if name in facts:
            return facts[name]
        raise AttributeError(name)

    def __str__(self) -> str:
        return sentence(self.reason, **self.facts)


def sentence(reason: str, **facts: Any) -> str:
    """The sentence of `reason` with `facts`; a reason with no words reads as its code and facts."""
    wording = REFUSALS.get(reason)
    if wording is None:
        shown = ", ".join(f"{name}={value!r}" for name, value in facts.items())
        return f"{reason} ({shown})" if shown else reason
    if isinstance(wording, str):
        return wording.format(**facts)
    return wording(**facts)


def said(error: Exception) -> str:
    """What `error` says to a person: a refusal's sentence, any other error's own text."""
    if isinstance(error, Refusal):
        return sentence(error.reason, **error.facts)
    return str(error)


def listen_refused(what: str, host: str, port: int, error: OSError, option: str) -> str:
    """One line saying why `what` cannot listen on host:port, and what to do about it."""
    if error.errno == errno.EADDRINUSE:
        problem = f"the {what} port {port} on {host} is already in use"
        return f"{problem}: stop what listens there or pass another {option}"
    return f"the {what} cannot listen on {host}:{port}: {error.strerror or error}"


def _one_of(roles: Sequence[str]) -> str:
    return f"role must be one of {', '.join(roles)}"


def _already_active(username: str, active: bool) -> str:
    return f"{username} is already {'active' if active else 'deactivated'}: nothing was done"


def _wrong_status(action: str, intent_id: int, status: str, allowed: Sequence[str]) -> str:
    verb = _VERBS.get(action, action)
    return (
        f"cannot {verb} intent {intent_id}: it is {status} "
        f"(only possible from {', '.join(allowed)})"
    )


def _unfinished(unfinished: Sequence[tuple[int, str]], count: int) -> str:
    named = ", ".join(f"{intent_id} ({status})" for intent_id, status in unfinished)
    more = f" and {count - len(unfinished)} more" if count > len(unfinished) else ""
    return (
        f"intents not finished: {named}{more}; cancel them first "
        "(--cancel, or tick 'cancel them' in the console)"
    )


def _resolution(resolution: str, resolutions: Sequence[str]) -> str:
    return f"unknown resolution {resolution!r}: use {', '.join(resolutions)}"


def _filter(name: str, value: str) -> str:
    return f"unknown {_FILTER_WORDS.get(name, name)} {value!r}"


def _position(position: str) -> str:
    return f"the page position {position[:_POSITION_SHOWN]!r} is not one this console made"


def _one_line(problem: str) -> str:
    """A driver's message on one line, each of its lines a punctuated sentence."""
    lines = [" ".join(line.split()) for line in problem.splitlines()]
    lines = [line for line in lines if line]
    ended = [line if line[-1] in ".?!:;," else line + "." for line in lines[:-1]]
    return " ".join(ended + lines[-1:])


def _unreachable(url: str, problem: str) -> str:
    return (
        f"cannot connect to the database at {url} ({_one_line(problem)}): "
        "check CONSOLE_DATABASE_URL and that the database is running"
    )


def _behind(url: str, revision: str | None, needs: str) -> str:
    state = "has no schema" if revision is None else f"is at revision {revision}"
    return f'the database at {url} {state}, the code needs {needs}: run "{UPGRADE_COMMAND}"'


def _not_a_time(text: str, example: str) -> str:
    return f"not a time: {text[:_TIME_SHOWN]!r} (write it as {example}, in UTC)"


def _lane_unknown(text: str, lanes: Sequence[str]) -> str:
    return f"unknown lane {text!r}: expected one of {', '.join(lanes)}"


def _hold_kind_unknown(kinds: Sequence[str]) -> str:
    return f"a hold names one of: {', '.join(kinds)}"


def _hold_ends_in_the_past(until: dt.datetime) -> str:
    return f"the hold would end in the past ({until.isoformat()})"


def _too_late(until: dt.datetime, why: str) -> str:
    return (
        f"a requeue cannot send it: it was useful until {format_time(until)} ({why}), "
        "so the worker would expire it again at once; ask the application for a new one"
    )


def _stale(intent_id: int | str, change: str) -> str:
    """A stale intent's refusal: what changed, and that nothing was done."""
    return f"Intent {intent_id}: {change}. Nothing was done; read the page again before acting."


def _on_intent(change: str) -> str:
    """`_stale` as a format string over the intent's id and the fields `change` names."""
    return _stale("{intent_id}", change)


def _status_changed(intent_id: int, status: str, status_reason: str | None, was: str) -> str:
    why = f" ({status_reason})" if status_reason else ""
    return _stale(intent_id, f"it changed {SINCE}: now {status}{why}, no longer {was}")


REFUSALS: dict[str, str | Callable[..., str]] = {
    # any operator action (console/store/actions.py)
    "reason_missing": "a reason is required",
    "reason_too_long": "the reason is longer than {limit} characters",
    "intent_missing": "intent {intent_id} does not exist",
    "intent_removed": "intent {intent_id} was removed meanwhile: nothing was done",
    "version_unreadable": (
        "the page's version of intent {intent_id} cannot be read: reload the page and act again"
    ),
    "status_moved": "intent {intent_id} is now {status}, no longer {expected}: nothing was done",
    "lease_held": (
        "a worker holds a live lease on intent {intent_id} until {until:%H:%M:%S} UTC; "
        "wait for its outcome"
    ),
    "wrong_status": _wrong_status,
    # what changed since the operator's page was read
    "retried": _on_intent(
        f"it was retried {SINCE}: now {{status}} after attempt {{attempt_count}}"
    ),
    "status_changed": _status_changed,
    "bounce_recorded": _on_intent(f"a bounce ({{bounce_type}}) was recorded {SINCE}"),
    "complaint_recorded": _on_intent(f"a complaint was recorded {SINCE}"),
    "delivery_recorded": _on_intent(f"a delivery was recorded {SINCE}"),
    "provider_id_recorded": _on_intent(
        f"the provider's message id {{provider_message_id}} was recorded {SINCE}"
    ),
    "params_scrubbed": _on_intent(f"retention removed its params {SINCE}"),
    "next_attempt_moved": _on_intent(
        f"its next attempt was moved to {{next_attempt_at:%H:%M:%S}} UTC {SINCE}"
    ),
    "changed_otherwise": _on_intent(f"it changed {SINCE} (now {{status}})"),
    "changed_meanwhile": _on_intent("it changed meanwhile"),
    # one intent (intent_actions.py, questions.py), many (bulk_actions.py), reconciliation.py
    "more_attempts_range": "give it a whole number of more attempts, from 1 to {cap}",
    "params_removed": (
        "cannot requeue intent {intent_id}: its params were removed by retention on "
        "{scrubbed_at:%Y-%m-%d}; enqueue the mail again with a new key"
    ),
    "past_expiry": (
        "cannot requeue intent {intent_id}: it expired at {expires_at:%Y-%m-%d %H:%M:%S} UTC "
        "(the expiry its application set); enqueue the mail again with a new key if it is "
        "still wanted"
    ),
    "requeue_too_late": _too_late,
    "no_attempt": "intent {intent_id} has no attempt to ask about",
    "bulk_action_unknown": "unknown bulk action {action!r}",
    "resolution_unknown": _resolution,
    "provider_id_too_long": "the provider id is longer than {limit} characters",
    # accounts (accounts.py)
    "username_length": "username must be {shortest} to {longest} characters",
    "username_characters": (
        "username may hold only letters a-z and A-Z, digits, '.', '_' and '-' "
        "(no spaces, accents or look-alike letters)"
    ),
    "username_taken": "user {username!r} already exists (names are unique whatever their case)",
    "username_taken_meanwhile": "user {username!r} already exists: it was created meanwhile",
    "role_unknown": _one_of,
    "password_too_short": "password must be at least {shortest} characters",
    "password_wrong": "the current password is not right",
    "user_missing": "user {user_id} does not exist",
    "own_deactivation": "you cannot deactivate your own account",
    "own_role": "you cannot change your own role",
    "already_active": _already_active,
    "already_role": "{username} is already {role}: nothing was done",
    "last_admin_deactivation": "the last active admin cannot be deactivated",
    "last_admin_role": "the last active admin must stay admin",
    "user_changed": "{username} changed meanwhile: nothing was done",
    # suppressions and erasure (suppressions.py, erasure.py)
    "address_invalid": "invalid address {address!r}: {problem}",
    "already_suppressed": "{recipient} is already on the suppression list: nothing was done",
    "suppression_gone": "that suppression was already removed: nothing was done",
    "still_suppressed": "{recipient} is still suppressed: remove the suppression first",
    "secret_key_missing": "an erasure needs the secret key (CONSOLE_SECRET_KEY)",
    "intents_unfinished": _unfinished,
    "address_changed": "an intent to that address changed meanwhile: nothing was done",
    # holds (holds.py, ops/hold_targets.py; the page's own check of its form)
    "lane_unknown": _lane_unknown,
    "template_spec_unreadable": "unknown template {text!r}: expected 'name' or 'name@N'",
    "template_unknown": "{problem}",
    "domain_invalid": "not a domain: {text!r}",
    "hold_kind_unknown": _hold_kind_unknown,
    "hold_ends_in_the_past": _hold_ends_in_the_past,
    "already_held": "{held} is already held, since {since:%Y-%m-%d %H:%M} UTC by {by}",
    "hold_gone": "that hold is no longer set",
    "time_unreadable": _not_a_time,
    # the search (intent_search.py)
    "filter_unknown": _filter,
    "position_unknown": _position,
    "position_needs_text": "that page position belongs to a search with text",
    # start-up's look at the database (schema_check.py)
    "database_unreachable": _unreachable,
    "schema_behind": _behind,
}
