"""The expected-time model's host floor (Fit.host_s), decode's streaming roof (Fit.stream_s), short
stream (Fit.short_stream_s) and query-tile roof (Fit.query_tile_s), the wave term's tile padding
(padding_factor) (roofline.expectation.model) and their fit (roofline.calibration.fit), by hand on
synthetic sets whose answer is known."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline.calibration.fit import fit_kind
from roofline.expectation.columns import Columns, expected_columns
from roofline.expectation.launch import host_path, padding_factor
from roofline.expectation.model import Fit, Shape, query_tile
from roofline.expectation.placed import l2_stream_s
from roofline.hardware import get_machine

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


def _decode(b: int, g: int, mem_us: float, kv: int = 1024) -> Shape:
    """A decode kernel on 132 SMs: b sequences, g K/V heads of one query head each, a DRAM time of mem_us."""
    return Shape("generation_attention.bf16", mem_us * 1e-6, 0.0, sms=132, tile_pairs=float(b * g * kv / 128),
                 heads=float(b * g), memory_s=mem_us * 1e-6, kv_heads=float(b * g), head_dim=512)


def test_the_streaming_roof_by_hand() -> None:
    # H200 SGLang Triton decode b1 h8/1 d512 KV 32767 (aiconfigurator-core 0.12.0, h200_sxm/attention/sglang):
    # 607 µs against a 7 µs DRAM time; with kappa = 96 sequences x K/V heads to pull DRAM's bandwidth,
    # S = 96 x 7 / (1 x 1) = 672 µs, the roof (e = 1, no other term): t = 672 µs
    fit = Fit("generation_attention.bf16", 1.0, 0.0, 1.0, 1.0, 1, stream_blocks=96.0)
    one = _decode(1, 1, 7.0)
    assert fit.stream_s(one) == pytest.approx(96 * 7e-6, rel=1e-12)
    assert fit.expected_s(one) == pytest.approx(672e-6, rel=1e-12)
    # b = 192 sequences: S = 96 x 7 / 192 = 3.5 µs, below M = 7 µs: DRAM's time holds
    assert fit.expected_s(_decode(192, 1, 7.0)) == pytest.approx(7e-6, rel=1e-12)
    # a prefill shape (query rows tiled) has none
    assert fit.stream_s(Shape("context_attention.bf16", 1e-5, 1e-5, m=128, sms=132, heads=1.0, kv_heads=1.0)) == 0.0


def test_the_streaming_roof_is_recovered() -> None:
    # y = max(M, 64·M/B) / 0.5 + 10 µs over B = 1-1024 sequences x K/V heads (120 rows: the knob is searched
    # on fits of at least MIN_STREAM_ROWS = 100): the fit finds kappa = 64 on its grid, e = 0.5, t0 = 10 µs
    shapes = [_decode(b, g, mem) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) for g in (1, 2)
              for mem in (10.0, 20.0, 40.0, 80.0, 160.0, 320.0)]

    def truth(s: Shape) -> float:
        m = s.memory_s or 0.0
        return max(m, 64 * m / s.kv_heads) / 0.5 + 10e-6

    fit = fit_kind("generation_attention.bf16", shapes, [truth(s) for s in shapes])
    assert fit.stream_blocks == 64.0
    assert (fit.efficiency, fit.t0_s) == pytest.approx((0.5, 10e-6), rel=1e-6)


def test_the_tile_padding_by_hand() -> None:
    # 257 x 51200 in 128 x 128 tiles: 3 row tiles for 257 rows, 3·128/257 = 1.494; 51200 columns fill 400
    # tiles exactly (1); 1200 tiles on 132 SMs run in 10 waves, 10·132/1200 = 1.1: q = 1.1 x 1.494 = 1.644
    # (H200 vLLM FP8 257×51200×2560 ran 2.1x the fit without the padding)
    big = Shape("gemm.fp8", 1e-6, 1e-6, 257, 51200, 132, memory_s=0.0)
    assert padding_factor(257, 51200, (128, 128)) == pytest.approx(3 * 128 / 257, rel=1e-12)
    fit = Fit("gemm.fp8", 1.0, 0.0, 1.0, 1.0, 1, (128, 128), compute_ratio=1.0, tile_padded=True)
    assert fit.stretched_floor_s(big) == pytest.approx(1e-6 * 1.1 * 3 * 128 / 257, rel=1e-12)
    # a matrix within one tile (m = 64 rows): a kernel picks a tile no taller, no padding counted
    assert padding_factor(64, 51200, (128, 128)) == 1.0
    # without the flag the wave term is the waves alone
    unpadded = Fit("gemm.fp8", 1.0, 0.0, 1.0, 1.0, 1, (128, 128), compute_ratio=1.0)
    assert unpadded.stretched_floor_s(big) == pytest.approx(1e-6 * 1.1, rel=1e-12)


def test_the_tile_padding_is_recovered() -> None:
    # y = 1.25 x compute x q x p + 4 µs (padded 128 x 128 tiles, compute-bound: DRAM's time 0) over row counts
    # that straddle a tile: the fit picks the 128 x 128 tile with padding and rho / e = 1.25 (compute-bound rows
    # fix only the ratio), t0 = 4 µs
    shapes = [Shape("gemm.fp8", c * 1e-6, c * 1e-6, m, n, 132, memory_s=0.0)
              for m in (129, 200, 257, 300, 513, 700, 1025, 2048) for n in (1024, 4096, 7168) for c in (20.0, 50.0)]
    probe = Fit("gemm.fp8", 1.0, 0.0, 1.0, 1.0, 1, (128, 128), compute_ratio=1.0, tile_padded=True)
    fit = fit_kind("gemm.fp8", shapes, [probe.stretched_floor_s(s) / 0.8 + 4e-6 for s in shapes],
                   tiles=(None, (128, 128), (128, 256)))
    assert (fit.tile, fit.tile_padded) == ((128, 128), True)
    assert (fit.compute_ratio / fit.efficiency, fit.t0_s) == pytest.approx((1.25, 4e-6), rel=1e-6)


def test_the_new_terms_survive_the_file() -> None:
    # a version 3 file carries the host floors, the tile padding, kappa, lambda_q and the matrix weights over a
    # narrower cache; they read back as written
    import json

    from roofline.expectation.shipped import parse
    from roofline.expectation.times import ExpectedTimes

    fits = {"gemm.fp8_block": Fit("gemm.fp8_block", 0.86, 21.5e-6, 0.9, 1.1, 1407, (128, 128), tile_padded=True,
                                  host_floors=PATHS),
            "context_attention.bf16": Fit("context_attention.bf16", 0.3, 1e-5, 0.9, 1.2, 2796, kv_read_weight=6.9),
            "generation_attention.fp8@triton": Fit("generation_attention.fp8@triton", 0.5, 9e-6, 0.9, 1.3, 117,
                                                   stream_blocks=96.0),
            "generation_attention.fp8": Fit("generation_attention.fp8", 1.0, 7.3e-6, 0.94, 1.21, 1647, max_group=32,
                                            query_tile_latency_s=0.2e-6),
            "context_attention.bf16@triton": Fit("context_attention.bf16@triton", 0.94, 1.2e-5, 0.93, 1.56, 1850,
                                                 head_dim_weights=((256, 6.2), (512, 2.9)),
                                                 narrow_kv_weights=((256, 0.0), (512, 10.3)))}
    raw = json.loads(json.dumps(ExpectedTimes("h200", "vllm", "0.24.0", {}, fits).to_dict()))
    assert raw["version"] == 3
    assert dict(parse(raw, "h200.vllm.json").fits) == fits


def test_the_default_engine_counts_gemm_and_attention_rows_only() -> None:
    # the shipped H200 files (aiconfigurator-core 0.12.0, every ceil(n/4000)-th row of each table): GEMM and
    # attention rows SGLang 10,865, TensorRT-LLM 10,596, vLLM 9,876 before MLA and MoE were shipped; TensorRT-LLM's
    # file now also carries its MLA and MoE rows (3,000+ more), which must not make it the default
    from roofline.expectation.shipped import DEFAULT_KINDS, default_engine, shipped

    trt = shipped("h200", "trtllm")
    extra = sum(f.rows for k, f in trt.fits.items() if not k.startswith(DEFAULT_KINDS))
    assert extra > 3000 and any(k.startswith("generation_mla.") for k in trt.fits)
    assert any(k.startswith("moe.") for k in trt.fits)
    assert default_engine("h200") == "sglang"


def test_the_prefill_kv_read_by_hand() -> None:
    # prefill of H = 32 query heads over G = 8 K/V heads: K and V of 8 heads beside Q and O of 32, so the K/V
    # share of a 100 µs DRAM time is 100 x 8 / (32 + 8) = 20 µs; with c_kvr = 3.1 (H200 vLLM's fit) it adds
    # 3.1 x 20 = 62 µs to t = M / e = 100 / 0.5 = 200 µs: 262 µs
    fit = Fit("context_attention.bf16", 0.5, 0.0, 1.0, 1.0, 1, kv_read_weight=3.1)
    pre = Shape("context_attention.bf16", 100e-6, 10e-6, m=4096, sms=132, heads=32.0, kv_heads=8.0, memory_s=100e-6)
    assert Fit.kv_read_s(pre) == pytest.approx(20e-6, rel=1e-12)
    assert fit.expected_s(pre) == pytest.approx(262e-6, rel=1e-12)
    # MHA (G = H): half of DRAM's time is K and V
    assert Fit.kv_read_s(Shape("context_attention.bf16", 1e-4, 0.0, m=128, heads=8.0, kv_heads=8.0)) == 0.5e-4
    # decode (no query rows tiled) has none: its DRAM time is its K/V already
    assert Fit.kv_read_s(_decode(8, 8, 100.0)) == 0.0


def test_the_prefill_kv_read_is_recovered() -> None:
    # y = M / 0.5 + 4 x M·G/(H + G) + 8 µs over groups H/G of 1-32 (30 rows): the fit finds c_kvr = 4
    shapes = [Shape("context_attention.bf16", mem * 1e-6, 0.0, m=1024, sms=132, heads=32.0, kv_heads=32.0 / grp,
                    memory_s=mem * 1e-6) for grp in (1, 2, 4, 8, 16, 32) for mem in (20.0, 50.0, 100.0, 200.0, 400.0)]
    y = [(s.memory_s or 0.0) / 0.5 + 4 * Fit.kv_read_s(s) + 8e-6 for s in shapes]
    fit = fit_kind("context_attention.bf16", shapes, y)
    assert (fit.efficiency, fit.kv_read_weight) == pytest.approx((0.5, 4.0), rel=1e-6)
    # every row has H = 32 heads on 132 SMs, so t0 and the per-head term (× H / SMs) are one column twice: the
    # least-squares solver may split the 8 µs between them (it does, by machine); their sum is what is identified
    assert fit.t0_s + fit.per_head_s * 32.0 / 132 == pytest.approx(8e-6, rel=1e-6)


def test_decode_short_stream_by_hand() -> None:
    # τ = L2 capacity / DRAM bandwidth: H200's 50 MiB (Hopper whitepaper) over 4.8 TB/s (H200 datasheet)
    tau = 50 * 2**20 / 4.8e12  # 10.92 µs
    assert l2_stream_s(get_machine("h200")) == pytest.approx(tau)
    fit = Fit("generation_attention.bf16", 0.8, 5e-6, 1.0, 1.0, 1, short_stream_weight=1.2)

    def decode(memory_s: float) -> Shape:
        return Shape("generation_attention.bf16", memory_s, 0.0, 0, 0, 132, 8.0, 64.0, memory_s=memory_s,
                     kv_heads=8.0, head_dim=128, l2_s=tau)

    # M = 4 µs, under τ: t = M/e + t0 + c_L2·M = 5 + 5 + 4.8 = 14.8 µs
    assert fit.expected_s(decode(4e-6)) == pytest.approx(14.8e-6)
    # M = 40 µs, past τ: t = 50 + 5 + 1.2·10.92 = 68.11 µs (the term stops growing at τ)
    assert fit.expected_s(decode(40e-6)) == pytest.approx(55e-6 + 1.2 * tau)
    # a GEMM (query rows m > 0) and a decode shape of a machine without an L2 figure take no such term
    assert fit.short_stream_s(Shape("gemm.bf16", 4e-6, 1e-6, 128, 128, 132, memory_s=4e-6, l2_s=tau)) == 0.0
    assert fit.short_stream_s(replace(decode(4e-6), l2_s=0.0)) == 0.0
    # the columns' evaluation (validate's and serve's) adds the same term
    m = np.array([4e-6, 40e-6])
    zero = np.zeros(2)
    t, _, _ = expected_columns(fit, Columns(m, zero, m, zero, zero, zero, np.full(2, 8.0), np.full(2, 64.0),
                                            np.full(2, 8.0), np.full(2, 128.0), zero, zero, 132, None, tau))
    assert t == pytest.approx([14.8e-6, 55e-6 + 1.2 * tau])


def test_the_short_stream_is_recovered_from_measured_decode() -> None:
    # 120 decode kernels, M from 1 to 60 µs around τ = 10.92 µs, measured at M/0.9 + 1.5·min(M, τ) + 6 µs: the fit
    # recovers c_L2 = 1.5 and e = 0.9 (the truth is in its span; the latency and streaming roofs are not
    # searched on so few rows, MIN_LATENCY_ROWS and MIN_STREAM_ROWS)
    tau = 50 * 2**20 / 4.8e12
    shapes = [Shape("generation_attention.bf16", m * 1e-6, 0.0, 0, 0, 132, 8.0, 64.0, memory_s=m * 1e-6,
                    kv_heads=8.0, head_dim=128, l2_s=tau) for m in np.linspace(1.0, 60.0, 120)]
    y = [s.floor_s / 0.9 + 1.5 * min(s.floor_s, tau) + 6e-6 for s in shapes]
    fit = fit_kind("generation_attention.bf16", shapes, y)
    assert fit.short_stream_weight == pytest.approx(1.5, rel=1e-3) and fit.efficiency == pytest.approx(0.9, rel=1e-3)
    assert fit.mape is not None and fit.mape < 1e-4


def test_prefill_waves_by_hand() -> None:
    # B200: 148 SMs (its catalog file). One sequence, one head, 16,384 tokens: ⌈16384/128⌉ = 128 query tiles, one
    # CTA each, on 148 slots (k = 1): q = ⌈128/148⌉·148/128 = 1.15625, so c_w·C·(q − 1) = 2·30 µs·0.15625 = 9.375 µs
    fit = Fit("context_attention.bf16", 1.0, 0.0, 1.0, 1.0, 1, wave_weight=2.0, wave_slots=1)

    def prefill(tiles: float, sms: int = 148) -> Shape:
        return Shape("context_attention.bf16", 30e-6, 30e-6, 16384, 0, sms, tiles * (tiles + 1) / 2, 1.0,
                     memory_s=5e-6, kv_heads=1.0, head_dim=128, query_tiles=tiles)

    assert fit.waves_s(prefill(128)) == pytest.approx(30e-6 * (148 / 128 - 1))
    assert fit.terms_s(prefill(128))["waves"] == pytest.approx(9.375e-6)
    # 149 tiles: a second wave of one CTA, q = 2·148/149 = 1.98658: 2·30·0.98658 = 59.19 µs
    assert fit.terms_s(prefill(149))["waves"] == pytest.approx(2 * 30e-6 * (2 * 148 / 149 - 1))
    # k = 2 on Hopper's 132 SMs: 264 tiles fill one wave of 2·132 slots exactly (q = 1), 265 spill into a second
    hopper = Fit("context_attention.bf16", 1.0, 0.0, 1.0, 1.0, 1, wave_weight=2.0, wave_slots=2)
    assert hopper.waves_s(prefill(264, 132)) == 0.0
    assert hopper.waves_s(prefill(265, 132)) == pytest.approx(30e-6 * (2 * 264 / 265 - 1))
    # decode (no query tiles) and a fit without slots take none
    assert fit.waves_s(replace(prefill(128), query_tiles=0.0)) == 0.0
    assert Fit("context_attention.bf16", 1.0, 0.0, 1.0, 1.0, 1).waves_s(prefill(128)) == 0.0
    # the columns (validate's and serve's evaluation) add the same term
    tiles = np.array([128.0, 149.0])
    zero, thirty = np.zeros(2), np.full(2, 30e-6)
    t, _, _ = expected_columns(fit, Columns(thirty, thirty, np.full(2, 5e-6), zero, np.full(2, 16384.0), zero,
                                            tiles * (tiles + 1) / 2, np.ones(2), np.ones(2), np.full(2, 128.0),
                                            zero, zero, 148, None, 0.0, tiles))
    assert t == pytest.approx([fit.expected_s(prefill(128)), fit.expected_s(prefill(149))])


def test_prefill_query_tiles_of_a_measured_row() -> None:
    # the floors of a table's prefill row (roofline.calibration.floors): 2 sequences × 8 query heads × ⌈1000/128⌉ = 8
    # query tiles = 128 CTAs; a decode row (one query per sequence) has none
    from roofline.calibration.floors import attention_floors, roofs

    r = roofs(get_machine("b200"), "bf16")
    f = attention_floors(r, False, "bf16", "bf16", [2], [8], [2], [128], [1000])
    assert f.query_tiles is not None and float(f.query_tiles[0]) == 2 * 8 * 8
    d = attention_floors(r, True, "bf16", "bf16", [2], [8], [2], [128], [1000])
    assert d.query_tiles is not None and float(d.query_tiles[0]) == 0.0


def _grouped(b: int, h: int, g: int, d: int, mem_us: float) -> Shape:
    """A decode kernel on H200's 132 SMs: b sequences, h query heads over g K/V heads of width d."""
    return Shape("generation_attention.fp8", mem_us * 1e-6, 0.0, sms=132, tile_pairs=float(b * g),
                 heads=float(b * h), memory_s=mem_us * 1e-6, kv_heads=float(b * g), head_dim=d)


def test_the_query_tile_by_hand() -> None:
    # TensorRT-LLM's Hopper FP8 XQA kernel pads a block's query heads to a multiple of 8 (kernels/xqa/mha_sm90.cu,
    # ctaNbQHeads = roundUp(headGrpSize x beamWidth, 8)) and a head to 64, 128 or 256 elements (kernels/xqa/mha.h,
    # headElems): ⌈H/G⌉₈ x padded width / 256
    assert query_tile(16, 192) == 16 * 256 / 256  # 16 heads of 192 (padded to 256): 16
    assert query_tile(12, 128) == query_tile(16, 128) == 16 * 128 / 256  # 12 heads take a tile of 16: 8
    assert query_tile(2, 64) == 8 * 64 / 256  # 2 heads take a tile of 8, of 64 elements: 2
    assert query_tile(6, 100) == 8 * 128 / 256  # a head of 100 elements pads to 128: 4
    assert query_tile(32, 512) == 32 * 512 / 256  # wider than 256 (no such XQA kernel): the width as it is, 64


def test_the_query_tile_roof_by_hand() -> None:
    # H200 TRT-LLM 1.3.0rc20 decode with an FP8 cache, b2048 h32/2 d192 KV 1 (aiconfigurator-core 0.12.0): measured
    # 224.7 µs; DRAM's time is the BF16 query and output, 2048·32·192·2 B·2 = 50.3 MB over 4.8 TB/s = 10.5 µs.
    # With λ_q = 0.2 µs a padded query head × 256 elements on one SM (the shipped H200 fit's): B_g = 2048·2 = 4096
    # blocks of tile 16 (16 heads, 192 -> 256), 4096/132 = 31.03 an SM of which the first n₀ = 2 hide under t0:
    # Q = 0.2 µs × (31.03 − 2) × 16 = 92.90 µs, above M: t = Q/e + t0 = 92.90 + 7.3 µs
    fit = Fit("generation_attention.fp8", 1.0, 7.3e-6, 1.0, 1.0, 1, max_group=32, query_tile_latency_s=0.2e-6)
    row = _grouped(2048, 32, 2, 192, 10.5)
    assert fit.query_tile_s(row) == pytest.approx(0.2e-6 * (4096 / 132 - 2) * 16, rel=1e-12)
    assert fit.expected_s(row) == pytest.approx((0.2 * (4096 / 132 - 2) * 16 + 7.3) * 1e-6, rel=1e-12)
    # the same blocks at KV length 8191: M = 2048·2·8192·192·2 B / 4.8 TB/s = 2.7 ms is above Q, which adds nothing
    assert fit.expected_s(_grouped(2048, 32, 2, 192, 2684.0)) == pytest.approx((2684 + 7.3) * 1e-6, rel=1e-12)
    # b64 h32/2: 128 blocks, under 2 an SM: none beyond the launch's fixed time
    assert fit.query_tile_s(_grouped(64, 32, 2, 192, 1.0)) == 0.0
    # MHA (H = G: masked MHA, not XQA), a group of 64 (beyond max_group = 32: one block per query head) and a
    # prefill shape (query rows tiled) have none
    assert fit.query_tile_s(_grouped(2048, 32, 32, 128, 1.0)) == 0.0
    assert fit.query_tile_s(_grouped(2048, 128, 2, 128, 1.0)) == 0.0
    assert fit.query_tile_s(Shape("context_attention.fp8", 1e-5, 1e-5, m=128, sms=132, heads=32.0,
                                  kv_heads=2.0, head_dim=128)) == 0.0
    # the columns' evaluation (validate's and serve's) takes the same roof
    shapes = [row, _grouped(2048, 32, 2, 192, 2684.0), _grouped(2048, 32, 32, 128, 1.0),
              _grouped(256, 96, 8, 256, 12.0), _grouped(64, 32, 2, 192, 1.0)]

    def col(get: object) -> np.ndarray:
        return np.array([get(s) for s in shapes], dtype=float)  # type: ignore[operator]

    zero = np.zeros(len(shapes))
    c = Columns(col(lambda s: s.floor_s), zero, col(lambda s: s.memory_s), zero, zero, zero,
                col(lambda s: s.tile_pairs), col(lambda s: s.heads), col(lambda s: s.kv_heads),
                col(lambda s: s.head_dim), zero, zero, 132)
    t, _, _ = expected_columns(fit, c)
    assert t == pytest.approx([fit.expected_s(s) for s in shapes], rel=1e-12)
    # b256 h96/8 d256: B_g = 2048 blocks (15.52 an SM) of tile 16 (12 heads pad to 16): Q = 0.2 × 13.52 × 16 = 43.25 µs
    assert t[3] == pytest.approx((0.2 * (2048 / 132 - 2) * 16 + 7.3) * 1e-6, rel=1e-12)


def test_the_query_tile_roof_is_recovered() -> None:
    # 600 decode shapes (the latency knobs are searched on fits of at least MIN_LATENCY_ROWS = 500 rows), groups
    # of 2-16 heads of width 64-256, measured = max(M, L, Q)/0.9 + 7 µs with L = 1 µs·B_g·(1 + d/256)/132 and
    # Q = 0.3 µs·max(0, B_g/132 − 2)·⌈H/G⌉₈·d₂₅₆: λ_g, λ_q (on their grids) and e, t0 come back, the MAPE 0
    shapes = []
    for i in range(600):
        b, g, group = (64, 256, 1024, 2048)[i % 4], (1, 2, 8)[i % 3], (2, 4, 8, 12, 16)[i % 5]
        d = (64, 128, 192, 256)[(i // 7) % 4]
        shapes.append(_grouped(b, g * group, g, d, (2 + 37 * (i % 13)) * 1.0))

    def truth(s: Shape) -> float:
        lat = 1e-6 * s.kv_heads * (1 + s.head_dim / 256) / 132
        tile = 0.3e-6 * max(0.0, s.kv_heads / 132 - 2) * query_tile(s.heads / s.kv_heads, s.head_dim)
        return max(s.memory_s or 0.0, lat, tile) / 0.9 + 7e-6

    fit = fit_kind("generation_attention.fp8", shapes, [truth(s) for s in shapes])
    assert (fit.block_latency_s, fit.query_tile_latency_s) == pytest.approx((1e-6, 0.3e-6))
    assert (fit.efficiency, fit.t0_s) == pytest.approx((0.9, 7e-6), rel=1e-6)
    assert fit.mape == pytest.approx(0.0, abs=1e-9)


def _prefill(d: int, compute_us: float, memory_us: float, narrow: bool) -> Shape:
    """A prefill kernel on H100's 132 SMs: one sequence × 8 query heads over 1 K/V head of width d."""
    return Shape("context_attention.bf16@triton", compute_us * 1e-6, compute_us * 1e-6, m=4096, sms=132,
                 memory_s=memory_us * 1e-6, head_dim=d, narrow_kv=narrow)


def test_prefill_over_a_narrower_cache_by_hand() -> None:
    # H100 SGLang 0.5.14 Triton prefill (aiconfigurator-core 0.12.0, h100_sxm/attention/sglang): b8 h8/1 d512
    # isl 4096 took 11,251 µs on a BF16 cache and 18,194 µs on an FP8 one (1.62x), b4 h16/8 d256 isl 1024 703 and
    # 479 µs (0.68x). With a_mm = 2.9 at 512 and 6.2 at 256 on a BF16 cache and 10.3 and 0 on an FP8 one (the
    # fit's, rounded), a d512 kernel of C = 1 ms and M = 5 µs takes 5 + 2.9 x 1000 µs, or 5 + 10.3 x 1000 on FP8
    fit = Fit("context_attention.bf16@triton", 1.0, 0.0, 1.0, 1.0, 1, compute_ratio=0.0,
              head_dim_weights=((256, 6.2), (512, 2.9)), narrow_kv_weights=((256, 0.0), (512, 10.3)))
    assert fit.expected_s(_prefill(512, 1000.0, 5.0, False)) == pytest.approx(5e-6 + 2.9e-3)
    assert fit.expected_s(_prefill(512, 1000.0, 5.0, True)) == pytest.approx(5e-6 + 10.3e-3)
    assert fit.expected_s(_prefill(256, 1000.0, 5.0, True)) == pytest.approx(5e-6)
    # a decode shape (no query rows) and a fit without the split take a_mm by width alone
    assert fit.matrix_weight_for(replace(_prefill(512, 1000.0, 5.0, True), m=0)) == 2.9
    assert replace(fit, narrow_kv_weights=()).matrix_weight_for(_prefill(512, 1000.0, 5.0, True)) == 2.9
    # the columns (validate's and serve's evaluation) take the same weights
    c, m = np.full(3, 1e-3), np.full(3, 5e-6)
    zero = np.zeros(3)
    t, _, _ = expected_columns(fit, Columns(c, c, m, zero, np.full(3, 4096.0), zero, zero, zero, zero,
                                            np.array([512.0, 512.0, 256.0]), zero, zero, 132,
                                            narrow_kv=np.array([False, True, True])))
    assert t == pytest.approx([5e-6 + 2.9e-3, 5e-6 + 10.3e-3, 5e-6])


def test_a_measured_row_over_an_fp8_cache_is_narrow() -> None:
    # the floors of the table's row above (b8 h8/1 d512 isl 4096, a BF16 query): narrow on an FP8 cache (1 B
    # against the query's 2 B), not on a BF16 one; decode (one query per sequence) never
    from roofline.calibration.floors import attention_floors, roofs

    r = roofs(get_machine("h100"), "bf16")
    for generation, kv, narrow in ((False, "fp8_e4m3", True), (False, "bf16", False), (True, "fp8_e4m3", False)):
        f = attention_floors(r, generation, "bf16", kv, [8], [8], [1], [512], [4096])
        assert f.narrow_kv is not None and bool(f.narrow_kv[0]) is narrow


def _mixed(narrow_512: float) -> tuple[list[Shape], list[float]]:
    """120 prefill kernels at widths 256 and 512 on both caches, measured at M/0.5 + a_mm·C + 8 µs, a_mm = 2 and 3
    on the BF16 cache and 1 and `narrow_512` on the narrower one."""
    weights = {(256, False): 2.0, (512, False): 3.0, (256, True): 1.0, (512, True): narrow_512}
    shapes = [_prefill(d, c, mem, narrow) for d in (256, 512) for narrow in (False, True)
              for c in (50.0, 100.0, 200.0, 400.0, 800.0) for mem in (10.0, 20.0, 40.0, 80.0, 160.0, 320.0)]
    return shapes, [(s.memory_s or 0.0) / 0.5 + weights[(s.head_dim, s.narrow_kv)] * s.compute_s + 8e-6
                    for s in shapes]


def test_the_matrix_weight_by_cache_is_recovered() -> None:
    shapes, y = _mixed(6.0)
    fit = fit_kind("context_attention.bf16@triton", shapes, y)
    assert fit.efficiency == pytest.approx(0.5, rel=1e-4)
    assert [w for _, w in fit.head_dim_weights] == pytest.approx([2.0, 3.0], rel=1e-4)
    assert [w for _, w in fit.narrow_kv_weights] == pytest.approx([1.0, 6.0], rel=1e-4)


def test_no_split_by_cache_where_it_changes_little() -> None:
    # the narrower cache's a_mm differs only at 256 and by 1 (of 2): the split lowers the MAPE, and is kept; where
    # the two caches run alike the split would gain nothing and is left out (NARROW_GAIN)
    shapes, y = _mixed(3.0)
    same = [(s.memory_s or 0.0) / 0.5 + (2.0 if s.head_dim == 256 else 3.0) * s.compute_s + 8e-6 for s in shapes]
    assert fit_kind("context_attention.bf16@triton", shapes, y).narrow_kv_weights != ()
    assert fit_kind("context_attention.bf16@triton", shapes, same).narrow_kv_weights == ()


def test_the_sweep_band_takes_the_narrower_cache_weights() -> None:
    # Llama 3 8B prefill (head 128) over an FP8 cache on H100: the sweep's band (numpy over the step model,
    # roofline.models.stepband) is Σ runs × each placed kernel's band (Fit.band_s, which reads Shape.narrow_kv)
    # under a fit whose a_mm over a narrower K/V is 5 where the rest take the shipped fit's
    from roofline.calibration.choose import total
    from roofline.expectation.placed import expect, shape_of
    from roofline.expectation.shipped import for_machine
    from roofline.models import analyze_model, deployments, dtype_steps
    from roofline.models.sweep import sweep

    times = for_machine("h100")
    pre = times.fits["context_attention.bf16"]
    mine = replace(times, fits={**times.fits, "context_attention.bf16": replace(pre, narrow_kv_weights=((128, 5.0),))})
    steps = dtype_steps("llama-3-8b", "prefill", kv_dtypes=["fp8"])
    a = analyze_model("llama-3-8b", "h100", "prefill", 2, 2048, dtypes=steps[0].dtypes)
    assert any(shape_of(p).narrow_kv for p in a.placements)  # the attention kernel reads an FP8 K/V under BF16 Q
    want = total(a.placements, [expect(p, mine) for p in a.placements])
    plain = total(a.placements, [expect(p, times) for p in a.placements])
    assert want["low"] > plain["low"]  # a_mm 5 over the shipped fit's
    row = sweep(steps, deployments(["h100"]), [2], [2048], expected=lambda _: mine)[0]
    assert row["expected_time_s"]["low"] == pytest.approx(want["low"], rel=1e-9)
    assert row["expected_time_s"]["high"] == pytest.approx(want["high"], rel=1e-9)
