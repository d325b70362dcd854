"""The measuring layer on a CUDA GPU. Every test skips cleanly on a machine without one (and without
torch); bench/gpu_check.py is the fuller, timed check for when a GPU is at hand."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_cuda_ceilings_are_measured_for_each_dtype() -> None:
    from roofline.measure.ceilings import measure_ceilings
    from roofline.measure.runs import MeasureSettings

    c = measure_ceilings(MeasureSettings(device="cuda", quick=True, buffer_bytes=256 * 2**20, max_matmul_n=2048,
                              dtypes=("fp32", "bf16")))
    assert 1e10 < c.memory_bytes_per_s < 2e13  # any CUDA GPU streams between 10 GB/s and 20 TB/s
    peaks = c.peak_flop_per_s
    assert peaks["bf16"] > peaks["fp32"] > 1e11  # tensor cores beat plain fp32 (TF32 is off for fp32)
    m = c.to_machine()
    assert m.kind == "gpu" and m.measured


def test_cuda_bench_places_real_kernels_under_the_measured_roof() -> None:
    from roofline.measure.bench import Sizes, bench_machine, run_bench

    machine, _ = bench_machine("cuda", quick=True, dtype="bf16")
    sizes = Sizes(2048, 16, 4096, 4096, 4096, 1, 8, 1024, 128)
    results = run_bench(machine, device="cuda", dtype="bf16", sizes=sizes, repeats=5, only=["matmul", "add"])
    for r in results:
        assert 0 < (r.placement.fraction_of_roof or 0) <= 1.05, r.placement.name  # under the roof, give or take noise


def test_trace_on_cuda_matches_the_cpu_flops() -> None:
    from roofline.tracing import trace_call

    x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    t = trace_call(lambda: torch.nn.functional.linear(x, w), time_ops=True)
    assert t.ops[0].flop == 2 * 256 * 1024 * 512
    assert t.times_s and all(s > 0 for s in t.times_s.values())


def test_fp8_matmul_on_cuda_is_right_where_the_gpu_has_fp8() -> None:
    from roofline.measure.cuda import fp8_matmul, fp8_operands

    if torch.cuda.get_device_capability(0) < (8, 9):
        pytest.skip("needs FP8 tensor cores (CUDA compute capability 8.9+)")
    a, b, scale = fp8_operands(1024, "cuda", seed=3)
    out = fp8_matmul(a, b, scale)
    ref = a.double() @ b.double()  # the exact product of the e4m3 values
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-2  # bf16 output, fast accumulation
