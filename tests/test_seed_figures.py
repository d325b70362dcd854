"""The seed's numbers (shared/seed/000_7a874cd572d7cb29.txt), each derived as arithmetic."""

from __future__ import annotations

import pytest

from roofline import crossover, get_machine, kernel_time, place_flop_bytes
from roofline.kernels import attention_graph, attention_plans, elementwise_graph, matmul_graph
from roofline.placement import analyze_graph, place


@pytest.mark.parametrize(("machine", "dtype", "seed_ridge"), [
    ("a100", "bf16", 153),  # seed table: 312 TFLOP/s / 2.04 TB/s
    ("h100", "bf16", 295),  # seed table: 989 TFLOP/s / 3.35 TB/s
    # the seed's B200 ridges (281, 562, 1125: "the ridge doubles each step") divide by DGX B200's 8 TB/s; the
    # catalog's B200 bandwidth is now the physical 7680 bits x 2 x 3996 MHz / 8 = 7.672 TB/s (issue 20 item 4,
    # tests/test_catalog_exact.py), so its ridges are 2250/7.672 = 293.3, 586.5 and 1173.1
    ("b200", "bf16", 293),
    ("b200", "fp8", 587),
    ("b200", "fp4", 1173),
])
def test_ridge_points(machine: str, dtype: str, seed_ridge: int) -> None:
    # the seed rounds to whole FLOP/byte: 312/2.039 = 153.0, 989.4/3.35 = 295.3; B200 as above
    assert get_machine(machine).ridge_flop_per_byte(dtype) == pytest.approx(seed_ridge, abs=0.6)


def test_the_seeds_b200_ridge_was_the_8_tb_s_figure() -> None:
    # 2.25 PFLOP/s / 8 TB/s = 281.25, the seed's 281; the physical bandwidth moves it by 8 / 7.672 = 1.0428
    physical = 7680 * 2 * 3996e6 / 8
    assert 2.25e15 / 8e12 == 281.25
    assert get_machine("b200").ridge_flop_per_byte("bf16") == pytest.approx(281.25 * 8e12 / physical, rel=1e-9)


def test_ridge_doubles_with_each_halving_of_precision() -> None:
    b200 = get_machine("b200")
    assert b200.ridge_flop_per_byte("fp8") == 2 * b200.ridge_flop_per_byte("bf16")
    assert b200.ridge_flop_per_byte("fp4") == 2 * b200.ridge_flop_per_byte("fp8")


def test_kernel_time_rmsnorm_as_the_seed_prints() -> None:
    # seed: kernel_time(flops=6*8192*8192, bytes_moved=2*2*8192*8192) -> (1.5, 8.0e-05, 'memory')
    intensity, t, bound = kernel_time(flops=6 * 8192 * 8192, bytes_moved=2 * 2 * 8192 * 8192)
    assert intensity == 6 / 4  # 6 FLOPs per element over 2 bytes read + 2 written
    assert t == pytest.approx(2 * 2 * 8192 * 8192 / 3.35e12)  # bytes / BW = 268435456 / 3.35e12
    assert f"{t:.1e}" == "8.0e-05"
    assert bound == "memory"


def test_kernel_time_ffn_up_projection() -> None:
    # The seed prints 3591.1, but its own byte formula gives
    # 2·T·h·f / (2·(T·h + h·f + T·f)) with T = h = 8192, f = 28672:
    # T·h·f / (T·h + h·f + T·f) = 8192·8192·28672 / (8192² + 2·8192·28672) = 28672·8192 / 65536 = 3584.0
    t_, h, f = 8192, 8192, 28672
    intensity, t, bound = kernel_time(flops=2 * t_ * h * f, bytes_moved=2 * (t_ * h + h * f + t_ * f))
    assert intensity == 3584.0
    assert f"{t:.1e}" == "3.9e-03"  # compute term: 2·8192·8192·28672 / 989e12 = 3.89e-3 s
    assert bound == "compute"


def test_square_matmul_intensity_is_n_over_3_and_crosses_h100_ridge_near_885() -> None:
    h100 = get_machine("h100")
    for n in (128, 1024, 4096):
        p = place(matmul_graph(n, n, n).kernels()[0], h100, "bf16")
        assert p.flop_per_byte == pytest.approx(n / 3)  # 2N³ / (3·N²·2 bytes)
    ridge = h100.ridge_flop_per_byte("bf16")
    n_cross = crossover(lambda n: place(matmul_graph(n, n, n).kernels()[0], h100).flop_per_byte, ridge)
    # N/3 = 989.4/3.35 → N = 886.0; the seed says "near N = 885" (it rounds the ridge to 295)
    assert n_cross is not None and abs(n_cross - 885) <= 2


def test_matmul_4096_cubed() -> None:
    # seed rapid-fire: 2·4096³ FLOP over 3·4096²·2 bytes = 1365.3 FLOP/byte, compute-bound on H100
    p = place(matmul_graph(4096, 4096, 4096).kernels()[0], "h100", "bf16")
    assert p.flop == 2 * 4096**3
    assert p.bytes == 3 * 4096**2 * 2
    assert p.flop_per_byte == pytest.approx(1365.33, abs=0.01)
    assert p.bound_class == "compute"
    assert p.time_s == pytest.approx(2 * 4096**3 / 989.4e12)


def test_skinny_matmul_intensity_is_about_t_and_the_ridge_is_a_batch_size() -> None:
    h100 = get_machine("h100")

    def intensity(t: int) -> float:
        return place(matmul_graph(t, 28672, 8192).kernels()[0], h100).flop_per_byte

    # T·h·f / (T·h + h·f + T·f): for T = 1 it is 234881024 / (8192 + 234881024 + 28672) = 0.99984
    assert intensity(1) == pytest.approx(1.0, rel=1e-3)
    assert intensity(16) == pytest.approx(16, rel=0.01)
    # T = 295.3·h·f / (h·f − 295.3·(h + f)) = 309.7: the seed's "about 300 tokens"
    assert crossover(intensity, h100.ridge_flop_per_byte("bf16")) == 310


def test_residual_add_and_rmsnorm_intensity() -> None:
    add = place(elementwise_graph("add", 1, 1 << 20).kernels()[0], "h100")
    assert add.flop_per_byte == pytest.approx(1 / 6)  # 1 FLOP per 2 reads + 1 write of 2 bytes
    norm = place(elementwise_graph("rmsnorm", 8192, 8192).kernels()[0], "h100")
    # 6·8192² FLOP / (2·2·8192² + 2·8192 gain bytes) = 1.49995
    assert norm.flop_per_byte == pytest.approx(1.5, rel=1e-4)
    assert norm.bytes == 2 * 2 * 8192 * 8192 + 2 * 8192


def test_h100_at_intensity_1_5_attains_5_tflops_half_a_percent() -> None:
    p = place_flop_bytes(1.5e9, 1e9, "h100", "bf16")
    assert p.attainable_flop_per_s == pytest.approx(1.5 * 3.35e12)  # 5.03 TFLOP/s: "attains 5 TFLOP/s"
    assert p.fraction_of_peak == pytest.approx(1.5 * 3.35 / 989.4)  # 0.51%: "half a percent of peak"
    assert p.bound_class == "memory"


def test_rmsnorm_8192_squared_moves_134_mb_each_way_in_80_us() -> None:
    kernel = elementwise_graph("rmsnorm", 8192, 8192).kernels()[0]
    p = place(kernel, "h100", "bf16")
    x_bytes = 8192 * 8192 * 2  # 134,217,728 B = 134.2 MB of bf16 activations
    # read x and the 8192 bf16 gains, write y: x_bytes each way
    assert sum(t.bytes for t in kernel.reads) == x_bytes + 8192 * 2
    assert sum(t.bytes for t in kernel.writes) == x_bytes
    assert p.time_s == pytest.approx((2 * x_bytes + 2 * 8192) / 3.35e12)  # 80.1 µs
    assert 79e-6 < p.time_s < 81e-6
    # the seed: "its 0.4 GFLOP would have taken 400 nanoseconds" at the BF16 matrix peak
    assert p.flop / 989.4e12 == pytest.approx(0.407e-6, rel=0.01)
    # on the FP32 vector units that do the work: 4.03e8 / 67e12 = 6.0 µs, still 13x under the memory time
    assert p.compute_time_s == pytest.approx(6 * 8192 * 8192 / 67e12)


@pytest.mark.parametrize("n", [1024, 8192, 32768])
def test_naive_attention_sits_at_d_over_2_at_every_length(n: int) -> None:
    g = attention_graph(n, 128)
    naive = analyze_graph(g, "h100", "bf16", attention_plans("attention")["none"])
    # 4·N²·d matmul FLOPs + 5·N² softmax FLOPs over 8·N² score bytes + 8·N·d bytes of q, k, v, o
    expected = (4 * n * n * 128 + 5 * n * n) / (8 * n * n + 8 * n * 128)
    assert naive.flop_per_byte == pytest.approx(expected)
    # the seed's d/2 counts the score traffic alone: 4·N²·d / 8·N² = 64 at every N
    assert 4 * n * n * 128 / (naive.bytes - 8 * n * 128) == 128 / 2
    # with q, k, v, o it is 4d / (8 + 8d/N): 56.9 at N = 1024, 63.0 at 8192, 63.8 at 32768
    assert 128 / 2 * 0.88 < naive.flop_per_byte < 128 / 2 * 1.02
    assert naive.bytes == 8 * n * n + 8 * n * 128
    assert all(p.bound_class == "memory" for p in naive.placements)


def test_fused_attention_sits_at_n_over_2_with_identical_flops() -> None:
    n, d = 8192, 128
    g = attention_graph(n, d)
    plans = attention_plans("attention")
    naive = analyze_graph(g, "h100", "bf16", plans["none"])
    fused = analyze_graph(g, "h100", "bf16", plans["flash"])
    assert fused.flop == naive.flop  # same ops, two plans
    assert fused.bytes == 8 * n * d  # q, k, v, o: 4 tensors of N·d at 2 bytes
    matrix_flop = sum(p.cost.flop_by_unit.get("matrix", 0) for p in fused.placements)
    assert matrix_flop == 4 * n * n * d  # the seed's 4N²d
    assert matrix_flop / fused.bytes == n / 2 == 4096  # "At 8k tokens that is 4096"
    assert fused.flop_per_byte == pytest.approx(4096, rel=0.01)  # + 5N² softmax FLOPs: 4136
    assert fused.placements[0].bound_class == "compute"
    assert naive.bytes / fused.bytes > 60  # "a hundred times fewer bytes" (65x with q, k, v, o counted)


def test_causal_attention_counts_unmasked_pairs() -> None:
    n, d = 4096, 128
    full = attention_graph(n, d).flop
    causal = attention_graph(n, d, causal=True).flop
    assert causal / full == pytest.approx((n * (n + 1) / 2) / (n * n))  # N(N+1)/2 of N² pairs


def test_gqa_reads_each_kv_head_once() -> None:
    g = attention_graph(1024, 128, heads=64, kv_heads=8)
    fused = g.kernels(attention_plans("attention")["flash"])[0]
    # q and o: 64 heads, k and v: 8 heads, each 1024·128·2 bytes
    assert fused.bytes == (64 + 64 + 8 + 8) * 1024 * 128 * 2


def test_fp8_math_over_bf16_bytes_is_more_memory_bound_on_b200() -> None:
    # seed: "a kernel whose bytes stay in BF16 becomes more memory-bound every time the tensor cores get
    # faster; its point does not move while the ridge runs away from it"
    g = matmul_graph(400, 28672, 8192, dtype="bf16")
    bf16 = place(g.kernels()[0], "b200", "bf16")
    fp8 = place(g.kernels()[0], "b200", "fp8")
    assert fp8.flop_per_byte == bf16.flop_per_byte
    assert fp8.ridge_flop_per_byte == 2 * bf16.ridge_flop_per_byte
    assert bf16.bound_class == "compute" and fp8.bound_class == "memory"  # I ≈ 391: right of 293, left of 587


@pytest.mark.parametrize(("dtype", "ridge_dtype"), [("bf16", "bf16"), ("fp8", "fp8"), ("fp4", "fp4")])
def test_crossover_batch_stays_near_the_ridge_when_bytes_shrink_with_precision(dtype: str, ridge_dtype: str) -> None:
    b200 = get_machine("b200")

    def intensity(t: int) -> float:
        return place(matmul_graph(t, 28672, 8192, dtype=dtype).kernels()[0], b200, dtype).flop_per_byte

    t = crossover(intensity, b200.ridge_flop_per_byte(ridge_dtype))
    # bytes per element 2, 1, 0.5 while the ridge goes 293, 587, 1173 (the seed's 281, 562, 1125 at 8 TB/s):
    # I ≈ T·2/bytes, so T* ≈ 293·(1 + small)
    assert t is not None and 293 <= t <= 313
