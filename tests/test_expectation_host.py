"""The expected-time model's host floor (roofline.expectation.model, Fit.host_s) and its fit
(roofline.calibration.fit.host_fit), by hand on synthetic sets whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.calibration.fit import fit_kind
from roofline.expectation.model import Columns, Fit, Shape, expected_columns, host_path

# H200 vLLM 0.24.0 block-scaled FP8 GEMM (aiconfigurator-core 0.12.0, h200_sxm/gemm/vllm/0.24.0): its rows'
# kernel_source is CutlassFp8BlockScaledMMKernel where k % 128 or n % 64 (1792×16384×32), FlashInfer's at
# m <= 17 (5×12288×5120), DeepGEMM's otherwise (1024×2560×12288)
PATHS = (("deepgemm", 88.6e-6), ("small_m", 59.4e-6), ("cutlass", 177.8e-6))


def _gemm(m: int, n: int, k: int, floor_us: float) -> Shape:
    return Shape("gemm.fp8_block", floor_us * 1e-6, 0.0, m, n, 132, memory_s=floor_us * 1e-6, k=k)


def test_the_launch_path_of_a_block_scaled_gemm() -> None:
    assert host_path(1792, 16384, 32) == "cutlass"  # k = 32 is not a multiple of 128
    assert host_path(1024, 32, 4096) == "cutlass"  # n = 32 is not a multiple of 64
    assert host_path(5, 12288, 5120) == "small_m"  # m = 5 <= 17: FlashInfer's on Hopper
    assert host_path(1024, 2560, 12288) == "deepgemm"
    assert host_path(1024, 2560, 0) == "any"  # no depth known: no path


def test_the_host_floor_by_hand() -> None:
    # e = 1, t0 = 21.5 µs: the device's sum is floor + 21.5 µs; t = max(h of the path, that sum)
    fit = Fit("gemm.fp8_block", 1.0, 21.5e-6, 1.0, 1.0, 1, host_floors=PATHS)
    # 1024×2560×12288, a 32.6 µs floor (measured 88.8 µs): the sum 54.1 µs is below DeepGEMM's 88.6 µs floor
    assert fit.expected_s(_gemm(1024, 2560, 12288, 32.6)) == pytest.approx(88.6e-6, rel=1e-12)
    # 5×12288×5120, 13.1 µs (measured 61.2 µs): the sum 34.6 µs below FlashInfer's 59.4 µs
    assert fit.expected_s(_gemm(5, 12288, 5120, 13.1)) == pytest.approx(59.4e-6, rel=1e-12)
    # 1792×16384×32, 12.4 µs (measured 173 µs): CUTLASS's 177.8 µs
    assert fit.expected_s(_gemm(1792, 16384, 32, 12.4)) == pytest.approx(177.8e-6, rel=1e-12)
    # 2048×51200×51200, 5426 µs: the device sets it, 5426 + 21.5 = 5447.5 µs
    assert fit.expected_s(_gemm(2048, 51200, 51200, 5426.0)) == pytest.approx(5447.5e-6, rel=1e-12)
    # no depth (a kernel whose k is unknown): the path of most rows, fitted first (DeepGEMM's)
    assert fit.expected_s(_gemm(1024, 2560, 0, 32.6)) == pytest.approx(88.6e-6, rel=1e-12)
    # one floor for every path: 40 µs
    one = Fit("gemm.fp8", 1.0, 0.0, 1.0, 1.0, 1, host_floors=(("any", 40e-6),))
    assert one.expected_s(_gemm(5, 12288, 5120, 13.1)) == pytest.approx(40e-6, rel=1e-12)


def test_the_columns_take_the_same_host_floor() -> None:
    fit = Fit("gemm.fp8_block", 1.0, 21.5e-6, 0.9, 1.2, 1, host_floors=PATHS)
    shapes = [_gemm(1024, 2560, 12288, 32.6), _gemm(5, 12288, 5120, 13.1), _gemm(1792, 16384, 32, 12.4),
              _gemm(2048, 51200, 51200, 5426.0)]

    def col(get: object) -> np.ndarray:
        return np.array([get(s) for s in shapes], dtype=float)  # type: ignore[operator]

    c = Columns(col(lambda s: s.floor_s), col(lambda s: s.compute_s), col(lambda s: s.memory_s), col(lambda s: 0.0),
                col(lambda s: s.m), col(lambda s: s.n), col(lambda s: 0.0), col(lambda s: 0.0), col(lambda s: 0.0),
                col(lambda s: 0.0), col(lambda s: 0.0), col(lambda s: 0.0), 132, col(lambda s: s.k))
    t, low, high = expected_columns(fit, c)
    assert t == pytest.approx([88.6e-6, 59.4e-6, 177.8e-6, 5447.5e-6], rel=1e-12)
    # low = t · 0.9, never below the floor: the last one's 0.9 × 5447.5 = 4902.75 µs is under its 5426 µs floor
    assert low == pytest.approx([88.6e-6 * 0.9, 59.4e-6 * 0.9, 177.8e-6 * 0.9, 5426e-6], rel=1e-12)
    assert high == pytest.approx(t * 1.2, rel=1e-12)


def test_a_host_floor_is_recovered() -> None:
    # y = max(40 µs, 2·x + 5 µs) over DRAM times x of 5-160 µs: the rows up to x = 17.5 µs sit on the host's
    # 40 µs, the others on the device's line; the fit finds h = 40 µs, e = 1/2, t0 = 5 µs exactly
    xs = [5, 10, 15, 20, 30, 40, 80, 120, 160] * 3
    shapes = [Shape("gemm.fp8", x * 1e-6, 0.0, 256, 256, 132, memory_s=x * 1e-6) for x in xs]
    y = [max(40.0, 2 * x + 5) * 1e-6 for x in xs]
    fit = fit_kind("gemm.fp8", shapes, y)
    assert fit.host_floors == (("any", pytest.approx(40e-6, rel=1e-9)),)
    assert (fit.efficiency, fit.t0_s) == pytest.approx((0.5, 5e-6), rel=1e-6)
    assert fit.mape == pytest.approx(0.0, abs=1e-6)


def test_host_floors_per_launch_path_are_recovered() -> None:
    # the same device line, 2·x + 5 µs, under 90 µs on DeepGEMM's path and 60 µs at m <= 17 (the H200 vLLM
    # figures rounded): each path's floor found
    xs = [5, 10, 20, 30, 40, 60, 80, 120, 160] * 3
    shapes = [*(_gemm(1024, 2560, 12288, x) for x in xs), *(_gemm(8, 2560, 12288, x) for x in xs)]
    y = [*(max(90.0, 2 * x + 5) * 1e-6 for x in xs), *(max(60.0, 2 * x + 5) * 1e-6 for x in xs)]
    fit = fit_kind("gemm.fp8_block", shapes, y)
    floors = dict(fit.host_floors)
    assert floors["deepgemm"] == pytest.approx(90e-6, rel=1e-9)
    assert floors["small_m"] == pytest.approx(60e-6, rel=1e-9)
    assert (fit.efficiency, fit.t0_s) == pytest.approx((0.5, 5e-6), rel=1e-6)


def test_no_host_floor_where_none_is_measured() -> None:
    # y = 2·x + 5 µs on every row: a host floor would change nothing, so the fit has none
    xs = [5, 10, 20, 40, 80, 160] * 3
    shapes = [Shape("gemm.bf16", x * 1e-6, 0.0, 256, 256, 132, memory_s=x * 1e-6) for x in xs]
    fit = fit_kind("gemm.bf16", shapes, [(2 * x + 5) * 1e-6 for x in xs])
    assert fit.host_floors == ()
    assert (fit.efficiency, fit.t0_s) == pytest.approx((0.5, 5e-6), rel=1e-6)
