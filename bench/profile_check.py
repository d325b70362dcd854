"""Predicted against measured, kernel by kernel: a small transformer step under torch.profiler, imported
through roofline.tracing.kineto (the path of `roofline profile` and `roofline import`), each kernel's
roofline floor beside its measured time, and the error by kind.

    python bench/profile_check.py [--cpu] [--machine FILE] [--out bench/results]
    (bench/gpu_check.py runs it inside its trace step on the GPU: the report's section 3b)

    error of a kernel   |measured − floor| / measured      (1 − share of the roof below the roof)
    MAPE of a kind      the mean of its kernels' errors     (matmul, attention, elementwise, data movement)

A floor is a lower bound, so the error measures how far each kind runs from its roof: a good GEMM
sits at 20-30% (70-80% of peak), a memory-bound kernel at 10-20%; kernels above their roof (error
counted, flagged) are the model's or the timing's mistakes. On a CPU the same report runs at small
sizes (tests/test_profile_bench.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _model(device: str) -> tuple[Any, Any, str, str]:
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from test_trace import TinyConfig, tiny_llama

    if device == "cuda":
        c = TinyConfig(hidden=2048, layers=4, heads=16, kv_heads=4, intermediate=5632, vocab=32000, max_seq=4096)
        batch, seq, dtype, name = 4, 2048, torch.bfloat16, "bf16"
    else:  # small and fp32: seconds on a CPU
        c = TinyConfig(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=344, vocab=512, max_seq=256)
        batch, seq, dtype, name = 2, 64, torch.float32, "fp32"
    model = tiny_llama(c, dtype=dtype, device=device)
    ids = torch.randint(0, c.vocab, (batch, seq), device=device)
    return model, ids, name, f"hidden {c.hidden}, {c.layers} layers, batch {batch} × {seq} tokens, {name}"


def profile_report(device: str = "cpu", machine: Any = None) -> dict[str, Any]:
    """Profile one forward of the step, place every kernel on `machine` (default: h200 on CUDA, the H100
    catalog roof on a CPU, where only the arithmetic of the report is checked) and sum up by kind."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from roofline.diff import family
    from roofline.tracing.kineto import load_kineto
    from roofline.tracing.profile import verdict

    model, ids, _dt, what = _model(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.inference_mode():
        for _ in range(2):  # warm-up: kernels chosen, allocator and caches filled
            model(ids)
        if device == "cuda":
            torch.cuda.synchronize()
        with profile(activities=activities, record_shapes=True) as prof:
            model(ids)
            if device == "cuda":
                torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "step.json"
        prof.export_chrome_trace(str(path))
        p = load_kineto(path)
    roof = machine or ("h200" if device == "cuda" else "h100")
    a = p.trace.analyze(roof)  # each matmul on the roof of its operands' dtype (the tracer's rule)
    kernels: list[dict[str, Any]] = []
    for x in a.placements:
        if x.measured_time_s is None or not (x.flop or x.bytes):
            continue
        err = abs(x.measured_time_s - x.time_s) / x.measured_time_s
        kernels.append({"name": x.name, "kind": x.kind, "family": family(x.kind), "floor_s": x.time_s,
                        "measured_s": x.measured_time_s, "error": err, "above_roof": x.above_roof,
                        "verdict": verdict(x, p.gaps_s.get(x.name, 0.0)).label})
    by_kind: dict[str, list[float]] = {}
    for k in kernels:
        by_kind.setdefault(k["family"], []).append(k["error"])
    mape = {kind: statistics.fmean(errs) for kind, errs in by_kind.items()}
    return {"device": device, "step": what, "machine": a.machine.id, "dtype": a.dtype.name,
            "kernels": kernels, "mape_by_kind": mape, "kernels_by_kind": {k: len(v) for k, v in by_kind.items()},
            "measured_s": sum(k["measured_s"] for k in kernels), "floor_s": sum(k["floor_s"] for k in kernels),
            "launch_gap_s": p.gap_time_s}


def report_lines(r: dict[str, Any]) -> list[str]:
    lines = [f"step: {r['step']} on {r['device']}, placed on {r['machine']} ({r['dtype']})",
             f"{len(r['kernels'])} kernels: measured {r['measured_s'] * 1e3:.3f} ms, floors {r['floor_s'] * 1e3:.3f} ms"
             + (f", launch gaps {r['launch_gap_s'] * 1e3:.3f} ms" if r["device"] == "cuda" else ""),
             "MAPE by kind (|measured − floor| / measured, mean over the kind's kernels):"]
    for kind, v in sorted(r["mape_by_kind"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  {kind:<22} {v:7.1%}  over {r['kernels_by_kind'][kind]} kernels")
    above = [k["name"] for k in r["kernels"] if k["above_roof"]]
    if above:
        lines.append(f"above their roof (the model's or the timing's error): {', '.join(above[:10])}")
    lines.append("slowest kernels (measured, floor, error, verdict):")
    for k in sorted(r["kernels"], key=lambda k: -k["measured_s"])[:12]:
        lines.append(f"  {k['name'][:48]:<48} {k['measured_s'] * 1e6:10.1f} µs {k['floor_s'] * 1e6:10.2f} µs "
                     f"{k['error']:6.1%}  {k['verdict']}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="Run the small CPU step (no GPU needed).")
    ap.add_argument("--machine", default=None, help="Machine id or file to place the kernels on.")
    ap.add_argument("--out", type=Path, default=None, help="Write profile_check_<device>.txt and .json here.")
    args = ap.parse_args()
    device = "cpu" if args.cpu else "cuda"
    r = profile_report(device, args.machine)
    text = "\n".join(report_lines(r))
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"profile_check_{device}.txt").write_text(text + "\n")
        (args.out / f"profile_check_{device}.json").write_text(json.dumps(r, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
