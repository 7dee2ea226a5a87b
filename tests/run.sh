#!/usr/bin/env bash
# Install what the test suite needs on Debian (as root) and run all of it.
# Extra arguments go to pytest, e.g. `bash tests/run.sh -k enqueue`.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing with apt: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[test]'

ruff check console tests
ruff format --check console tests

python3 -m pytest --durations=15 "$@"
