"""Email template folders written in the shipped layout, for tests of the template catalog."""

from __future__ import annotations

import json

BULK_HOLD = 'current_version = 1\nlane = "bulk"\nambiguity = "hold"\n'


def write_template(root, name, *, settings=BULK_HOLD, subject="Hello {{ name }}",
                   body="Hi {{ name }}\n", example=None, html=None):  # fmt: skip
    """Write one template folder in the shipped layout; return its folder."""
    folder = root / name
    (folder / "v1").mkdir(parents=True)
    (folder / "settings.toml").write_text(settings)
    (folder / "v1" / "subject.txt").write_text(subject)
    (folder / "v1" / "body.txt").write_text(body)
    if html is not None:
        (folder / "v1" / "body.html").write_text(html)
    params = {"name": "Ada"} if example is None else example
    (folder / "example.json").write_text(json.dumps(params))
    return folder
