"""Inside a CUDA GPU, measured: the L2's bandwidth, the L1/shared-memory SRAM's, and the
exponential units' rate. Three Triton microkernels (Triton ships with CUDA builds of torch on Linux;
without it each is reported as not measured, and nothing else is lost).

L2 read (`_l2_read`). A working set of a quarter of the L2 (fp32), far from filling it, read over
and over: pass after pass of 16 KiB blocks, the blocks dealt round-robin to 4 programs per SM,
loaded with the `.cg` cache modifier (cache in L2 only, not L1), so every byte comes from L2 as the
Empirical Roofline Toolkit's GPU L2 level does. Counted: blocks × 16 KiB per call (reads; the
accumulators written once per program are 1/passes of that and not counted).

L1/shared SRAM read (`_l1_read`). On NVIDIA GPUs since Volta, L1 and shared memory are one SRAM per
SM with one load path (128 bytes per clock per SM on A100, H100 and B200). Triton exposes no
shared-memory loads, so the SRAM is measured through L1 hits: each program re-reads its own 32 KiB
tile, its two 16 KiB halves in turn (4 programs per SM: 128 KiB, inside the 192-256 KiB SRAM), with
the default `.ca` modifier. Counted: programs × passes × 16 KiB. Saved as the shared-memory level
(smem) of the measured machine.

Exponentials (`_exp_chain`). Each thread keeps 4 independent chains x ← 2^(−x) (PTX ex2.approx.ftz.f32,
one MUFU.EX2 each; values stay in (0.35, 0.71)), so the special-function units, not latency, set the
pace: 16 exponentials per clock per SM on H100 and B200 against 128 FP32 lanes for the negation.
Counted: threads × 4 × iterations exponentials.

Every call is timed with device events (timing.time_cuda) after a warm-up that raises the clock;
each figure is the best over the samples.

torch and triton are imported inside functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.frozen import frozen
from roofline.measure.env import Environment
from roofline.measure.runs import MeasureSettings, Progress
from roofline.measure.timing import Timing, time_cuda
from roofline.vocab import Level, Resource, Unit

BLOCK = 4096  # fp32 elements per block: 16 KiB
PROGRAMS_PER_SM = 4
L2_SHARE = 0.25  # the L2 working set: a quarter of the L2
L2_CALL_BYTES = 2 * 2**30  # each L2 call reads about this much
L1_PASSES = 512  # each program reads its 16 KiB tile this many times per call
EXP_CHAINS = 4
EXP_ITERATIONS = 512
EXP_THREADS_PER_PROGRAM = 1024  # elements per program of the exp kernel: 4 per thread at num_warps = 8
TRITON_HINT = "needs Triton (it ships with CUDA builds of torch on Linux: pip install triton)"


@frozen
class ChipRun:
    """One microkernel's run: `work` bytes (a level) or exponentials (Unit.EXP) per call."""

    resource: Resource  # Level.L2, Level.SMEM or Unit.EXP
    name: str
    work: float
    timing: Timing
    counted: str

    @property
    def best_rate(self) -> float:
        return self.work / self.timing.min_s

    @property
    def unit(self) -> str:
        return "ops_per_s" if isinstance(self.resource, Unit) else "bytes_per_s"

    def to_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "name": self.name, "work": self.work, "counted": self.counted,
                f"max_{self.unit}": self.best_rate, f"median_{self.unit}": self.work / self.timing.median_s,
                **self.timing.to_dict()}


@frozen
class Shape:
    """A microkernel's launch and what one call does."""

    programs: int
    blocks: int  # blocks of BLOCK elements in the working set (L2: shared by all; L1: per program)
    passes: int  # passes over the working set per call
    work: float  # bytes read (or exponentials) per call


def l2_shape(l2_bytes: int, sms: int, call_bytes: float = L2_CALL_BYTES) -> Shape:
    """A quarter of the L2 in 16 KiB blocks, read `passes` times (about `call_bytes` per call)."""
    blocks = max(1, int(l2_bytes * L2_SHARE) // (BLOCK * 4))
    passes = max(1, round(call_bytes / (blocks * BLOCK * 4)))
    return Shape(PROGRAMS_PER_SM * sms, blocks, passes, float(blocks * passes * BLOCK * 4))


def l1_shape(sms: int, passes: int = L1_PASSES) -> Shape:
    """A 32 KiB tile per program (two blocks), 4 programs per SM; each pass reads one 16 KiB block."""
    programs = PROGRAMS_PER_SM * sms
    return Shape(programs, 2, passes, float(programs * passes * BLOCK * 4))


def exp_shape(sms: int, iterations: int = EXP_ITERATIONS) -> Shape:
    """4 programs per SM of 1024 elements, each element EXP_CHAINS chains of `iterations` exponentials."""
    programs = PROGRAMS_PER_SM * sms
    return Shape(programs, 1, iterations, float(programs * EXP_THREADS_PER_PROGRAM * EXP_CHAINS * iterations))


def _kernels() -> dict[str, Any]:
    """The three Triton kernels, compiled on first launch."""
    import triton
    import triton.language as tl

    # Triton resolves the names a kernel body uses (tl) in its module's globals, not in this function's
    # scope; the annotations are strings ("tl.constexpr", from __future__ import annotations), which
    # Triton reads by name
    globals()["tl"] = tl

    @triton.jit
    def _l2_read(x_ptr, out_ptr, n_blocks, total, BLOCK: tl.constexpr,  # type: ignore[no-untyped-def]
                 PROGRAMS: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(pid, total, PROGRAMS):  # blocks dealt round-robin to the programs
            acc += tl.load(x_ptr + (i % n_blocks) * BLOCK + offs, cache_modifier=".cg")
        tl.store(out_ptr + pid * BLOCK + offs, acc)

    @triton.jit
    def _l1_read(x_ptr, out_ptr, passes, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(passes):
            # the tile's two halves in turn: the address changes with i, so no load leaves the loop
            acc += tl.load(x_ptr + (2 * pid + i % 2) * BLOCK + offs)
        tl.store(out_ptr + pid * BLOCK + offs, acc)

    @triton.jit
    def _exp_chain(x_ptr, out_ptr, iterations, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        a = tl.load(x_ptr + offs)
        b = a + 0.25
        c = a + 0.5
        d = a + 0.75
        for _ in range(iterations):
            a = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [-a], dtype=tl.float32,
                                          is_pure=True, pack=1)
            b = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [-b], dtype=tl.float32,
                                          is_pure=True, pack=1)
            c = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [-c], dtype=tl.float32,
                                          is_pure=True, pack=1)
            d = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [-d], dtype=tl.float32,
                                          is_pure=True, pack=1)
        tl.store(out_ptr + offs, a + b + c + d)

    return {"l2": _l2_read, "l1": _l1_read, "exp": _exp_chain}


def _runner(kind: str, shape: Shape, kernels: dict[str, Any]) -> Callable[[int], object]:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(7)
    if kind == "l2":
        x = torch.rand(shape.blocks * BLOCK, device="cuda", generator=gen) + 0.5
        out = torch.empty(shape.programs * BLOCK, device="cuda")
        total = shape.blocks * shape.passes
        return lambda _i: kernels["l2"][(shape.programs,)](x, out, shape.blocks, total, BLOCK=BLOCK,
                                                           PROGRAMS=shape.programs, num_warps=8)
    if kind == "l1":
        x = torch.rand(shape.programs * shape.blocks * BLOCK, device="cuda", generator=gen) + 0.5
        out = torch.empty(shape.programs * BLOCK, device="cuda")
        return lambda _i: kernels["l1"][(shape.programs,)](x, out, shape.passes, BLOCK=BLOCK, num_warps=8)
    x = torch.rand(shape.programs * EXP_THREADS_PER_PROGRAM, device="cuda", generator=gen) + 0.5
    out = torch.empty_like(x)
    return lambda _i: kernels["exp"][(shape.programs,)](x, out, shape.passes, BLOCK=EXP_THREADS_PER_PROGRAM,
                                                        num_warps=8)


def measure_cuda_chip(settings: MeasureSettings, env: Environment,
                      say: Progress) -> tuple[list[ChipRun], dict[str, str]]:
    """The L2, L1/shared and exponential runs, and what was not measured (each on its own: one that
    fails costs only itself)."""
    try:
        kernels = _kernels()
    except ImportError:
        return [], {name: TRITON_HINT for name in ("l2 bandwidth", "smem bandwidth", "exp rate")}
    sms = max(1, env.threads)
    l2_bytes = env.llc_bytes or 50 * 2**20
    repeats = settings.repeats * 2
    jobs: list[tuple[str, Resource, str, Shape, str]] = [
        ("l2", Level.L2, "l2 bandwidth", l2_shape(l2_bytes, sms),
         f"L2 reads (.cg): a quarter of the {l2_bytes / 2**20:g} MiB L2 read repeatedly, 16 KiB blocks"),
        ("l1", Level.SMEM, "smem bandwidth", l1_shape(sms),
         "L1 hits of the unified L1/shared SRAM: 4 programs per SM each re-reading its own 32 KiB tile"),
        ("exp", Unit.EXP, "exp rate", exp_shape(sms),
         f"ex2.approx.ftz.f32 (MUFU.EX2): {EXP_CHAINS} independent chains x <- 2^-x per thread"),
    ]
    runs: list[ChipRun] = []
    skipped: dict[str, str] = {}
    for kind, resource, name, shape, counted in jobs:
        say(f"inside the chip: {name} (triton)")
        try:
            timing = time_cuda(_runner(kind, shape, kernels), repeats=repeats, warmup=3)
        except Exception as exc:  # reported, not fatal: a Triton or driver version this code did not meet
            skipped[name] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
            continue
        runs.append(ChipRun(resource, name, shape.work, timing, counted))
    return runs, skipped


__all__ = ["ChipRun", "Shape", "exp_shape", "l1_shape", "l2_shape", "measure_cuda_chip"]
