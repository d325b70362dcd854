"""scripts/test.sh (what CI runs), run against fake tools: it names the python it uses and uses it for
everything, and it waits for the apt lock instead of failing on it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _fake(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)
    return path


def test_test_sh_names_its_python_and_uses_it_for_everything(tmp_path: Path) -> None:
    log = tmp_path / "log"
    python = _fake(tmp_path, "python-under-test", f'if [[ "$1" == -c ]]; then echo "{tmp_path}/python-under-test '
                                                  f'3.11.9"; exit 0; fi\necho "$*" >> {log}\n')
    _fake(tmp_path, "apt-get", f'echo "apt-get $*" >> {log}\n')
    env = {**os.environ, "PYTHON": str(python), "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh"), "-k", "nothing"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (f"scripts/test.sh: installing into and testing with "
                                           f"{tmp_path}/python-under-test 3.11.9")
    calls = [ln for ln in log.read_text().splitlines() if not ln.startswith("apt-get")]
    assert calls == ["-m pip install -q --disable-pip-version-check -c scripts/test-pins.txt "
                     "-e .[test,torch,calibration]",
                     "-m ruff check src tests bench", "-m mypy", "-m pytest -q -k nothing"]
    missing = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh")], capture_output=True, text=True,
                             env={**os.environ, "PYTHON": "no-such-python"}, timeout=60)
    assert missing.returncode == 1 and "no 'no-such-python' on PATH" in missing.stderr
    assert 'PYTHON="${PYTHON:-python3}"' in (ROOT / "scripts" / "test.sh").read_text()


def test_test_sh_waits_for_the_apt_lock(tmp_path: Path) -> None:
    # the script's apt_get, with apt-get failing on a held lock twice, then succeeding; sleep stubbed out
    script = (ROOT / "scripts" / "test.sh").read_text()
    function = script[script.index("  apt_get() {"):script.index("\n  }\n") + 4]
    assert "DPkg::Lock::Timeout=" in function and "SECONDS + 300" in function  # bounded: about 5 minutes
    count = tmp_path / "count"
    _fake(tmp_path, "apt-get", f'n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}\n'
                               'if ((n < 2)); then echo "E: Could not get lock /var/lib/apt/lists/lock. It is held '
                               'by process 7 (apt-get)" >&2; exit 100; fi\n')
    body = f"sleep() {{ :; }}\n{function}\napt_get update -qq\n"
    done = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert done.returncode == 0 and count.read_text().strip() == "3"  # two refusals, then it ran
    assert done.stderr.count("apt is busy") == 2
    # another failure (no network) is not waited on: one try, its message, exit 1
    count.unlink()
    _fake(tmp_path, "apt-get", f'echo 1 >> {count}; echo "E: Failed to fetch" >&2; exit 100\n')
    done = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert done.returncode == 1 and "Failed to fetch" in done.stderr and count.read_text() == "1\n"
