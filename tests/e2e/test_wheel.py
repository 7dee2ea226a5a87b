"""The built wheel, installed into a fresh virtualenv, works from an empty directory.

Builds the wheel from this checkout, installs it (with its dependencies from the
package index) into a virtualenv in a temporary directory outside the repository,
and drives the installed ``console`` command and package from an empty working
directory with no PYTHONPATH: the migrations, templates and static files must
come from the wheel, not from the checkout.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PARAMS = REPO / "templates" / "email" / "order-confirmation" / "example.json"
ADMIN = "wheel-admin"
PASSWORD = "wheel-admin-password-1"
BUILD_TIMEOUT = 300
INSTALL_TIMEOUT = 900
COMMAND_TIMEOUT = 120
SERVER_START_TIMEOUT = 60


def _check(result: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert result.returncode == 0, (
        f"{what} exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
    )
    return result


def _run(args, *, what, timeout=COMMAND_TIMEOUT, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    return _check(result, what)


class Installed:
    """A virtualenv holding the installed wheel, and an empty directory to run in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.venv = root / "venv"
        self.bin = self.venv / "bin"
        self.python = self.bin / "python"
        self.console = self.bin / "console"
        self.workdir = root / "cwd"
        self.database_url = f"sqlite:///{root / 'data' / 'console.db'}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a command: nothing from the checkout, the test's database."""
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("CONSOLE_", "FLASK_"))
            and name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
        }
        env.update(
            PATH=f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            VIRTUAL_ENV=str(self.venv),
            PYTHONNOUSERSITE="1",
            CONSOLE_DATABASE_URL=self.database_url,
            CONSOLE_SECRET_KEY="wheel-test-secret-key" * 2,
        )
        env.update(extra)
        return env

    def run(self, args, *, what, **kwargs) -> subprocess.CompletedProcess:
        return _run(args, what=what, cwd=self.workdir, env=self.env(), **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """Build the wheel, install it into a fresh virtualenv outside the repository."""
    root = tmp_path_factory.mktemp("wheel-install")
    assert REPO not in root.resolve().parents, "the install must live outside the repository"
    wheel_dir = root / "wheel"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheel_dir), str(REPO)],
        what="building the wheel",
        timeout=BUILD_TIMEOUT,
        cwd=root,
    )
    (wheel,) = wheel_dir.glob("outbox_console-*.whl")

    installed = Installed(root)
    installed.workdir.mkdir()
    (root / "data").mkdir()
    _run([sys.executable, "-m", "venv", str(installed.venv)], what="creating the venv", cwd=root)
    _run(
        [
            str(installed.python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            str(wheel),
        ],
        what="installing the wheel",
        timeout=INSTALL_TIMEOUT,
        cwd=root,
        env=installed.env(),
    )
    return installed


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_serving(process: subprocess.Popen, base_url: str, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"console serve exited {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=2).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(
        f"console serve did not answer in {SERVER_START_TIMEOUT} s:\n{log.read_text()[-4000:]}"
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


ENQUEUE_SCRIPT = """
import json, sys
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session
import console.outbox
from console.models import Intent

url, key, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
engine = create_engine(url)
with Session(engine) as session:
    intent = console.outbox.enqueue(
        session, key=key, to="zoe@example.com", template="order-confirmation", params=params
    )
    session.commit()
    intent_id = intent.id
with Session(engine) as session:
    row = session.execute(select(Intent).where(Intent.idempotency_key == key)).scalar_one()
    print(json.dumps({"id": row.id, "message_id": row.message_id, "template": row.template,
                      "status": row.status, "file": console.outbox.__file__}))
    assert row.id == intent_id
"""

NO_FLASK_SCRIPT = """
import json, sys
import console.outbox
print(json.dumps(sorted(m for m in sys.modules if m == "flask" or m.startswith("flask."))))
"""


def test_installed_wheel_upgrades_serves_and_enqueues(installed: Installed):
    installed.run([str(installed.console), "db", "upgrade"], what="console db upgrade")
    installed.run(
        [str(installed.console), "user", "create", ADMIN, "--role", "admin", "--password-stdin"],
        what="console user create",
        input=PASSWORD + "\n",
    )

    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = installed.root / "serve.log"
    with log.open("wb") as log_file:
        server = subprocess.Popen(
            [str(installed.console), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=installed.workdir,
            env=installed.env(),
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_until_serving(server, base_url, log)
        with httpx.Client(base_url=base_url, timeout=15) as client:
            login_page = client.get("/login")
            assert login_page.status_code == 200, login_page.text[:2000]
            token = re.search(r'name="csrf_token" value="([^"]+)"', login_page.text)
            assert token, f"no csrf_token on /login:\n{login_page.text[:2000]}"
            answer = client.post(
                "/login",
                data={"username": ADMIN, "password": PASSWORD, "csrf_token": token.group(1)},
            )
            assert answer.status_code in (302, 303), answer.text[:2000]

            dashboard = client.get("/")
            assert dashboard.status_code == 200, dashboard.text[:2000]
            assert 'rel="stylesheet" href="/static/console.css' in dashboard.text
            assert 'id="counts"' in dashboard.text and "pending" in dashboard.text

            htmx = client.get("/static/htmx.min.js")
            assert htmx.status_code == 200
            assert len(htmx.content) > 10_000 and b"htmx" in htmx.content

            key = "order-wheel-1"
            params = json.loads(EXAMPLE_PARAMS.read_text(encoding="utf-8"))
            result = installed.run(
                [
                    str(installed.python),
                    "-c",
                    ENQUEUE_SCRIPT,
                    installed.database_url,
                    key,
                    json.dumps(params),
                ],
                what="enqueue from a plain SQLAlchemy session",
            )
            row = json.loads(result.stdout.strip().splitlines()[-1])
            assert row["template"] == "order-confirmation"
            assert re.fullmatch(r"<[^<>@]+@[^<>@]+>", row["message_id"]), row
            assert str(installed.venv) in row["file"], f"imported from the checkout: {row}"

            search = client.get("/intents", params={"q": key})
            assert search.status_code == 200, search.text[:2000]
            assert key in search.text

            detail = client.get(f"/intents/{row['id']}")
            assert detail.status_code == 200, detail.text[:2000]
            assert key in detail.text
    finally:
        _stop(server)
    assert not any(installed.workdir.iterdir()), "the console wrote into the working directory"


def test_installed_outbox_imports_no_flask(installed: Installed):
    result = installed.run([str(installed.python), "-c", NO_FLASK_SCRIPT], what="import outbox")
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded == [], f"import console.outbox loaded {loaded}"


def test_installed_console_keeps_its_default_database_in_instance_of_the_working_directory(
    installed: Installed, tmp_path: Path
):
    env = installed.env()
    del env["CONSOLE_DATABASE_URL"], env["CONSOLE_SECRET_KEY"]
    _run([str(installed.console), "db", "upgrade"], what="db upgrade", cwd=tmp_path, env=env)
    assert (tmp_path / "instance" / "console.db").is_file()
    assert (tmp_path / "instance" / "secret_key").is_file()
