"""Real kernels timed on the device and placed beside their predictions under the measured roof.

Each case is one kernel launch, so that its measured time is comparable with one time floor:
matmuls (square, and skinny decode-like: a few tokens through a weight), the residual add,
RMSNorm, softmax, SwiGLU as eager PyTorch runs it (two kernels: silu, then the multiply), naive
attention as its three kernels (q·kᵀ writing the scores, softmax, p·v) and fused attention
(scaled_dot_product_attention: one kernel). The prediction of a case is the analytic kernel of the
same shapes (roofline.kernels' builders and FLOP conventions), placed with `roofline.placement.place`.

Timing: warm-up calls first; then the median of many samples (device events on CUDA, the host
clock on a CPU). Inputs and outputs rotate over enough independent sets to cover eight times the
last-level cache, so a memory-bound kernel never finds last call's data in cache; outputs are
preallocated (`out=`) where PyTorch allows it, so a CPU kernel is not charged for page faults.
Operands are random normal, never zeros.

A measured point faster than its floor is flagged (`Placement.above_roof`): it means the model
undercounts the kernel's bytes or FLOPs, or the timing is wrong; it is never drawn silently.

torch is imported inside functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from roofline.dtypes import DType, get_dtype, storage_dtype
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.graph import Graph, Kernel
from roofline.hardware import Machine
from roofline.kernels import attention_graph, attention_plans, elementwise_graph, matmul_graph
from roofline.measure.ceilings import need_cuda, need_torch
from roofline.measure.timing import Timing, rotation_count, time_calls, time_cuda
from roofline.placement import Placement, place

Runner = Callable[[int], object]


@frozen
class Case:
    """One kernel: its analytic prediction and how to run it. `build(sets)` allocates `sets` input
    sets on the device and returns fn(i) running the kernel on set i % sets."""

    name: str
    kernel: Kernel
    build: Callable[[int], Runner]
    set_bytes: float  # bytes of one set of inputs and outputs
    note: str = ""


@frozen
class BenchResult:
    placement: Placement
    timing: Timing
    sets: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = self.placement.to_dict()
        d.update({"timing": self.timing.to_dict(), "input_sets": self.sets})
        if self.note:
            d["note"] = self.note
        return d


@frozen
class Sizes:
    """Shapes of the cases; `for_device` picks them so each memory-bound tensor is well above the
    CPU's mmap threshold-free range yet the sets together exceed the cache."""

    square: int
    skinny_tokens: int
    skinny_width: int
    rows: int
    cols: int
    attn_batch: int
    attn_heads: int
    attn_seq: int
    head_dim: int

    @staticmethod
    def for_device(device: str, quick: bool) -> Sizes:
        if device == "cuda":
            if quick:
                return Sizes(8192, 16, 8192, 8192, 8192, 2, 16, 2048, 128)
            return Sizes(8192, 16, 8192, 16384, 8192, 4, 32, 2048, 128)
        # CPU tensors stay at or under 16 MiB each (fp32): larger ones are mmap-ed afresh by malloc
        # on every call, and the page faults would be charged to the kernel
        if quick:
            return Sizes(1024, 8, 2048, 1024, 2048, 1, 8, 512, 64)
        return Sizes(2048, 8, 4096, 1024, 4096, 1, 8, 1024, 64)

    @staticmethod
    def tiny() -> Sizes:
        """Seconds-long CPU runs for tests."""
        return Sizes(256, 4, 512, 256, 512, 1, 2, 128, 32)


CASE_KINDS = ("matmul", "add", "rmsnorm", "softmax", "silu", "mul", "attention")  # each case's name starts so
BENCH_DTYPES = ("fp64", "fp32", "bf16", "fp16")


def check_request(dtype: str | DType, only: Sequence[str] = ()) -> None:
    """Refuse a dtype the bench cannot run or an --only word no case can start with, before anything
    is measured (the exact match of `only` against the sized names is `cases`')."""
    dt = storage_dtype(dtype)
    if dt.name not in BENCH_DTYPES:
        raise RooflineError(f"bench runs in fp64, fp32, bf16 or fp16; not {dt.name}")
    for word in only:
        if not any(kind.startswith(word) or word.startswith(kind) for kind in CASE_KINDS):
            raise RooflineError(f"no bench case starts with {word}; cases: {', '.join(CASE_KINDS)}")


def _torch_dtype(dt: DType) -> Any:
    import torch

    table = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if dt.name not in table:
        raise RooflineError(f"bench runs in {', '.join(BENCH_DTYPES[:-1])} or {BENCH_DTYPES[-1]}; not {dt.name}")
    return table[dt.name]


def _only(graph: Graph) -> Kernel:
    kernels = graph.kernels()
    if len(kernels) != 1:
        raise RooflineError(f"{graph.name}: expected one kernel")
    return kernels[0]


def cases(sizes: Sizes, dtype: str | DType, device: str, only: Sequence[str] = ()) -> list[Case]:
    """The bench cases for `sizes`; `only` keeps cases whose name starts with one of its words."""
    import torch

    dt = storage_dtype(dtype)
    tdt = _torch_dtype(dt)
    el = dt.bytes_per_element
    gen = torch.Generator(device=device).manual_seed(0)

    def randn(*shape: int) -> Any:
        return torch.randn(shape, device=device, generator=gen, dtype=torch.float32).to(tdt)

    def empty(*shape: int) -> Any:
        # written once now, so that no timed call pays for first-touch page faults
        return torch.empty(shape, device=device, dtype=tdt).fill_(1.0)

    out: list[Case] = []

    def matmul_case(name: str, m: int, n: int, k: int, note: str = "") -> None:
        def build(sets: int) -> Runner:
            data = [(randn(m, k), randn(k, n), empty(m, n)) for _ in range(sets)]
            return lambda i: torch.matmul(data[i % sets][0], data[i % sets][1], out=data[i % sets][2])
        out.append(Case(name, _only(matmul_graph(m, n, k, dt)), build, (m * k + k * n + m * n) * el, note))

    s = sizes
    matmul_case(f"matmul {s.square}×{s.square}×{s.square}", s.square, s.square, s.square)
    matmul_case(f"matmul skinny {s.skinny_tokens}×{s.skinny_width}×{s.skinny_width}", s.skinny_tokens,
                s.skinny_width, s.skinny_width, "decode-like: a few tokens through one weight; intensity ≈ tokens")
    r, c = s.rows, s.cols

    def rows_case(kind: str, inputs: int, run: Callable[[Sequence[Any], Any], object], note: str = "") -> None:
        def build(sets: int) -> Runner:
            data = [([randn(r, c) for _ in range(inputs)], empty(r, c)) for _ in range(sets)]
            return lambda i: run(*data[i % sets])
        g = elementwise_graph(kind, r, c, dt)
        out.append(Case(f"{kind} {r}×{c}", _only(g), build, (inputs + 1) * r * c * el, note))

    gamma = randn(c)
    rows_case("add", 2, lambda xs, o: torch.add(xs[0], xs[1], out=o), "residual add")
    rows_case("rmsnorm", 1, lambda xs, o: torch.nn.functional.rms_norm(xs[0], (c,), gamma, 1e-5),
              "torch.nn.functional.rms_norm (allocates its output)")
    rows_case("softmax", 1, lambda xs, o: torch.ops.aten._softmax.out(xs[0], -1, False, out=o))
    # SwiGLU as eager PyTorch runs it: silu(gate) is written, then multiplied by up: two kernels
    rows_case("silu", 1, lambda xs, o: torch.ops.aten.silu.out(xs[0], out=o), "SwiGLU, kernel 1 of 2: silu(gate)")
    rows_case("mul", 2, lambda xs, o: torch.mul(xs[0], xs[1], out=o), "SwiGLU, kernel 2 of 2: silu(gate)·up")

    b, h, n, d = s.attn_batch, s.attn_heads, s.attn_seq, s.head_dim
    g = attention_graph(n, d, dt, batch=b, heads=h)
    naive = g.kernels(attention_plans("attention")["none"])
    fused = g.kernels(attention_plans("attention")["flash"])
    q_bytes = b * h * n * d * el
    s_bytes = b * h * n * n * el

    def qk_build(sets: int) -> Runner:
        data = [(randn(b, h, n, d), randn(b, h, n, d), empty(b, h, n, n)) for _ in range(sets)]
        return lambda i: torch.matmul(data[i % sets][0], data[i % sets][1].transpose(-1, -2), out=data[i % sets][2])

    def softmax_build(sets: int) -> Runner:
        data = [(randn(b, h, n, n), empty(b, h, n, n)) for _ in range(sets)]
        return lambda i: torch.ops.aten._softmax.out(data[i % sets][0], -1, False, out=data[i % sets][1])

    def pv_build(sets: int) -> Runner:
        data = [(torch.softmax(randn(b, h, n, n), -1), randn(b, h, n, d), empty(b, h, n, d)) for _ in range(sets)]
        return lambda i: torch.matmul(data[i % sets][0], data[i % sets][1], out=data[i % sets][2])

    def sdpa_build(sets: int) -> Runner:
        data = [(randn(b, h, n, d), randn(b, h, n, d), randn(b, h, n, d)) for _ in range(sets)]
        return lambda i: torch.nn.functional.scaled_dot_product_attention(*data[i % sets])

    shape = f"B={b} H={h} N={n} d={d}"
    out += [
        Case(f"attention naive q·kᵀ {shape}", naive[0], qk_build, 2 * q_bytes + s_bytes,
             "naive attention, kernel 1 of 3: the scores are written to memory"),
        Case(f"attention naive softmax {shape}", naive[1], softmax_build, 2 * s_bytes,
             "naive attention, kernel 2 of 3: scores read, probabilities written"),
        Case(f"attention naive p·v {shape}", naive[2], pv_build, s_bytes + 2 * q_bytes,
             "naive attention, kernel 3 of 3: probabilities read back"),
        Case(f"attention fused {shape}", fused[0], sdpa_build, 4 * q_bytes,
             "scaled_dot_product_attention: scores stay on chip"),
    ]
    if only:
        out = [cs for cs in out if any(cs.name.startswith(w) for w in only)]
        if not out:
            raise RooflineError(f"no bench case starts with {', '.join(only)}; cases: {', '.join(CASE_KINDS)}")
    return out


def run_bench(machine: Machine, *, device: str = "cpu", dtype: str | DType | None = None, quick: bool = False,
              sizes: Sizes | None = None, repeats: int | None = None, only: Sequence[str] = (),
              progress: Callable[[str], None] | None = None) -> list[BenchResult]:
    """Run every case on `device` and place it on `machine` (normally the measured one)."""
    if device == "cuda":
        torch = need_cuda("bench --device cuda")
    elif device == "cpu":
        torch = need_torch("roofline bench")
    else:
        raise RooflineError(f"unknown device {device!r}; devices: cpu, cuda")
    dt = get_dtype(dtype or ("bf16" if device == "cuda" else "fp32"))
    if not machine.has_peak(dt):
        raise RooflineError(f"{machine.id} has no {dt.peak_key} peak; measure it first or pick --dtype "
                            f"from {', '.join(machine.dtypes())}")
    say = progress or (lambda _t: None)
    chosen = sizes or Sizes.for_device(device, quick)
    llc: float | None
    if device == "cuda":
        llc = float(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0) or None
    else:
        from roofline.measure.env import cpu_llc_bytes

        llc = cpu_llc_bytes()
    n_repeats = repeats or (7 if quick else 15)
    results: list[BenchResult] = []
    with torch.inference_mode():
        for case in cases(chosen, dt, device, only):
            say(case.name)
            sets = rotation_count(case.set_bytes, llc, memory_budget_bytes=(8 if device == "cuda" else 2) * 2**30)
            fn = case.build(sets)
            # the warm-up runs every set once: each set's memory is mapped and touched before timing
            if device == "cuda":
                timing = time_cuda(fn, repeats=2 * n_repeats, warmup=max(3, sets), budget_s=5.0)
            else:
                timing = time_calls(fn, repeats=n_repeats, warmup=max(2, sets), min_sample_s=0.002, budget_s=5.0)
            del fn
            p = place(case.kernel, machine, dt, name=case.name, measured_time_s=timing.median_s)
            p = replace(p, note=case.note)
            results.append(BenchResult(p, timing, sets, case.note))
            if device == "cuda":
                torch.cuda.empty_cache()
    return results


def bench_machine(device: str, quick: bool, dtype: str | None, progress: Callable[[str], None] | None = None,
                  ) -> tuple[Machine, float]:
    """Measure the roof the bench is placed under (bandwidth and the bench dtype's matmul only)."""
    from roofline.measure.ceilings import measure_ceilings
    from roofline.measure.runs import MeasureSettings

    key = get_dtype(dtype or ("bf16" if device == "cuda" else "fp32")).peak_key
    t0 = time.perf_counter()
    ceilings = measure_ceilings(MeasureSettings(device=device, quick=quick, dtypes=(key,)), progress)
    return ceilings.to_machine(), time.perf_counter() - t0
