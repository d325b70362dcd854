"""Bench kernels under the roof and the accuracy report.

The accuracy arithmetic is checked on constructed placements (exact values); real kernels run at
tiny sizes and are checked against bounds: under a deliberately generous roof nothing may land
above it, under a deliberately mean one everything must be flagged.
"""

from __future__ import annotations

import json

import pytest

from roofline.cli import main
from roofline.hardware import Machine, MemoryLevel
from roofline.measure.accuracy import Accuracy
from roofline.placement import place_flop_bytes
from roofline.report.text.accuracy import accuracy_table
from roofline.vocab import Bound, Level


def _machine(bytes_per_s: float, flop_per_s: float) -> Machine:
    return Machine("test-roof", "test roof", {"fp32": flop_per_s}, {Level.DRAM: MemoryLevel(Level.DRAM, bytes_per_s)},
                   kind="cpu", measured=True)


ROOF = _machine(100e9, 1e12)  # 100 GB/s, 1 TFLOP/s fp32: ridge 10 FLOP/B


def test_accuracy_summary_arithmetic() -> None:
    # memory-bound: 1e6 FLOP over 1e8 B -> floor 1e8 / 100e9 = 1 ms; measured 1.1 ms -> 1/1.1 = 91%
    mem = place_flop_bytes(1e6, 1e8, ROOF, "fp32", name="norm").with_measured(1.1e-3)
    # compute-bound: 2e9 FLOP over 1e6 B -> floor 2e9 / 1e12 = 2 ms; measured 2.5 ms -> 80%; 4 ms -> 50%
    mm = place_flop_bytes(2e9, 1e6, ROOF, "fp32", name="mm").with_measured(2.5e-3)
    slow = place_flop_bytes(2e9, 1e6, ROOF, "fp32", name="slow mm").with_measured(4e-3)
    # faster than its floor: 1 ms floor measured in 0.5 ms -> 200%, an error to flag
    fast = place_flop_bytes(1e6, 1e8, ROOF, "fp32", name="too fast").with_measured(0.5e-3)
    unmeasured = place_flop_bytes(1e6, 1e8, ROOF, "fp32", name="unmeasured")
    acc = Accuracy.of([mem, mm, slow, fast, unmeasured])
    assert len(acc.placements) == 4
    assert acc.median_fraction(Bound.MEMORY) == pytest.approx((1 / 1.1 + 2.0) / 2)
    assert acc.median_fraction(Bound.COMPUTE) == pytest.approx((0.8 + 0.5) / 2)
    assert [p.name for p in acc.worst(2)] == ["slow mm", "mm"]
    assert [p.name for p in acc.above_roof] == ["too fast"]
    text = "\n".join(acc.lines())
    assert "too fast" in text and "ABOVE THE ROOF" in text
    table = accuracy_table([mm, fast, unmeasured])
    assert "80%" in table and "ABOVE ROOF" in table and "200%" in table
    assert acc.to_dict()["above_roof"] == ["too fast"]
    assert json.loads(json.dumps(acc.to_dict()))["kernels"] == {"memory": 2, "compute": 2}


def test_above_the_roof_starts_just_past_the_floor() -> None:
    # floor 1e8 B / 100 GB/s = 1 ms. Measured exactly at the floor: 100% of the roof, not above it.
    # Measured 5% faster (1 ms / 1.05): 105% of the roof, above it (a 110% threshold would miss it).
    at = place_flop_bytes(1e6, 1e8, ROOF, "fp32", name="at the floor")
    assert at.time_s == pytest.approx(1e-3)
    at = at.with_measured(at.time_s)
    faster = place_flop_bytes(1e6, 1e8, ROOF, "fp32", name="5% faster")
    faster = faster.with_measured(faster.time_s / 1.05)
    assert at.fraction_of_roof == 1.0 and not at.above_roof
    assert faster.fraction_of_roof == pytest.approx(1.05) and faster.above_roof
    acc = Accuracy.of([at, faster])
    assert [p.name for p in acc.above_roof] == ["5% faster"]
    assert sum("ABOVE THE ROOF" in line for line in acc.lines()) == 1
    table = accuracy_table([at, faster])
    assert table.count("ABOVE ROOF") == 1 and "105%" in table and "100%" in table


torch = pytest.importorskip("torch")

from roofline.measure.bench import Sizes, cases, run_bench  # noqa: E402


def test_cases_predict_with_the_analytic_conventions() -> None:
    s = Sizes.tiny()
    by_name = {c.name.split(" ")[0] + (" " + c.name.split(" ")[1] if c.name.startswith("attention") else ""): c
               for c in cases(s, "fp32", "cpu")}
    add = by_name["add"].kernel
    assert add.flop == s.rows * s.cols and add.bytes == 3 * s.rows * s.cols * 4  # a + b -> out, fp32
    rms = by_name["rmsnorm"].kernel
    assert rms.flop == 6 * s.rows * s.cols  # FLOP_PER_ELEMENT["rmsnorm"]
    b, h, n, d = s.attn_batch, s.attn_heads, s.attn_seq, s.head_dim
    naive = [c for c in cases(s, "fp32", "cpu", ["attention naive"])]
    assert naive[0].kernel.flop == 2 * b * h * n * n * d  # q·kᵀ
    assert naive[0].kernel.bytes == (2 * b * h * n * d + b * h * n * n) * 4  # q, k read; scores written
    fused = cases(s, "fp32", "cpu", ["attention fused"])[0].kernel
    assert fused.bytes == 4 * b * h * n * d * 4  # q, k, v, o only
    assert fused.flop == 4 * b * h * n * n * d + 5 * b * h * n * n


def test_real_kernels_under_a_generous_roof_are_below_it() -> None:
    generous = _machine(1e15, 1e17)  # far beyond any CPU: every real kernel is far below this roof
    results = run_bench(generous, sizes=Sizes.tiny(), repeats=3)
    assert len(results) == 11
    for r in results:
        p = r.placement
        assert p.measured_time_s == r.timing.median_s
        assert 0 < (p.fraction_of_roof or 0) < 1 and not p.above_roof


def test_real_kernels_under_a_mean_roof_are_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    mean = _machine(1e6, 1e6)  # 1 MB/s, 1 MFLOP/s: nothing real is this slow
    results = run_bench(mean, sizes=Sizes.tiny(), repeats=3, only=["add", "matmul 256"])
    assert [r.placement.above_roof for r in results] == [True, True]
    assert len(Accuracy.of([r.placement for r in results]).above_roof) == 2


def test_bench_cli_json_on_a_catalog_roof(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--machine", "h100", "--dtype", "fp16", "--only", "add", "--repeats", "3",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (k,) = out["kernels"]
    assert k["name"].startswith("add") and k["bound_class"] == "memory" and k["machine"] == "h100-sxm"
    assert 0 < k["fraction_of_roof"] < 1  # an H100's 3.35 TB/s is far above this CPU's bandwidth
    assert out["summary"]["above_roof"] == []


def test_bench_cli_flags_points_above_the_roof(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    from roofline.fileio import atomic_write
    from roofline.hardware import machine_to_toml

    path = Path(str(tmp_path)) / "slow.toml"
    atomic_write(path, machine_to_toml(_machine(1e6, 1e6)))
    assert main(["bench", "--quick", "--machine", str(path), "--only", "add", "--repeats", "3"]) == 0
    captured = capsys.readouterr()
    assert "ABOVE ROOF" in captured.out and "ABOVE its roof" in captured.err


def test_bench_unknown_case_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--machine", "h100", "--dtype", "fp16", "--only", "conv"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no bench case" in err
