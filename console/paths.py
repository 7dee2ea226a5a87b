"""Where the project's non-Python files live.

Two layouts:

- installed wheel: the build puts the top-level ``templates/``, ``static/`` and
  ``migrations/`` inside the package as ``console/_data/<name>`` (see
  ``[tool.hatch.build.targets.wheel.sources]`` in pyproject.toml);
- checkout or editable install: they stay at the repository root, beside the
  ``console`` package.

The package's own ``_data`` directory wins when it exists; a checkout never has
one. Only pathlib here: this module is imported by code that must stay light.
"""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
_INSTALLED_DATA = PACKAGE_DIR / "_data"

# Root of the data directories: console/_data when installed, the repository otherwise.
DATA_ROOT = _INSTALLED_DATA if _INSTALLED_DATA.is_dir() else PACKAGE_DIR.parent
# True when running from an installed wheel (no repository around the package).
INSTALLED = DATA_ROOT == _INSTALLED_DATA
# The repository root in a checkout; in an installed wheel, the data root (there is
# no repository then: do not look for tests/ or pyproject.toml under it).
PROJECT_ROOT = PACKAGE_DIR.parent if not INSTALLED else DATA_ROOT

TEMPLATES_DIR = DATA_ROOT / "templates"
EMAIL_TEMPLATES_DIR = TEMPLATES_DIR / "email"
STATIC_DIR = DATA_ROOT / "static"
MIGRATIONS_DIR = DATA_ROOT / "migrations"


def instance_dir() -> Path:
    """The folder of the default SQLite database and local secret: ``instance/``.

    In a checkout it sits at the repository root (git-ignored); an installed
    wheel has no repository, so it is ``instance/`` in the working directory.
    """
    return (Path.cwd() if INSTALLED else PROJECT_ROOT) / "instance"
