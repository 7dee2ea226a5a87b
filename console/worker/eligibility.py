"""Per-purpose eligibility checks, run again when an intent is claimed for sending.

An application names a module in ``CONSOLE_ELIGIBILITY_MODULE``; that module
defines ``ELIGIBILITY_CHECKS``, a mapping from an intent's ``purpose`` to a
function ``check(intent, session) -> str | None``. The function gets the
claimed intent (``console.store.claims.DueIntent``: recipient, event, params,
...) and a session inside the claim transaction, and returns ``None`` when the
mail may still go, or the reason it must not (the intent becomes ``cancelled``
with that reason). For example::

    def still_unverified(intent, session):
        user = session.get(User, intent.params["user_id"])
        return "already verified" if user.verified_at else None

    ELIGIBILITY_CHECKS = {"verify-email": still_unverified}
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.orm import Session

EligibilityCheck = Callable[[Any, Session], "str | None"]
CHECKS_ATTRIBUTE = "ELIGIBILITY_CHECKS"


class EligibilityError(ValueError):
    """The eligibility module cannot be loaded or does not define its checks."""


class EligibilityPolicy:
    """The checks an application registered, looked up by purpose."""

    def __init__(self, checks: Mapping[str, EligibilityCheck] | None = None) -> None:
        self.checks = dict(checks or {})
        for purpose, check in self.checks.items():
            if not callable(check):
                raise EligibilityError(f"the eligibility check for {purpose!r} is not callable")

    @classmethod
    def from_module(cls, module_name: str | None) -> EligibilityPolicy:
        """Load ``ELIGIBILITY_CHECKS`` from `module_name`; no module means no checks."""
        if not module_name:
            return cls()
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise EligibilityError(
                f"CONSOLE_ELIGIBILITY_MODULE: cannot import {module_name!r}: {error}"
            ) from None
        checks = getattr(module, CHECKS_ATTRIBUTE, None)
        if not isinstance(checks, Mapping):
            raise EligibilityError(
                f"CONSOLE_ELIGIBILITY_MODULE: {module_name!r} must define {CHECKS_ATTRIBUTE}, "
                "a dict from purpose to check function"
            )
        return cls(checks)

    def reason_not_to_send(self, intent: Any, session: Session) -> str | None:
        """Return why `intent` must not be sent, or None; exceptions propagate."""
        check = self.checks.get(intent.purpose) if intent.purpose else None
        if check is None:
            return None
        reason = check(intent, session)
        return str(reason) if reason else None
