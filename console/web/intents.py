"""Search and trace: find intents, read one intent's timeline, and act on it."""

from __future__ import annotations

from flask import Blueprint, Flask, abort, flash, render_template, request
from flask_login import current_user

from console import wakeup
from console.core.asking import provider_that_answers
from console.mail.catalog import default_catalog
from console.mail.render import build_message
from console.mail.template_settings import TemplateError
from console.models import utcnow
from console.ops.jobs import ask_now, provider_asking
from console.store import (
    actions,
    bulk_confirmations,
    delivery_facts,
    intent_actions,
    intent_search,
    reconciliation,
    suppressions,
)
from console.store import intents as attempt_lookup
from console.store.json_values import params_problem
from console.store.sender_rates import RATE_WINDOWS
from console.vocabulary import (
    AMBIGUOUS,
    LANES,
    OPERATOR,
    REQUEUEABLE_STATUSES,
    STATUSES,
    VIEWER,
)
from console.web import (
    action_words,
    forms,
    intent_story,
    intent_timeline,
    intent_waits,
    intents_bulk,
    next_step,
    search_hints,
    security,
)
from console.web.auth import has_role, role_required
from console.web.display import age_words, plural
from console.web.extensions import current_settings, db
from console.words.params import params_problem_words

bp = Blueprint("intents", __name__, url_prefix="/intents")
# the link to an intent's page that shows the preview its POST audited
PREVIEW_TOKEN_PURPOSE = "console.message-preview"
PREVIEW_TOKEN_MAX_AGE_SECONDS = 600.0
ASK_TIMEOUT_SECONDS = 5.0  # an operator waits for the provider's answer
# the search's provider-report filter, as its menu says each
FACT_FILTER_WORDS = {name: name for name in delivery_facts.FACT_FILTERS} | {
    delivery_facts.HARD_BOUNCED: "bounced (permanent)"
}


@bp.get("")
@role_required(VIEWER)
def search():
    error, respelled, closest = None, None, None
    try:
        filters = intent_search.SearchFilters.from_args(request.args)
        page = intent_search.search_intents(db.session, filters, after=request.args.get("after"))
        if not page.rows and filters.q and not request.args.get("after"):
            respelled, closest = search_hints.another_try(db.session, filters)
            if respelled is not None:
                filters, page = respelled.filters, respelled.page
    except intent_search.InvalidFilter as exc:
        error = forms.refusal_words("Search not run", exc)
        filters, page = intent_search.SearchFilters(), intent_search.SearchPage([], None)
    context = dict(
        filters=filters,
        page=page,
        respelled=respelled,
        closest=closest,
        search_formats=search_hints.FORMATS,
        last_attempts=last_attempts([row.id for row in page.rows]),
        now=utcnow(),
        error=error,
        statuses=STATUSES,
        lanes=LANES,
        templates=default_catalog().names(),
        ages=age_words(intent_search.SEARCH_AGES),
        facts=FACT_FILTER_WORDS,
        fact_windows=RATE_WINDOWS,
        preview_id=bulk_confirmations.new_preview_id(),
    )
    if request.htmx and not error:
        return render_template("intents/_rows.html", **context)
    return render_template("intents/search.html", **context), 400 if error else 200


def _detail_or_404(intent_id: int) -> intent_story.IntentDetail:
    detail = intent_story.intent_detail(db.session, intent_id)
    if detail is None:
        abort(404, description=f"There is no intent {intent_id}.")
    return detail


def _render_detail(intent_id: int, status_code: int = 200, **extra):
    detail = _detail_or_404(intent_id)
    intent = detail.intent
    now, step = utcnow(), _next_step(intent)
    context = dict(
        detail=detail,
        intent=intent,
        timeline=intent_timeline.timeline_now(detail),
        waits=intent_waits.waits_for(db.session, intent, now),
        can_act=has_role(OPERATOR),
        requeueable=intent.status in REQUEUEABLE_STATUSES,
        suppression_warning=None,
        version=actions.version_of(intent),
        params_problem=_params_problem(intent),
        step=step,
        requeue_too_late=next_step.too_late_words(step) if step.too_late else None,
        settings_max_age=current_settings().max_age_seconds,
        ask_provider=_provider_to_ask(intent),
        now=now,
    )
    if context["can_act"] and context["requeueable"]:
        if suppressions.is_suppressed(db.session, intent.recipient):
            context["suppression_warning"] = action_words.suppression_warning(intent.recipient)
    context.update(extra)
    return render_template("intents/detail.html", **context), status_code


def _provider_to_ask(intent) -> str | None:
    """The provider an operator may ask about this intent now, if any."""
    if intent.status != AMBIGUOUS or not has_role(OPERATOR):
        return None
    settings = current_settings()
    return provider_that_answers(settings.transport, settings.provider)


def last_attempts(intent_ids: list[int]) -> dict:
    """The last attempt of each intent on the page, by intent id."""
    return attempt_lookup.last_attempts(db.session, intent_ids)


def _template_max_age(template: str) -> float | None:
    """The template's max age in seconds; None without one, or for a template not known."""
    try:
        return default_catalog().settings(template).max_age_seconds
    except TemplateError:
        return None


def _next_step(intent) -> next_step.NextStep:
    settings = current_settings()
    template_max_age = _template_max_age(intent.template)
    return next_step.next_step(
        status=intent.status,
        attempt_count=intent.attempt_count,
        created_at=intent.created_at,
        next_attempt_at=intent.next_attempt_at,
        expires_at=intent.expires_at,
        template=intent.template,
        template_max_age_seconds=template_max_age,
        max_attempts=settings.max_attempts,
        max_age_seconds=settings.max_age_seconds,
        now=utcnow(),
        attempts_granted=intent.attempts_granted,
    )


@bp.get("/<int:intent_id>")
@role_required(VIEWER)
def detail(intent_id: int):
    """The intent's page; with ``?preview=`` (from a preview's POST) its message too."""
    if _preview_allowed(intent_id, request.args.get("preview", "")):
        return _render_detail(intent_id, preview=_preview_of(_detail_or_404(intent_id).intent))
    return _render_detail(intent_id)


def _preview_allowed(intent_id: int, token: str) -> bool:
    """Whether `token` is this operator's fresh, audited preview of this intent."""
    if not token or not has_role(OPERATOR):
        return False
    try:
        signed = security.read_signed_token(
            token, PREVIEW_TOKEN_PURPOSE, max_age_seconds=PREVIEW_TOKEN_MAX_AGE_SECONDS
        )
    except security.TokenRefused:
        return False
    return signed == {"intent": intent_id, "user": current_user.username}


@bp.post("/<int:intent_id>/preview")
@role_required(OPERATOR)
def preview(intent_id: int):
    """Render the message as the worker would build it; the look is audited.

    htmx swaps the rendered message into the page in place (no page of its own to
    reload); a plain form is answered with a 303 to the intent's page carrying a
    short-lived signed link that shows what this POST audited.
    """
    intent = _detail_or_404(intent_id).intent
    preview = _preview_of(intent)
    intent_actions.record_preview(db.session, intent_id, actor=current_user.username)
    db.session.commit()
    if request.htmx:
        return render_template("intents/_preview.html", preview=preview)
    token = security.signed_token(
        {"intent": intent_id, "user": current_user.username}, PREVIEW_TOKEN_PURPOSE
    )
    return forms.redirect_to(
        "intents.detail", intent_id=intent_id, preview=token, _anchor="preview"
    )


def _params_problem(intent) -> str | None:
    """Why the intent's stored params cannot be rendered, in words; None when they can."""
    problem = params_problem(intent.params)
    return None if problem is None else params_problem_words(problem.unreadable, problem.kind)


def _preview_of(intent) -> dict:
    """The message's headers and bodies, or why it cannot be shown."""
    if intent.params_scrubbed_at is not None:
        preview = {"error": "The parameters were scrubbed after the retention period."}
    elif (problem := _params_problem(intent)) is not None:
        preview = {"error": f"The message cannot be rendered: {problem}"}
    else:
        try:
            message = build_message(intent, mail_from=current_settings().mail_from)
            preview = _message_parts(message)
        except TemplateError as exc:
            preview = {"error": f"The message cannot be rendered: {exc}"}
    return preview


def _message_parts(message) -> dict[str, str | None]:
    headers = {name: str(message[name]) for name in ("From", "To", "Subject", "Message-ID")}
    text_part = message.get_body(preferencelist=("plain",))
    html_part = message.get_body(preferencelist=("html",))
    return {
        "headers": headers,
        "text": text_part.get_content() if text_part is not None else None,
        "html": html_part.get_content() if html_part is not None else None,
    }


def _finish_action(
    intent_id: int, result: actions.ActionResult, message: str, warning: str | None = None
):
    db.session.commit()
    if result.wakes_worker:
        wakeup.notify()
    flash(message, "success")
    if warning:
        flash(warning, "warning")
    return forms.redirect_to("intents.detail", intent_id=intent_id)


def _refused(intent_id: int, exc: actions.ActionRefused):
    """A stale action: the page as it is now, with 409; any other refusal: a 303 to it."""
    db.session.rollback()
    _detail_or_404(intent_id)  # no page to go back to: 404
    return forms.stale_or_refused(
        exc,
        "Nothing was done",
        lambda error: _render_detail(intent_id, 409, error=error),
        "intents.detail",
        intent_id=intent_id,
    )


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
    cap = current_settings().max_attempts
    try:
        intent = _refuse_a_requeue_too_late(intent_id)
        more = intent_actions.more_attempts_from(request.form.get("more_attempts"), cap)
        max_age_seconds = _template_max_age(intent.template)
        result = intent_actions.requeue(
            db.session, intent_id, more_attempts=more, attempt_cap=cap,
            max_age_seconds=max_age_seconds, **_action_arguments(),
        )  # fmt: skip
    except actions.ActionRefused as exc:
        return _refused(intent_id, exc)
    given = f", with {plural(more, 'more attempt')}" if more else ""
    warning = action_words.requeue_warning(
        result, recipient=intent.recipient, template=intent.template,
        max_age_seconds=max_age_seconds,
    )  # fmt: skip
    message = f"Requeued: {result.before_status} → pending{given}."
    return _finish_action(intent_id, result, message, warning)


def _refuse_a_requeue_too_late(intent_id: int):
    """A requeue past the template's max age would only expire again: refuse it.

    Returns the intent otherwise.
    """
    intent = _detail_or_404(intent_id).intent
    step = _next_step(intent)
    if step.template_too_late:
        deadline = step.too_late
        raise actions.ActionRefused("requeue_too_late", until=deadline.at, why=deadline.why)
    return intent


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


@bp.post("/<int:intent_id>/ask")
@role_required(OPERATOR)
def ask_provider(intent_id: int):
    """Ask the provider about an ambiguous intent now; its answer does what the job's would."""
    settings = current_settings()
    lookup = provider_asking.lookup_for(settings, timeout_seconds=ASK_TIMEOUT_SECONDS)
    if lookup is None:
        _detail_or_404(intent_id)
        message = "Not asked: the provider this console sends through cannot be asked"
        return forms.refused(message, "intents.detail", intent_id=intent_id)
    try:
        asked = ask_now.ask_now(
            db.session,
            settings,
            lookup,
            default_catalog(),
            intent_id,
            actor=current_user.username,
        )
    except actions.ActionRefused as exc:
        return _refused(intent_id, exc)
    finally:
        lookup.close()
    db.session.commit()
    flash(asked.words, "error" if asked.failed else "success")
    return forms.redirect_to("intents.detail", intent_id=intent_id)


intents_bulk.add_routes(bp)


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
