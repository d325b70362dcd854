#!/usr/bin/env bash
# Installs everything the tests need (Python packages, torch CPU, Debian's chromium) and runs them:
# lint, types, then the whole test suite. README.md and .ci/run call exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -x /usr/bin/chromium ]]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || { echo "scripts/test.sh: could not install Debian's chromium (needed by the browser tests)" >&2; exit 1; }
fi
python -m pip install -q --disable-pip-version-check -e '.[test,torch]'
python -m ruff check src tests bench
python -m mypy
python -m pytest -q "$@"
