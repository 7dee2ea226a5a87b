#!/usr/bin/env bash
# Install what the test suite needs on Debian (as root) and run all of it.
# Extra arguments go to pytest, e.g. `bash tests/run.sh -k enqueue`.
# Python packages go into .venv in the repository (Debian's system Python
# refuses `pip install` outside a virtualenv: externally-managed-environment).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ! -x "$VENV/bin/python" ] && ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
    missing+=(python3-venv)  # `python3 -m venv` needs ensurepip, which Debian ships apart
fi
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing with apt: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# A real Postfix relay for tests/e2e/test_postfix.py ("Local only", no prompt; the test
# runs a private instance of its own and never starts the machine's). Where it cannot be
# installed those tests skip, unless CONSOLE_TEST_REQUIRE_POSTFIX=1 (.ci/run).
if [ ! -x /usr/sbin/postfix ]; then
    echo "installing with apt: postfix"
    echo "postfix postfix/main_mailer_type select Local only" | debconf-set-selections || true
    echo "postfix postfix/mailname string localhost.localdomain" | debconf-set-selections || true
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 600 \
        apt-get install -y -qq postfix >/dev/null; } || echo "postfix could not be installed"
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "creating $VENV"
    python3 -m venv "$VENV"
fi

"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'

"$VENV/bin/ruff" check console tests
"$VENV/bin/ruff" format --check console tests

# Most of the suite in two processes (each with its own PostgreSQL cluster), then the
# tests marked `serial` (rates and latencies) alone. pytest exits
# with status 5 when a part selects no test (e.g. `bash tests/run.sh tests/unit`).
status=0
"$VENV/bin/python" -m pytest -n "${CONSOLE_TEST_PROCESSES:-2}" --dist loadfile -m "not serial" \
    --durations=15 "$@" || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then
    exit "$status"
fi
serial_status=0
"$VENV/bin/python" -m pytest -m serial --durations=10 "$@" || serial_status=$?
if [ "$serial_status" -eq 5 ] && [ "$status" -eq 5 ]; then
    exit 5  # neither part selected a test
fi
if [ "$serial_status" -ne 0 ] && [ "$serial_status" -ne 5 ]; then
    exit "$serial_status"
fi
