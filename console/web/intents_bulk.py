"""Bulk actions over a search: a preview of what they will do, then a one-use confirmation.

The routes belong to the intents blueprint (`intents.bulk_preview`, `intents.bulk_apply`):
``console.web.intents`` adds them with `add_routes`.
"""

from __future__ import annotations

import datetime as dt

from flask import Blueprint, abort, flash, render_template, request
from flask_login import current_user

from console import wakeup
from console.core.whole_numbers import whole_number
from console.models import utcnow
from console.store import actions, bulk_actions, bulk_confirmations
from console.store.intent_search import InvalidFilter, SearchFilters
from console.vocabulary import OPERATOR
from console.web import action_words, forms, security
from console.web.auth import role_required
from console.web.display import plural
from console.web.extensions import current_settings, db
from console.words.refusals import said

_BULK_DONE = {"requeue": "Requeued {}.", "dead_letter": "Dead-lettered {}."}
# How far back a preview id's use is looked for when its preview page is loaded again.
BULK_USE_LOOKBACK = dt.timedelta(days=1)
# a bulk preview's confirmation token
BULK_TOKEN_PURPOSE = "console.bulk-preview"
BULK_TOKEN_MAX_AGE_SECONDS = 3600.0


@role_required(OPERATOR)
def bulk_preview():
    """Show what a bulk action over the filtered list would do, and ask to confirm.

    The search page's bulk links carry a fresh preview id; loading the same link
    again (the browser's Back after confirming) shows that it was confirmed
    instead of a new confirmation.
    """
    action = request.args.get("action", "")
    preview_id = request.args.get("preview") or bulk_confirmations.new_preview_id()
    if action not in bulk_actions.BULK_ACTIONS or not bulk_confirmations.valid_preview_id(
        preview_id
    ):
        abort(400, description="The link does not name a bulk action and its preview.")
    try:
        filters = SearchFilters.from_args(request.args)
    except InvalidFilter as exc:
        abort(400, description=said(exc))
    used = bulk_confirmations.confirmation_of(
        db.session, preview_id, action, since=utcnow() - BULK_USE_LOOKBACK
    )
    if used is not None:
        return _render_bulk(action, filters, confirmation=used)
    return _render_bulk(action, filters, preview_id=preview_id)


def _render_bulk(
    action: str,
    filters: SearchFilters,
    *,
    preview_id: str | None = None,
    confirmation: bulk_confirmations.BulkConfirmation | None = None,
    error: str | None = None,
    status_code: int = 200,
):
    """The preview page with a fresh one-use confirmation, or the confirmation that used it."""
    context = dict(action=action, filters=filters, confirmation=confirmation, error=error,
                   retry_age_seconds=current_settings().max_age_seconds,
                   max_attempts=current_settings().max_attempts)  # fmt: skip
    if request.method == "POST":  # a 409: the page stands for its GET address
        forms.stands_for(_preview_endpoint, **_preview_args(action, filters, preview_id))
    if confirmation is not None:
        context["confirmation_summary"] = action_words.confirmation_summary(confirmation)
    else:
        preview = bulk_actions.preview_bulk(db.session, filters, action)
        token = security.signed_token(
            {
                "preview": preview_id or bulk_confirmations.new_preview_id(),
                "action": action,
                "filters": filters.as_args(),
                "max_id": preview.max_id,
                "previewed_at": preview.previewed_at.isoformat(),
                "counted": preview.will_act,
            },
            BULK_TOKEN_PURPOSE,
        )
        targets = bulk_actions.first_targets(
            db.session, filters, action, max_id=preview.max_id, at=preview.previewed_at
        )
        summary = action_words.bulk_summary(preview)
        context.update(preview=preview, summary=summary, token=token, targets=targets)
    return render_template("intents/bulk.html", **context), status_code


_preview_endpoint = "intents.bulk_preview"


def _preview_args(action: str, filters: SearchFilters, preview_id: str | None):
    args = dict(action=action, **filters.as_args())
    return {**args, "preview": preview_id} if preview_id else args


def _refused(action, filters, preview_id: str | None, exc: actions.ActionRefused):
    """A refused confirmation (no reason, say): a 303 to its preview, saying why."""
    db.session.rollback()
    message = forms.refusal_words("Nothing was done", exc)
    return forms.refused(message, _preview_endpoint, **_preview_args(action, filters, preview_id))


def _previewed_at(raw: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(raw)
    except ValueError:
        abort(400, description="The confirmation lacks the time of its preview.")
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


@role_required(OPERATOR)
def bulk_apply():
    """Act on the previewed intents that did not change since the preview, once."""
    if request.form.get("token"):
        return _confirm_preview(request.form["token"])
    # A confirmation without a preview token (a hand-made request): it acts on the
    # intents unchanged since `previewed_at`, so the same one twice acts once.
    action = request.form.get("action", "")
    max_id = whole_number(request.form.get("max_id"))
    if action not in bulk_actions.BULK_ACTIONS or max_id is None:
        abort(400, description="The confirmation does not name an action and its preview.")
    try:
        filters = SearchFilters.from_args(request.form)
    except InvalidFilter as exc:
        abort(400, description=said(exc))
    try:
        acted = bulk_actions.apply_bulk(
            db.session,
            filters,
            action,
            actor=current_user.username,
            reason=request.form.get("reason", ""),
            max_id=max_id,
            previewed_at=_previewed_at(request.form.get("previewed_at", "")),
        )
    except actions.ActionRefused as exc:
        return _refused(action, filters, None, exc)
    return _finish_bulk(action, filters, acted)


def _confirm_preview(token: str):
    """Do what the preview of `token` counted, unless that preview was confirmed already."""
    try:
        signed = security.read_signed_token(
            token, BULK_TOKEN_PURPOSE, max_age_seconds=BULK_TOKEN_MAX_AGE_SECONDS
        )
        action, preview_id = signed["action"], signed["preview"]
        filters = SearchFilters.from_args(signed["filters"])
        previewed_at = dt.datetime.fromisoformat(signed["previewed_at"])
    except security.TokenRefused as exc:
        action = request.form.get("action", "")
        if action not in bulk_actions.BULK_ACTIONS:
            abort(400, description=f"The confirmation's preview is {exc}.")
        try:
            filters = SearchFilters.from_args(request.form)
        except InvalidFilter as invalid:
            abort(400, description=said(invalid))
        message = f"This confirmation's preview is {exc}: nothing was done. Here is a new one."
        return _render_bulk(action, filters, error=message, status_code=409)
    used = bulk_confirmations.confirmation_of(db.session, preview_id, action, since=previewed_at)
    if used is not None:
        return _render_bulk(
            action, filters, preview_id=preview_id, confirmation=used, status_code=409
        )
    try:
        acted = bulk_actions.apply_bulk(
            db.session,
            filters,
            action,
            actor=current_user.username,
            reason=request.form.get("reason", ""),
            max_id=signed["max_id"],
            previewed_at=previewed_at,
            preview_id=preview_id,
        )
    except actions.ActionRefused as exc:
        return _refused(action, filters, preview_id, exc)
    if acted == 0:  # a twin of this confirmation may have acted a moment before
        used = bulk_confirmations.confirmation_of(
            db.session, preview_id, action, since=previewed_at
        )
        if used is not None:
            db.session.rollback()
            return _render_bulk(
                action, filters, preview_id=preview_id, confirmation=used, status_code=409
            )
    left = signed.get("counted", acted) - acted
    return _finish_bulk(action, filters, acted, changed_since_preview=max(left, 0))


def _finish_bulk(action: str, filters: SearchFilters, acted: int, changed_since_preview: int = 0):
    db.session.commit()
    if acted and action == "requeue":
        wakeup.notify()
    flash(_BULK_DONE[action].format(plural(acted, "intent")), "success")
    if changed_since_preview:
        left = "was left as it is" if changed_since_preview == 1 else "were left as they are"
        counted = plural(changed_since_preview, "intent")
        flash(f"{counted} of those the preview counted changed since and {left}.", "warning")
    return forms.redirect_to("intents.search", **filters.as_args())


def add_routes(bp: Blueprint) -> None:
    """Add the bulk pages to the intents blueprint `bp` (GET previews, POST confirms)."""
    bp.add_url_rule("/bulk", view_func=bulk_preview, methods=["GET"])
    bp.add_url_rule("/bulk", view_func=bulk_apply, methods=["POST"])
