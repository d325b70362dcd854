"""The analytic core stays free of torch, plotting, numpy and the measurement layer."""

from __future__ import annotations

import subprocess
import sys

CORE = ["roofline", "roofline.units", "roofline.dtypes", "roofline.hardware", "roofline.graph",
        "roofline.kernels", "roofline.analysis", "roofline.explain"]
FORBIDDEN = ["torch", "matplotlib", "plotly", "numpy", "roofline.measure", "roofline.report"]


def test_core_imports_nothing_heavy() -> None:
    code = (f"import sys\nimport {', '.join(CORE)}\n"
            f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\nprint(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"core imported {out}"


def test_models_core_imports_nothing_heavy() -> None:
    code = ("import sys, importlib.util\n"
            "if importlib.util.find_spec('roofline.models'):\n    import roofline.models\n"
            f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\nprint(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"roofline.models imported {out}"


def test_cli_start_imports_nothing_heavy() -> None:
    code = (f"import sys\nimport roofline.cli\nbad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"the CLI imported {out} at start-up"
