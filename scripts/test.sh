#!/usr/bin/env bash
# Installs everything the tests need (Python packages, torch, Debian's chromium) and runs them:
# lint, types, then the whole test suite. README.md and .ci/run call exactly this.
#
# PYTHON picks the interpreter (default: python3 on PATH); everything is installed into it, and the
# script says which it is before it installs anything. torch==2.13.0 comes from whatever index pip is
# configured with (PyPI by default: on Linux x86-64 that wheel carries CUDA libraries); for the
# CPU-only wheel point pip at PyTorch's CPU index first, e.g.
#   PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "scripts/test.sh: no '$PYTHON' on PATH; set PYTHON=/path/to/python3.11 (or newer)" >&2
  exit 1
fi
echo "scripts/test.sh: installing into and testing with $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
if [[ ! -x /usr/bin/chromium ]]; then
  # another apt (unattended upgrades at boot) may hold a lock: wait for it, up to about 5 minutes, rather
  # than fail. DPkg::Lock::Timeout waits on dpkg's lock; the lists' lock (apt-get update) is retried here.
  apt_get() {
    local err deadline=$((SECONDS + 300))
    while true; do
      if err=$(DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=60 "$@" 2>&1 >/dev/null); then
        return 0
      fi
      grep -qiE 'could not get lock|unable to lock|is held by' <<<"$err" || { echo "$err" >&2; return 1; }
      if ((SECONDS >= deadline)); then echo "$err" >&2; return 1; fi
      echo "scripts/test.sh: apt is busy (another apt holds its lock); waiting 10 s more" >&2
      sleep 10
    done
  }
  (apt_get update -qq && apt_get install -y -qq chromium) \
    || { echo "scripts/test.sh: could not install Debian's chromium (needed by the browser tests)" >&2; exit 1; }
fi
# every version pinned (scripts/test-pins.txt says why and how to move them)
"$PYTHON" -m pip install -q --disable-pip-version-check -c scripts/test-pins.txt -e '.[test,torch,calibration]'
"$PYTHON" -m ruff check src tests bench
"$PYTHON" -m mypy
"$PYTHON" -m pytest -q "$@"
