"""Tracer overhead: one decode step of a small Hugging Face Llama, untraced and traced, side by side.

The runs are interleaved (untraced, traced, untraced, ...) so that the machine's noise hits both alike;
we report min and median of each, the ratio of the medians (traced / untraced) and the overhead per
ATen op the tracer recorded ((traced − untraced) / ops). The model: transformers' LlamaForCausalLM,
random weights, fp32 on CPU, a 32-token prompt already in the cache, one new token per step.

The tracer works in two steps (roofline.tracing.capture): while the program runs each call is written
down; when the block ends the calls are replayed into the graph. "traced: step" is the step inside the
block (what the program feels); "traced: step + graph" is the whole block, the graph built.

The floors, each a way to see every op of the step, recording nothing of its own:
  dispatch mode only     a TorchDispatchMode calling each op through (the interception ours is built on:
                         what any tracer on a dispatch mode pays before it records a thing)
  function mode only     a TorchFunctionMode calling each torch function through (sees the Python-level
                         torch calls, not the ATen ops under them: too little for the tracer's graph)
  profiler               torch.profiler.profile (Kineto's RecordFunction callbacks, in C++), no shapes
  profiler + shapes      the same with record_shapes=True (what `roofline profile` runs)
Their ratios say what part of the target (at most 1.5x, issue 24 item 12) the interception takes.

With --baseline REF (a git revision, e.g. HEAD) the tracer as it was at REF (its recorder.py, or
tracer.py before the split, run against today's registry) is timed in the same rounds: before and
after under the same load.

Usage: python bench/bench_trace.py [--runs N] [--layers L] [--hidden H] [--context C] [--baseline REF]
                                   [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def build(layers: int, hidden: int, context: int = 32) -> tuple[Any, Any, Any]:
    """The model, a prompt's cache and the decode step's inputs."""
    import torch
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1024, hidden_size=hidden, intermediate_size=hidden * 3, num_hidden_layers=layers,
                      num_attention_heads=max(hidden // 32, 1), num_key_value_heads=max(hidden // 64, 1),
                      max_position_embeddings=max(256, 2 * context))
    model = LlamaForCausalLM(cfg).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, context))
    with torch.inference_mode():
        cache = DynamicCache(config=cfg)
        model(prompt, cache=cache, use_cache=True)
    token = torch.randint(0, cfg.vocab_size, (1, 1))
    return model, cache, token


def step(model: Any, cache: Any, token: Any) -> None:
    """One decode step after the prompt; the cache is cropped back after it, so every step is alike."""
    import torch

    with torch.inference_mode():
        model(token, cache=cache, use_cache=True, position_ids=torch.tensor([[cache.get_seq_length()]]))
    cache.crop(-1)


def baseline_trace(ref: str) -> Callable[..., Any]:
    """The live recorder as it was at git revision `ref` (tracing/recorder.py; tracing/tracer.py before
    the tracer was split in three), loaded beside today's (read with git show)."""
    for path in ("src/roofline/tracing/recorder.py", "src/roofline/tracing/tracer.py"):
        shown = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"bench_trace: no tracer at {ref}")
    module = types.ModuleType("roofline.tracing._baseline_recorder")
    sys.modules[module.__name__] = module
    exec(compile(shown.stdout, f"{ref}:{path}", "exec"), module.__dict__)
    return module.trace  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--baseline", default=None, metavar="REF", help="also time the tracer as it was at REF")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from roofline.tracing import trace

    torch.set_num_threads(1)
    model, cache, token = build(args.layers, args.hidden, args.context)
    tracers = {"traced": trace}
    if args.baseline:
        tracers[f"traced@{args.baseline}"] = baseline_trace(args.baseline)

    class CallThrough(TorchDispatchMode):  # type: ignore[misc]
        """Each op called as it came: the interception alone, nothing recorded."""

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    class FunctionThrough(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    def under(make: Callable[[], Any]) -> Callable[[], tuple[float, float]]:
        """A run: the step inside `make()`'s block; (seconds of the step, seconds of the whole block)."""
        def run() -> tuple[float, float]:
            t0 = time.perf_counter()
            with make():
                step(model, cache, token)
                t1 = time.perf_counter()
            return t1 - t0, time.perf_counter() - t0
        return run

    def untraced() -> tuple[float, float]:
        t0 = time.perf_counter()
        step(model, cache, token)
        t = time.perf_counter() - t0
        return t, t

    runs: dict[str, Callable[[], tuple[float, float]]] = {
        "untraced": untraced,
        "dispatch mode only": under(CallThrough),
        "function mode only": under(FunctionThrough),
        "profiler": under(lambda: torch.autograd.profiler.profile(record_shapes=False)),
        "profiler + shapes": under(lambda: torch.autograd.profiler.profile(record_shapes=True)),
        **{name: under(lambda tracer=tracer: tracer(model)) for name, tracer in tracers.items()}}
    for _ in range(3):  # warm up every path
        for fn in runs.values():
            fn()
    with trace(model) as t:
        step(model, cache, token)
    ops = len(t.ops)
    n_calls = [0]

    class Counting(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            n_calls[0] += 1
            return func(*args, **(kwargs or {}))

    with Counting():
        step(model, cache, token)
    times: dict[str, list[float]] = {}
    for _ in range(args.runs):
        for name, fn in runs.items():
            in_step, whole = fn()
            if name.startswith("traced"):
                times.setdefault(f"{name}: step", []).append(in_step)
                times.setdefault(f"{name}: step + graph", []).append(whole)
            else:
                times.setdefault(name, []).append(whole)
    p = statistics.median(times["untraced"])
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lines = [f"# uptime: {uptime}",
             f"# bench_trace: {args.runs} interleaved runs each, {os.cpu_count()} CPUs, 1 torch thread, "
             f"Python {sys.version.split()[0]}, torch {torch.__version__}, load average "
             f"{os.getloadavg()[0]:.1f}",
             f"# decode step of LlamaForCausalLM ({args.layers} layers, hidden {args.hidden}, fp32, CPU), "
             f"context {args.context}; {n_calls[0]} ATen calls per step, {ops} ops recorded; untraced "
             f"{p / n_calls[0] * 1e6:.1f} µs per ATen call",
             f"{'run':<28}{'min':>10}{'median':>10}{'ratio':>8}{'per op':>10}"]
    for name, ts in times.items():
        q = statistics.median(ts)
        per_op = f"{(q - p) / ops * 1e6:>7.0f} µs" if name != "untraced" else ""
        lines.append(f"{name:<28}{min(ts) * 1e3:>8.2f}ms{q * 1e3:>8.2f}ms{q / p:>7.2f}x{per_op:>10}")
    lines.append("ratio: median / median untraced; per op: (median − median untraced) / ops recorded; "
                 "step: the step inside the block; step + graph: the whole block")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
