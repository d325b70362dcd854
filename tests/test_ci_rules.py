"""The suite's own rules (tests/conftest.py), run on a tiny suite in a subprocess.

- Without torch, a test marked `torch` is skipped with the reason that says how to install it (the quick
  loop, `python -m pytest -q -m "not browser"`, runs without torch);
- under CI=true any skipped test fails the run, unless it carries the `gpu` marker (a CUDA GPU is the only
  thing CI may lack): so CI, which installs torch, fails if a torch test is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SUITE = '''
import pytest

@pytest.mark.torch
def test_needs_torch():
    import torch  # noqa: F401

@pytest.mark.gpu
def test_needs_a_gpu():
    pytest.skip("no CUDA GPU")

def test_plain():
    assert 2 + 2 == 4
'''


def _run(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    # sys.modules["torch"] = None: importlib.util.find_spec("torch") is None, as on a machine without torch
    future = "from __future__ import annotations\n"
    conftest = conftest.replace(future, future + "import sys\nsys.modules['torch'] = None\n", 1)
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_tiny.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    torch: t\n    gpu: g\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": "true"} if ci else {})
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_without_torch_a_torch_test_is_skipped_with_the_install_line(tmp_path: Path) -> None:
    done = _run(tmp_path, ci=False)
    assert done.returncode == 0, done.stdout
    assert "1 passed, 2 skipped" in done.stdout
    assert "needs torch: pip install -e '.[torch]' (torch==2.13.0)" in done.stdout


def test_under_ci_a_skipped_torch_test_fails_the_run_and_a_gpu_skip_does_not(tmp_path: Path) -> None:
    done = _run(tmp_path, ci=True)
    assert done.returncode == 1
    assert "tests without the gpu marker were skipped" in done.stdout
    listed = done.stdout.split("tests without the gpu marker were skipped", 1)[1]
    assert "test_needs_torch" in listed and "test_needs_a_gpu" not in listed
