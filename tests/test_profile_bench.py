"""bench/profile_check.py on the CPU: the predicted-vs-measured report that bench/gpu_check.py runs on a GPU
(a small Llama-style step under torch.profiler, each kernel's floor beside its measured time, MAPE by kind)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from profile_check import profile_report, report_lines


def test_profile_report_on_cpu_gives_mape_by_kind() -> None:
    r = profile_report("cpu")
    kernels = r["kernels"]
    # the tests' TinyLlama fuses as engines do: per layer qkv, o, gate_up, down; plus the LM head: 2·4 + 1
    assert r["kernels_by_kind"]["matmul"] == 2 * 4 + 1
    assert r["kernels_by_kind"]["attention"] == 2  # one fused attention per layer
    for k in kernels:
        assert k["measured_s"] > 0 and k["floor_s"] > 0
        # the floor is a lower bound: below the roof the error is 1 − share, in [0, 1)
        assert k["above_roof"] or 0 <= k["error"] < 1
    for kind, mape in r["mape_by_kind"].items():
        errors = [k["error"] for k in kernels if k["family"] == kind]
        assert mape == pytest.approx(statistics.fmean(errors))  # the mean of the kind's errors
    text = "\n".join(report_lines(r))
    assert "MAPE by kind" in text and "matmul" in text
