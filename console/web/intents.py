"""Search and trace: find intents, read one intent's timeline, and act on it."""

from __future__ import annotations

import datetime as dt

from flask import (
    Blueprint,
    Flask,
    abort,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user

from console.mail.catalog import default_catalog
from console.mail.render import build_message
from console.mail.template_settings import TemplateError
from console.models import utcnow
from console.store import (
    actions,
    bulk,
    intent_actions,
    intent_search,
    reconciliation,
    search_filters,
    timeline,
)
from console.vocabulary import LANES, OPERATOR, REQUEUEABLE_STATUSES, STATUSES, VIEWER
from console.web import security
from console.web.auth import has_role, role_required
from console.web.extensions import current_settings, db
from console.worker import wakeup

bp = Blueprint("intents", __name__, url_prefix="/intents")


@bp.get("")
@role_required(VIEWER)
def search():
    error = None
    try:
        filters = search_filters.SearchFilters.from_args(request.args)
        page = intent_search.search_intents(db.session, filters, after=request.args.get("after"))
    except search_filters.InvalidFilter as exc:
        error = f"Search not run: {exc}."
        filters, page = search_filters.SearchFilters(), intent_search.SearchPage([], None)
    context = dict(
        filters=filters,
        page=page,
        error=error,
        statuses=STATUSES,
        lanes=LANES,
        templates=default_catalog().names(),
        ages=search_filters.SEARCH_AGES,
        preview_id=bulk.new_preview_id(),
    )
    if request.htmx and not error:
        return render_template("intents/_rows.html", **context)
    return render_template("intents/search.html", **context), 400 if error else 200


def _detail_or_404(intent_id: int) -> timeline.IntentDetail:
    detail = timeline.intent_detail(db.session, intent_id)
    if detail is None:
        abort(404, description=f"There is no intent {intent_id}.")
    return detail


def _render_detail(intent_id: int, status_code: int = 200, **extra):
    detail = _detail_or_404(intent_id)
    intent = detail.intent
    context = dict(
        detail=detail,
        intent=intent,
        can_act=has_role(OPERATOR),
        requeueable=intent.status in REQUEUEABLE_STATUSES,
        suppression_warning=None,
        version=actions.version_of(intent),
    )
    if context["can_act"] and context["requeueable"]:
        context["suppression_warning"] = intent_actions.suppression_warning(
            db.session, intent.recipient
        )
    context.update(extra)
    return render_template("intents/detail.html", **context), status_code


@bp.get("/<int:intent_id>")
@role_required(VIEWER)
def detail(intent_id: int):
    return _render_detail(intent_id)


@bp.post("/<int:intent_id>/preview")
@role_required(OPERATOR)
def preview(intent_id: int):
    """Render the message as the worker would build it; the look is audited."""
    intent = _detail_or_404(intent_id).intent
    if intent.params_scrubbed_at is not None:
        preview = {"error": "The parameters were scrubbed after the retention period."}
    else:
        try:
            message = build_message(intent, mail_from=current_settings().mail_from)
            preview = _message_parts(message)
        except TemplateError as exc:
            preview = {"error": f"The message cannot be rendered: {exc}"}
    intent_actions.record_preview(db.session, intent_id, actor=current_user.username)
    db.session.commit()
    if request.htmx:
        return render_template("intents/_preview.html", preview=preview)
    return _render_detail(intent_id, preview=preview)


def _message_parts(message) -> dict[str, str | None]:
    headers = {name: str(message[name]) for name in ("From", "To", "Subject", "Message-ID")}
    text_part = message.get_body(preferencelist=("plain",))
    html_part = message.get_body(preferencelist=("html",))
    return {
        "headers": headers,
        "text": text_part.get_content() if text_part is not None else None,
        "html": html_part.get_content() if html_part is not None else None,
    }


def _finish_action(intent_id: int, result: actions.ActionResult, message: str):
    db.session.commit()
    if result.wakes_worker:
        wakeup.notify()
    flash(message, "success")
    if result.warning:
        flash(result.warning, "warning")
    return redirect(url_for("intents.detail", intent_id=intent_id), code=303)


def _refused(intent_id: int, exc: actions.ActionRefused):
    db.session.rollback()
    status_code = 409 if isinstance(exc, actions.StaleAction) else 422
    return _render_detail(intent_id, status_code, error=str(exc))


def _action_arguments() -> dict[str, str | None]:
    return dict(
        actor=current_user.username,
        reason=request.form.get("reason", ""),
        expected_status=request.form.get("expected_status") or None,
        expected_version=request.form.get("version") or None,
    )


@bp.post("/<int:intent_id>/requeue")
@role_required(OPERATOR)
def requeue(intent_id: int):
    try:
        result = intent_actions.requeue(db.session, intent_id, **_action_arguments())
    except actions.ActionRefused as exc:
        return _refused(intent_id, exc)
    return _finish_action(intent_id, result, f"Requeued: {result.before_status} → pending.")


@bp.post("/<int:intent_id>/dead-letter")
@role_required(OPERATOR)
def dead_letter(intent_id: int):
    try:
        result = intent_actions.dead_letter(db.session, intent_id, **_action_arguments())
    except actions.ActionRefused as exc:
        return _refused(intent_id, exc)
    return _finish_action(intent_id, result, "Dead-lettered: it will not be sent.")


_RECONCILED = {
    "accepted": "Marked accepted: the intent is submitted.",
    "resend": "Resend ordered: the intent is pending, with the same Message-ID and key.",
    "dead": "Dead-lettered: it will not be sent.",
}


@bp.post("/<int:intent_id>/reconcile")
@role_required(OPERATOR)
def reconcile(intent_id: int):
    resolution = request.form.get("resolution", "")
    try:
        result = reconciliation.reconcile(
            db.session,
            intent_id,
            resolution=resolution,
            provider_message_id=request.form.get("provider_message_id"),
            **_action_arguments(),
        )
    except actions.ActionRefused as exc:
        return _refused(intent_id, exc)
    return _finish_action(intent_id, result, _RECONCILED[resolution])


_BULK_DONE = {"requeue": "Requeued {} intents.", "dead_letter": "Dead-lettered {} intents."}
BULK_TOKEN_PURPOSE = "console.bulk-preview"
BULK_TOKEN_MAX_AGE_SECONDS = 3600.0
# How far back a preview id's use is looked for when its preview page is loaded again.
BULK_USE_LOOKBACK = dt.timedelta(days=1)


@bp.get("/bulk")
@role_required(OPERATOR)
def bulk_preview():
    """Show what a bulk action over the filtered list would do, and ask to confirm.

    The search page's bulk links carry a fresh preview id; loading the same link
    again (the browser's Back after confirming) shows that it was confirmed
    instead of a new confirmation.
    """
    action = request.args.get("action", "")
    preview_id = request.args.get("preview") or bulk.new_preview_id()
    if action not in bulk.BULK_ACTIONS or not bulk.valid_preview_id(preview_id):
        abort(400, description="The link does not name a bulk action and its preview.")
    try:
        filters = search_filters.SearchFilters.from_args(request.args)
    except search_filters.InvalidFilter as exc:
        abort(400, description=str(exc))
    used = bulk.confirmation_of(db.session, preview_id, action, since=utcnow() - BULK_USE_LOOKBACK)
    if used is not None:
        return _render_bulk(action, filters, confirmation=used)
    return _render_bulk(action, filters, preview_id=preview_id)


def _render_bulk(
    action: str,
    filters: search_filters.SearchFilters,
    *,
    preview_id: str | None = None,
    confirmation: bulk.BulkConfirmation | None = None,
    error: str | None = None,
    status_code: int = 200,
):
    """The preview page with a fresh one-use confirmation, or the confirmation that used it."""
    context = dict(action=action, filters=filters, confirmation=confirmation, error=error)
    if confirmation is None:
        preview = bulk.preview_bulk(db.session, filters, action)
        token = security.signed_token(
            {
                "preview": preview_id or bulk.new_preview_id(),
                "action": action,
                "filters": filters.as_args(),
                "max_id": preview.max_id,
                "previewed_at": preview.previewed_at.isoformat(),
                "counted": preview.will_act,
            },
            BULK_TOKEN_PURPOSE,
        )
        context.update(preview=preview, token=token)
    return render_template("intents/bulk.html", **context), status_code


def _previewed_at(raw: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(raw)
    except ValueError:
        abort(400, description="The confirmation lacks the time of its preview.")
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


@bp.post("/bulk")
@role_required(OPERATOR)
def bulk_apply():
    """Act on the previewed intents that did not change since the preview, once."""
    if request.form.get("token"):
        return _confirm_preview(request.form["token"])
    # A confirmation without a preview token (a hand-made request): it acts on the
    # intents unchanged since `previewed_at`, so the same one twice acts once.
    action = request.form.get("action", "")
    max_id = request.form.get("max_id", "")
    if action not in bulk.BULK_ACTIONS or not max_id.isdigit():
        abort(400, description="The confirmation does not name an action and its preview.")
    try:
        filters = search_filters.SearchFilters.from_args(request.form)
    except search_filters.InvalidFilter as exc:
        abort(400, description=str(exc))
    try:
        acted = bulk.apply_bulk(
            db.session,
            filters,
            action,
            actor=current_user.username,
            reason=request.form.get("reason", ""),
            max_id=int(max_id),
            previewed_at=_previewed_at(request.form.get("previewed_at", "")),
        )
    except actions.ActionRefused as exc:
        db.session.rollback()
        return _render_bulk(action, filters, error=str(exc), status_code=422)
    return _finish_bulk(action, filters, acted)


def _confirm_preview(token: str):
    """Do what the preview of `token` counted, unless that preview was confirmed already."""
    try:
        signed = security.read_signed_token(
            token, BULK_TOKEN_PURPOSE, max_age_seconds=BULK_TOKEN_MAX_AGE_SECONDS
        )
        action, preview_id = signed["action"], signed["preview"]
        filters = search_filters.SearchFilters.from_args(signed["filters"])
        previewed_at = dt.datetime.fromisoformat(signed["previewed_at"])
    except security.TokenRefused as exc:
        action = request.form.get("action", "")
        if action not in bulk.BULK_ACTIONS:
            abort(400, description=f"The confirmation's preview is {exc}.")
        try:
            filters = search_filters.SearchFilters.from_args(request.form)
        except search_filters.InvalidFilter as invalid:
            abort(400, description=str(invalid))
        message = f"This confirmation's preview is {exc}: nothing was done. Here is a new one."
        return _render_bulk(action, filters, error=message, status_code=409)
    used = bulk.confirmation_of(db.session, preview_id, action, since=previewed_at)
    if used is not None:
        return _render_bulk(action, filters, confirmation=used, status_code=409)
    try:
        acted = bulk.apply_bulk(
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
        db.session.rollback()
        return _render_bulk(action, filters, preview_id=preview_id, error=str(exc), status_code=422)
    if acted == 0:  # a twin of this confirmation may have acted a moment before
        used = bulk.confirmation_of(db.session, preview_id, action, since=previewed_at)
        if used is not None:
            db.session.rollback()
            return _render_bulk(action, filters, confirmation=used, status_code=409)
    left = signed.get("counted", acted) - acted
    return _finish_bulk(action, filters, acted, changed_since_preview=max(left, 0))


def _finish_bulk(
    action: str, filters: search_filters.SearchFilters, acted: int, changed_since_preview: int = 0
):
    db.session.commit()
    if acted and action == "requeue":
        wakeup.notify()
    flash(_BULK_DONE[action].format(acted), "success")
    if changed_since_preview:
        flash(
            f"{changed_since_preview} of the intents the preview counted changed since "
            "and were left as they are.",
            "warning",
        )
    return redirect(url_for("intents.search", **filters.as_args()), code=303)


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
