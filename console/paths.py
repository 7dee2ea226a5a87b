"""Where the project's non-Python files live.

Two layouts:

- installed wheel: the build puts the top-level ``templates/``, ``static/`` and
  ``migrations/`` inside the package as ``console/_data/<name>`` (see
  ``[tool.hatch.build.targets.wheel.sources]`` in pyproject.toml);
- checkout or editable install: they stay at the repository root, beside the
  ``console`` package.

The package's own ``_data`` directory wins when it exists; a checkout never has
one. Only the standard library and ``console.core.setting_values`` (``ConfigError``) here:
code that must stay light imports this module.

The private files of the instance (the SQLite database, the generated secret key) are
created mode 0600 from the first byte and refused when readable by others.
"""

import logging
import os
import secrets
from pathlib import Path

from console.core.setting_values import ConfigError

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


# --- private files: created mode 0600 from the first byte, refused when readable by others.

log = logging.getLogger(__name__)

MIN_SECRET_KEY_LENGTH = 32
KEY_FILE_NAME = "secret_key"
_FIX_KEY = "generate one with: python -c 'import secrets; print(secrets.token_hex(32))'"


def create_private_file(path: Path, content: bytes = b"") -> bool:
    """Create `path` readable by its owner only (whatever the umask); False if it exists."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(content)
    return True


def check_not_shared(path: Path, what: str) -> None:
    """Refuse (ConfigError) a file that its group or other users may read or write."""
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise ConfigError(
            f"{what} {str(path)!r} is readable by other users (mode {mode:04o}): "
            f"run 'chmod 600 {path}' and start again"
        )


def secret_key_setting(name: str, raw: str) -> str:
    """Parse CONSOLE_SECRET_KEY: at least MIN_SECRET_KEY_LENGTH characters."""
    value = raw.strip()
    if len(value) < MIN_SECRET_KEY_LENGTH:
        raise ConfigError(
            f"{name} must be at least {MIN_SECRET_KEY_LENGTH} characters, got {len(value)}: "
            + _FIX_KEY
        )
    return value


def persisted_secret(instance_path: Path) -> str:
    """Read the local secret key from the instance folder, creating it (0600) once."""
    key_file = instance_path / KEY_FILE_NAME
    instance_path.mkdir(parents=True, exist_ok=True)
    if not key_file.exists():
        # written whole under a private name, then linked: a process starting at the same
        # moment sees no file or the whole key, never a half-written one
        draft = instance_path / f".{KEY_FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        create_private_file(draft, (secrets.token_hex(32) + "\n").encode())
        try:
            os.link(draft, key_file)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    check_not_shared(key_file, "the secret key file")
    key = key_file.read_text().strip()
    if len(key) < MIN_SECRET_KEY_LENGTH:
        raise ConfigError(
            f"the secret key in {str(key_file)!r} is shorter than {MIN_SECRET_KEY_LENGTH} "
            f"characters: delete the file to have a new one generated, or {_FIX_KEY}"
        )
    return key


_PROCESS_KEYS: set[str] = set()  # keys made for this process only, not kept anywhere


def default_secret(instance_path: Path | None) -> str:
    """The key without CONSOLE_SECRET_KEY: kept in `instance_path`, or this process's own."""
    if instance_path is not None:
        return persisted_secret(instance_path)
    key = secrets.token_hex(32)
    _PROCESS_KEYS.add(key)
    return key


def warn_if_process_key(key: str) -> None:
    """Warn, where sessions are signed, that `key` is this process's own and dies with it."""
    if key in _PROCESS_KEYS:
        log.warning(
            "CONSOLE_SECRET_KEY is not set: using a random key for this process only; "
            "sessions will not survive a restart or be shared between processes"
        )
