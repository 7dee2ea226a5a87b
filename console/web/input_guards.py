"""Hostile input gets a 4xx that says what is wrong, never a 500, before any view runs.

- ``<int:...>`` in a route takes ASCII digits, 0 to 2**63 - 1 (a BIGINT): anything else
  is 404. A number in a query string or a form is read by console.core.whole_numbers.
- A query string or form value with a NUL or a lone surrogate is refused (400): no
  database stores either, and neither is anything a person typed.
- JSON nested too deeply to parse (Python's recursion limit) is refused (400).
- A value the database refuses as data (too long, out of range, NUL in PostgreSQL
  text) is refused (400), the transaction rolled back: the input was at fault.
"""

from __future__ import annotations

import logging

from flask import Flask, request
from sqlalchemy import exc as sa_exc
from werkzeug.routing import IntegerConverter, ValidationError

from console.core.storable_text import unstorable
from console.core.whole_numbers import ASCII_DIGITS, MAX_BIGINT, whole_number
from console.web.busy import answer
from console.web.extensions import db

log = logging.getLogger(__name__)

MAX_ROUTE_INT = MAX_BIGINT
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class BoundedIntConverter(IntegerConverter):
    """``<int:...>``: ASCII digits up to the largest BIGINT; anything else matches no route."""

    regex = ASCII_DIGITS.pattern

    def to_python(self, value: str) -> int:
        number = whole_number(value, highest=MAX_ROUTE_INT)
        if number is None:
            raise ValidationError()
        return number


def unreadable(text: str) -> bool:
    """Whether `text` holds a NUL or a lone surrogate."""
    return unstorable(text)


def _refuse_unreadable_text():
    values = list(request.args.items(multi=True))
    if request.mimetype in _FORM_TYPES:
        values += list(request.form.items(multi=True))
    for name, value in values:
        if unreadable(name) or unreadable(value):
            where = "a field's name" if unreadable(name) else f"the field {name[:40]!r}"
            message = f"{where} holds a NUL or an invalid character: remove it and try again"
            return answer(400, "Bad Request", message)
    return None


def _refuse_deep_json(error: RecursionError):
    db.session.rollback()
    log.warning("request refused: nested too deeply", extra={"code": 400})
    return answer(400, "Bad Request", "the body is nested too deeply to be read")


def _refuse_bad_data(error: sa_exc.DataError):
    db.session.rollback()
    cause = getattr(error, "orig", None) or error
    log.warning(
        "request refused: the database refuses a value as data",
        extra={"code": 400, "error_type": type(cause).__name__, "target": request.endpoint},
    )
    message = "a value is too long, out of range or holds a character that cannot be stored"
    return answer(400, "Bad Request", message)


def install_converters(app: Flask) -> None:
    """Bound ``<int:...>``; call before any blueprint is registered."""
    app.url_map.converters["int"] = BoundedIntConverter


def init_app(app: Flask) -> None:
    """Refuse unreadable text before the views, and data errors after them, with 400."""
    app.before_request(_refuse_unreadable_text)
    app.register_error_handler(RecursionError, _refuse_deep_json)
    app.register_error_handler(sa_exc.DataError, _refuse_bad_data)
