"""Tracer overhead: one decode step of a small Hugging Face Llama, untraced and traced, side by side.

The runs are interleaved (untraced, traced, untraced, ...) so that the machine's noise hits both alike;
we report min and median of each, the ratio of the medians (traced / untraced) and the overhead per
ATen op the tracer recorded ((traced − untraced) / ops). The model: transformers' LlamaForCausalLM,
random weights, fp32 on CPU, a 32-token prompt already in the cache, one new token per step.

The row "dispatch mode only" runs the step under a TorchDispatchMode that records nothing (each op
called through as it came): the floor any tracer built on a dispatch mode, as ours is, pays before it
records a thing. Its ratio says what part of the target (at most 1.5x, issue 24 item 12) the
interception itself takes.

With --baseline REF (a git revision, e.g. HEAD) the tracer as it was at REF (its recorder.py, or
tracer.py before the split, run against today's registry) is timed in the same rounds: before and
after under the same load.

Usage: python bench/bench_trace.py [--runs N] [--layers L] [--hidden H] [--baseline REF] [--out FILE]
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


def build(layers: int, hidden: int) -> tuple[Any, Any, Any]:
    """The model, a prompt's cache and the decode step's inputs."""
    import torch
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1024, hidden_size=hidden, intermediate_size=hidden * 3, num_hidden_layers=layers,
                      num_attention_heads=max(hidden // 32, 1), num_key_value_heads=max(hidden // 64, 1),
                      max_position_embeddings=256)
    model = LlamaForCausalLM(cfg).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, 32))
    with torch.inference_mode():
        cache = DynamicCache(config=cfg)
        model(prompt, cache=cache, use_cache=True)
    token = torch.randint(0, cfg.vocab_size, (1, 1))
    return model, cache, token


def step(model: Any, cache: Any, token: Any) -> None:
    """One decode step at position 32; the cache is cropped back after it, so every step is alike."""
    import torch

    with torch.inference_mode():
        model(token, cache=cache, use_cache=True, position_ids=torch.tensor([[32]]))
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
    ap.add_argument("--baseline", default=None, metavar="REF", help="also time the tracer as it was at REF")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import torch

    from roofline.tracing import trace

    torch.set_num_threads(1)
    model, cache, token = build(args.layers, args.hidden)
    tracers = {"traced": trace}
    if args.baseline:
        tracers[f"traced@{args.baseline}"] = baseline_trace(args.baseline)

    def untraced() -> None:
        step(model, cache, token)

    def traced_with(tracer: Callable[..., Any]) -> Callable[[], None]:
        def run() -> None:
            with tracer(model):
                step(model, cache, token)
        return run

    from torch.utils._python_dispatch import TorchDispatchMode

    class CallThrough(TorchDispatchMode):  # type: ignore[misc]
        """Each op called as it came: the interception alone, nothing recorded."""

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    def dispatch_only() -> None:
        with CallThrough():
            step(model, cache, token)

    runs = {"untraced": untraced, "dispatch mode only": dispatch_only,
            **{k: traced_with(v) for k, v in tracers.items()}}
    for _ in range(3):  # warm up every path
        for fn in runs.values():
            fn()
    with trace(model) as t:
        step(model, cache, token)
    ops = len(t.ops)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.runs):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    p = statistics.median(times["untraced"])
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lines = [f"# uptime: {uptime}",
             f"# bench_trace: {args.runs} interleaved runs each, {os.cpu_count()} CPUs, 1 torch thread, "
             f"Python {sys.version.split()[0]}, torch {torch.__version__}, load average "
             f"{os.getloadavg()[0]:.1f}",
             f"# decode step of LlamaForCausalLM ({args.layers} layers, hidden {args.hidden}, fp32, CPU), "
             f"context 32; {ops} ops recorded per step",
             f"{'run':<20}{'min':>10}{'median':>10}{'ratio':>8}{'per op':>10}"]
    for name, ts in times.items():
        q = statistics.median(ts)
        per_op = f"{(q - p) / ops * 1e6:>7.0f} µs" if name != "untraced" else ""
        lines.append(f"{name:<20}{min(ts) * 1e3:>8.2f}ms{q * 1e3:>8.2f}ms{q / p:>7.2f}x{per_op:>10}")
    lines.append("ratio: median traced / median untraced; per op: (traced − untraced) / ops recorded; "
                 "dispatch mode only: every op called through a TorchDispatchMode that records nothing")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
