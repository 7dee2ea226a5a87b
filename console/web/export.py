"""Export a search as CSV or JSON Lines: streamed page by page, audited, no content to viewers."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from flask import Blueprint, Flask, Response, abort, request, stream_with_context
from flask_login import current_user

from console.models import utcnow
from console.store import intent_export, intent_search
from console.store.audit import audit_values, write_audit
from console.store.database import make_session_factory
from console.vocabulary import OPERATOR, VIEWER
from console.web import forms
from console.web.auth import has_role, role_required
from console.web.extensions import db

bp = Blueprint("export", __name__, url_prefix="/intents")

CSV_ROWS_PER_CHUNK = 100
# a cell a spreadsheet would run as a formula starts with one of these: it is quoted
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
MEDIA_TYPES = {"csv": "text/csv", "jsonl": "application/x-ndjson"}


@bp.get("/export.csv")
@role_required(VIEWER)
def as_csv():
    """Every intent the search finds, one CSV row each, after a header row."""
    return _export("csv")


@bp.get("/export.jsonl")
@role_required(VIEWER)
def as_jsonl():
    """Every intent the search finds, one JSON object a line."""
    return _export("jsonl")


def _export(export_format: str) -> Response:
    try:
        filters = intent_search.SearchFilters.from_args(request.args)
    except intent_search.InvalidFilter as exc:
        abort(400, description=forms.refusal_words("Export not made", exc))
    with_content = has_role(OPERATOR)
    now = utcnow()
    entry = audit_values(
        actor=current_user.username,
        action="export",
        now=now,
        target=f"{export_format.upper()} of {_described(filters)}"[:320],
        details={
            "format": export_format,
            "filters": filters.as_args(),
            "with_params": with_content,
        },
    )
    write_audit(db.session, [entry])
    db.session.commit()
    rows = intent_export.export_rows(
        make_session_factory(db.engine), filters, with_content=with_content, now=now
    )
    columns = intent_export.export_columns(with_content=with_content)
    body = _csv_chunks(columns, rows) if export_format == "csv" else _json_lines(rows)
    filename = f"intents-{now:%Y%m%d-%H%M%S}.{export_format}"
    response = Response(stream_with_context(body), mimetype=MEDIA_TYPES[export_format])
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def _described(filters: intent_search.SearchFilters) -> str:
    """The search as the audit log says it: "the search “order:100”, status failed"."""
    others = [f"{name} {value}" for name, value in filters.as_args().items() if name != "q"]
    searched = [f"the search “{filters.q}”"] if filters.q else []
    return ", ".join(searched + others) or "everything"


def _csv_chunks(columns: tuple[str, ...], rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    yield _drain(buffer)
    for number, row in enumerate(rows, start=1):
        writer.writerow([_csv_cell(row[column]) for column in columns])
        if number % CSV_ROWS_PER_CHUNK == 0:
            yield _drain(buffer)
    yield _drain(buffer)


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _json_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, default=_json_value, ensure_ascii=False) + "\n"


def _json_value(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    raise TypeError(f"{type(value).__name__} is not exported")


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
