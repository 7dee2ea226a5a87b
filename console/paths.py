"""Where the project's non-Python files live."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = PROJECT_ROOT / "templates"
EMAIL_TEMPLATES_DIR = TEMPLATES_DIR / "email"
STATIC_DIR = PROJECT_ROOT / "static"
MIGRATIONS_DIR = PROJECT_ROOT / "migrations"
