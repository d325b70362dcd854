"""DeepGEMM's sm90 block choice (roofline.expectation.deepgemm), the model's terms that read it (Fit's
deepgemm_blocks and k_step_s) and their fit (roofline.calibration.fit), by hand and on a synthetic set
whose constants are known."""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.calibration.fit import fit_kind
from roofline.calibration.validate import deepgemm_kind
from roofline.expectation.columns import Columns, expected_columns
from roofline.expectation.deepgemm import block_config, block_config_one, k_steps, legal, stretch
from roofline.expectation.model import Fit, Shape
from roofline.expectation.shipped import parse
from roofline.expectation.times import ExpectedTimes

SMS = 132  # H100 SXM and H200


def test_the_blocks_deepgemm_picks_by_hand() -> None:
    # get_best_config (sgl-project/DeepGEMM f4adba8, csrc/jit_kernels/heuristics/common.hpp): fewest waves,
    # then the fullest last wave. 256 × 8192: 128 × 128 blocks are 2 · 64 = 128 on 132 SMs, one wave; no legal
    # block makes more of them in one wave (128 × 112: 2 · 74 = 148 > 132; 64 × 192: 4 · 43 = 172)
    assert tuple(int(v) for v in block_config(256, 8192, SMS)) == (128, 128, 1)
    # 257 × 8192: 128 × 192 blocks, 3 · ⌈8192/192⌉ = 3 · 43 = 129 in one wave, beat 256 × 128's 2 · 64 = 128
    assert tuple(int(v) for v in block_config(257, 8192, SMS)) == (128, 192, 1)
    # 513 × 8192 takes two waves whatever the block; 128 × 160: 5 · 52 = 260 blocks, 128 in the last wave, the
    # fullest (128 × 192: 5 · 43 = 215, 83 last; 256 × 128: 3 · 64 = 192, 60 last)
    assert tuple(int(v) for v in block_config(513, 8192, SMS)) == (128, 160, 2)
    # 15 × 768: every block fits one wave, so the most blocks win: 64 × 16, 1 · 48 = 48
    assert tuple(int(v) for v in block_config(15, 768, SMS)) == (64, 16, 1)
    assert tuple(int(v) for v in block_config(0, 768, SMS)) == (0, 0, 0)


def test_the_legal_blocks() -> None:
    # SM90ArchSpec::is_block_size_legal, Kernel1D2D with a BF16 output: past 128 only 144, 160, 192 columns,
    # and never both sides past 128
    assert legal(128, 192) and legal(256, 128) and legal(64, 144)
    assert not legal(128, 176)  # 176 > 128 and not among 144, 160, 192
    assert not legal(256, 160)  # both sides past 128


def test_the_stretch_and_the_k_blocks_by_hand() -> None:
    # 257 × 8192: one wave of 128 × 192 blocks on 132 SMs computes 132·128·192 of its 257·8192 outputs' time
    assert float(stretch(257, 8192, SMS)) == pytest.approx(132 * 128 * 192 / (257 * 8192), rel=1e-12)
    # 15 × 768 × 65536: one wave, 65536 / 128 = 512 k-blocks
    assert float(k_steps(15, 768, 65536, SMS)) == 512
    # 513 × 8192 × 8192: two waves of 64 k-blocks each
    assert float(k_steps(513, 8192, 8192, SMS)) == 2 * 64
    assert float(stretch(0, 8192, SMS)) == 1.0 and float(k_steps(15, 768, 0, SMS)) == 0.0


# H200 SGLang 0.5.14 gemm.fp8_block row (aiconfigurator-core 0.12.0, h200_sxm/gemm/sglang/0.5.14):
# 15 × 768 × 65536 measured 73.69 µs; its floor's DRAM time 10.695 µs, matrix time 0.7630 µs, activation
# read 0.4096 µs, output write 0.0048 µs (roofline's H200: 4.8 TB/s, 1979 TFLOP/s FP8)
ROW = Shape("gemm.fp8_block", 10.69536e-6, 0.7630246e-6, 15, 768, SMS, memory_s=10.69536e-6, input_s=0.4096e-6,
            output_s=0.0048e-6, k=65536)


def test_the_terms_of_one_row_by_hand() -> None:
    fit = Fit("gemm.fp8_block", 0.8, 4e-6, 1.0, 1.0, 1, compute_ratio=1.25, deepgemm_blocks=True, k_step_s=100e-9)
    # q_dg = 1 wave · 132 SMs · 64 · 16 / (15 · 768) = 11.733; max(10.695, 1.25 · 0.7630 · 11.733 = 11.191) / 0.8
    # + t0 4 µs + 100 ns · 512 k-blocks
    q = 132 * 64 * 16 / (15 * 768)
    by_hand = max(10.69536, 1.25 * 0.7630246 * q) / 0.8 + 4 + 0.1 * 512
    assert fit.expected_s(ROW) == pytest.approx(by_hand * 1e-6, rel=1e-9)
    assert fit.terms_s(ROW)["k_steps"] == pytest.approx(51.2e-6, rel=1e-12)
    # without the flag the k-block cost is not counted and q = 1: max(10.695, 0.954) / 0.8 + 4
    plain = Fit("gemm.fp8_block", 0.8, 4e-6, 1.0, 1.0, 1, compute_ratio=1.25, k_step_s=100e-9)
    assert plain.expected_s(ROW) == pytest.approx((10.69536 / 0.8 + 4) * 1e-6, rel=1e-9)


def _columns(shapes: list[Shape]) -> Columns:
    def col(get: object) -> np.ndarray:
        return np.array([get(s) for s in shapes], dtype=float)  # type: ignore[operator]

    zero = col(lambda s: 0.0)
    return Columns(col(lambda s: s.floor_s), col(lambda s: s.compute_s), col(lambda s: s.memory_s), zero,
                   col(lambda s: s.m), col(lambda s: s.n), zero, zero, zero, zero, col(lambda s: s.input_s),
                   col(lambda s: s.output_s), SMS, col(lambda s: s.k))


def test_the_columns_count_the_same_terms() -> None:
    fit = Fit("gemm.fp8_block", 0.8, 4e-6, 0.9, 1.1, 1, compute_ratio=1.25, deepgemm_blocks=True, k_step_s=100e-9)
    t, _, _ = expected_columns(fit, _columns([ROW]))
    q = 132 * 64 * 16 / (15 * 768)  # as in the row's terms by hand
    assert float(t[0]) == pytest.approx((max(10.69536, 1.25 * 0.7630246 * q) / 0.8 + 4 + 0.1 * 512) * 1e-6, rel=1e-9)


def _synthetic() -> list[Shape]:
    # GEMMs on 132 SMs, times from the shape at 1979 TFLOP/s and 4.8 TB/s: thin and wide, shallow and deep
    out = []
    for m in (1, 15, 64, 129, 257, 513, 1024, 2049, 4096):
        for n in (768, 2048, 7168, 16384):
            for k in (512, 4096, 16384, 65536):
                compute, memory = 2 * m * n * k / 1979e12, (m * k + n * k + 2 * m * n) / 4.8e12
                out.append(Shape("gemm.fp8_block", max(compute, memory), compute, m, n, SMS, memory_s=memory, k=k))
    return out


def test_the_k_block_cost_is_recovered() -> None:
    # measured = max(M, 1.25·C·q_dg) / 0.8 + 4 µs + 100 ns · waves · ⌈k/128⌉: the fit of a Hopper block-scaled
    # kind (deepgemm=True) finds ρ, e, t0 and λ_k, and the MAPE is 0
    shapes = _synthetic()
    m, n, k = (np.array([getattr(s, f) for s in shapes], dtype=float) for f in ("m", "n", "k"))
    q, steps = stretch(m, n, SMS), k_steps(m, n, k, SMS)
    y = [max(s.memory_s or 0.0, 1.25 * s.compute_s * qi) / 0.8 + 4e-6 + 100e-9 * si
         for s, qi, si in zip(shapes, q, steps, strict=True)]
    fit = fit_kind("gemm.fp8_block", shapes, y, deepgemm=True)
    assert fit.deepgemm_blocks and fit.compute_ratio == pytest.approx(1.25)
    assert (fit.efficiency, fit.t0_s, fit.k_step_s) == pytest.approx((0.8, 4e-6, 100e-9), rel=1e-6)
    assert fit.mape == pytest.approx(0.0, abs=1e-9)
    # where the times have no k-block cost (y = max(M, 1.25·C) / 0.8 + 4 µs) the plain trial fits them exactly
    # and DeepGEMM's is not taken
    plain = [max(s.memory_s or 0.0, 1.25 * s.compute_s) / 0.8 + 4e-6 for s in shapes]
    other = fit_kind("gemm.fp8_block", shapes, plain, deepgemm=True)
    assert not other.deepgemm_blocks and other.k_step_s == 0.0 and other.mape == pytest.approx(0.0, abs=1e-9)


def test_only_hopper_block_scaled_kinds_try_deepgemm() -> None:
    assert deepgemm_kind("gemm.fp8_block", "h200") and deepgemm_kind("gemm.fp8_block", "h100-sxm")
    assert not deepgemm_kind("gemm.fp8_block", "b200")  # Blackwell: DeepGEMM's sm100 heuristic differs
    assert not deepgemm_kind("gemm.fp8", "h200")  # a per-tensor FP8 GEMM is not DeepGEMM's
    assert not deepgemm_kind("gemm.fp8_block", "no-such-machine")


def test_a_file_without_the_fields_reads_them_as_absent_and_a_saved_one_keeps_them() -> None:
    fit = Fit("gemm.fp8_block", 0.98, 3.8e-6, 0.9, 1.1, 3691, compute_ratio=1.25, deepgemm_blocks=True,
              k_step_s=107e-9)
    raw = json.loads(json.dumps(ExpectedTimes("h200", "sglang", "0.5.14", {}, {"gemm.fp8_block": fit}).to_dict()))
    back = parse(raw, "memory").fits["gemm.fp8_block"]
    assert back.deepgemm_blocks and back.k_step_s == pytest.approx(107e-9, rel=1e-12)
    for key in ("deepgemm_blocks", "k_step_s"):
        del raw["fits"]["gemm.fp8_block"][key]
    old = parse(raw, "memory").fits["gemm.fp8_block"]
    assert not old.deepgemm_blocks and old.k_step_s == 0.0


def test_one_shape_and_the_columns_pick_the_same_blocks() -> None:
    # Fit.expected_s reads block_config_one, the columns block_config: the same rule over a grid of shapes
    # (the H200 SGLang table's m and n values, a few of each)
    ms = np.array([1, 15, 17, 64, 65, 129, 193, 256, 257, 512, 513, 1025, 2049, 4097, 32768])
    ns = np.array([128, 768, 1536, 4096, 7168, 8192, 16384, 65536])
    mm, nn = (a.ravel() for a in np.meshgrid(ms, ns))
    cols = np.column_stack(block_config(mm, nn, SMS))
    assert [tuple(int(v) for v in row) for row in cols] == [block_config_one(int(a), int(b), SMS)
                                                             for a, b in zip(mm, nn, strict=True)]
