"""The measuring layer on a CUDA GPU, in under five minutes: measure, bench, and a traced transformer.

    pip install -e '.[torch,test]'        # a CUDA build of torch==2.13.0 on the GPU machine
    python bench/gpu_check.py [--out bench/results] [--cpu]

Steps, each with its own time limit, each writing what it found even if a later one fails:
  1. `roofline measure --device cuda --save`: copy/triad bandwidth and matmul FLOP/s for
     fp64, fp32, tf32, bf16, fp16, fp8; compared with the catalog's datasheet when the GPU is in it.
     On an H200 the acceptance is: copy >= 4.2 TB/s and bf16 matmul >= 760 TFLOP/s.
  2. `roofline bench --device cuda --quick` under the roof measured in step 1: % of roof per kernel,
     every point above its roof flagged.
  3. A Llama-style model (the tests' TinyLlama at a larger size, bf16) traced on the GPU with every
     op timed: FLOPs per kernel kind against roofline.models' analytic graph of the same config
     (acceptance: within 1%), and the traced kernels' share of the measured roof.

Results go to OUT/gpu_check_<gpu>.txt and .json, and the measured machine to OUT/<gpu>.toml.
Written for whenever a CUDA machine is at hand; on a machine without one it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
H200_COPY_BYTES_PER_S = 4.2e12
H200_BF16_FLOP_PER_S = 760e12


def cli(args: list[str], timeout_s: float) -> tuple[dict[str, Any] | None, str, float]:
    exe = shutil.which("roofline")
    base = [exe] if exe else [sys.executable, "-m", "roofline.cli"]
    t0 = time.perf_counter()
    try:
        r = subprocess.run([*base, *args], capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout_s:.0f} s", time.perf_counter() - t0
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        return None, r.stderr.strip(), wall
    return json.loads(r.stdout), r.stderr.strip(), wall


def traced_transformer(machine_file: Path | None, lines: list[str], device: str) -> dict[str, Any]:
    import torch

    from roofline.measure.accuracy import Accuracy, accuracy_table
    from roofline.measure.tracer import bytes_by_kind, flop_by_kind, trace
    from roofline.models import build_graph, config_from_dict, model_dtypes

    sys.path.insert(0, str(ROOT / "tests"))
    from test_trace import FAMILY, TinyConfig, families, tiny_llama

    if device == "cuda":
        c = TinyConfig(hidden=2048, layers=4, heads=16, kv_heads=4, intermediate=5632, vocab=32000, max_seq=4096)
        batch, seq, dtype, dt_name = 4, 2048, torch.bfloat16, "bf16"
    else:  # the CPU rehearsal: small, fp32
        c = TinyConfig(hidden=256, layers=2, heads=8, kv_heads=2, intermediate=688, vocab=1024, max_seq=512)
        batch, seq, dtype, dt_name = 2, 256, torch.float32, "fp32"
    model = tiny_llama(c, dtype=dtype, device=device)
    ids = torch.randint(0, c.vocab, (batch, seq), device=device)
    with torch.inference_mode():
        for _ in range(2):  # warm-up: kernels chosen, caches of cuBLAS filled
            model(ids)
        if device == "cuda":
            torch.cuda.synchronize()
    with trace(model, time_ops=True) as t:
        model(ids)
    analytic = build_graph(config_from_dict(c.hf_config(), "llama-style"), "prefill", batch, seq,
                           model_dtypes(dt_name, dt_name))
    traced_flop = families(flop_by_kind(t.graph))
    model_flop = flop_by_kind(analytic.graph)
    lines.append(f"config: hidden {c.hidden}, {c.layers} layers, {c.heads} heads / {c.kv_heads} kv heads, "
                 f"intermediate {c.intermediate}, vocab {c.vocab}; prefill batch {batch} x {seq} tokens, {dt_name}")
    lines.append(f"kind families (traced -> analytic): {FAMILY}")
    worst = 0.0
    for kind in sorted(set(traced_flop) | set(model_flop)):
        a, b = traced_flop.get(kind, 0.0), model_flop.get(kind, 0.0)
        rel = abs(a - b) / b if b else (0.0 if a == 0 else float("inf"))
        worst = max(worst, rel)
        lines.append(f"  {kind:<14} traced {a:.6e}  analytic {b:.6e}  diff {rel:.3%}")
    lines.append(f"FLOPs per kind within 1%: {'PASS' if worst <= 0.01 else 'FAIL'} (worst {worst:.3%})")
    tb, mb = bytes_by_kind(t.graph, t.plan), bytes_by_kind(analytic.graph, analytic.plan("flash"))
    for kind in ("matmul", "rmsnorm", "add", "attention_qk+softmax+attention_pv"):
        lines.append(f"  bytes {kind:<34} traced {tb.get(kind, 0):.6e}  analytic {mb.get(kind, 0):.6e}")
    roof = str(machine_file) if machine_file else "h200"
    analysis = t.analyze(roof, dt_name)
    acc = Accuracy.of(analysis.placements)
    lines.append(accuracy_table([p for p in analysis.placements if p.measured_time_s is not None][:40],
                                title=f"traced kernels on {analysis.machine.name} (first 40)"))
    lines += acc.lines()
    return {"flop_by_kind_traced": traced_flop, "flop_by_kind_analytic": model_flop, "worst_flop_diff": worst,
            "accuracy": acc.to_dict(), "unknown_ops": dict(t.unknown)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--cpu", action="store_true",
                    help="Rehearse every step on the CPU (small sizes), to check the script without a GPU.")
    args = ap.parse_args()
    device = "cpu" if args.cpu else "cuda"
    try:
        import torch
    except ImportError:
        print("gpu_check: torch is not installed: pip install -e '.[torch,test]' (a CUDA build of torch==2.13.0)")
        return 2
    if device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; nothing to check (--cpu rehearses the steps on the CPU)")
        return 2
    if device == "cuda":
        name = torch.cuda.get_device_name(0)
    else:
        from roofline.measure.env import cpu_name

        name = f"{cpu_name()} rehearsal"
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    args.out.mkdir(parents=True, exist_ok=True)
    machine_file = args.out / f"{slug}.toml"
    lines = [f"# gpu_check on {name} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})"]
    record: dict[str, Any] = {"device": name}
    t_start = time.perf_counter()

    def flush() -> None:
        (args.out / f"gpu_check_{slug}.txt").write_text("\n".join(lines) + "\n")
        (args.out / f"gpu_check_{slug}.json").write_text(json.dumps(record, indent=1, default=str) + "\n")

    lines.append(f"\n## 1. measure --device {device}")
    # the full measure (sizes up to 16384³) takes well under a minute on a datacenter GPU
    measure_args = ["measure", "--device", device, "--json", "--save", str(machine_file)]
    measured, err, wall = cli(measure_args + (["--quick"] if device == "cpu" else []), 200)
    if measured is None:
        lines.append(f"measure failed: {err}")
        machine_file = None  # type: ignore[assignment]
    else:
        record["measure"] = measured
        copy = max(r["max_bytes_per_s"] for r in measured["runs"] if r["kind"] == "memory" and r["name"] == "copy")
        lines.append(f"bandwidth (best kernel {measured['memory_kernel']['name']}): "
                     f"{measured['memory_bytes_per_s'] / 1e12:.4f} TB/s; copy {copy / 1e12:.4f} TB/s")
        for key, rate in measured["peak_flop_per_s"].items():
            lines.append(f"{key} matmul: {rate / 1e12:.4g} TFLOP/s")
        for key, why in measured["skipped"].items():
            lines.append(f"{key}: not measured ({why})")
        for row in measured.get("datasheet", {}).get("comparison", []):
            lines.append(f"vs {measured['datasheet']['machine']} datasheet: {row['ceiling']} {row['ratio']:.1%}")
        if "h200" in slug:
            bf16 = measured["peak_flop_per_s"].get("bf16", 0.0)
            ok = copy >= H200_COPY_BYTES_PER_S and bf16 >= H200_BF16_FLOP_PER_S
            lines.append(f"H200 acceptance (copy >= 4.2 TB/s, bf16 >= 760 TFLOP/s): {'PASS' if ok else 'FAIL'}")
        lines.append(f"({wall:.0f} s)")
    flush()

    lines.append(f"\n## 2. bench --device {device} --quick")
    bench_args = ["bench", "--device", device, "--quick", "--json"]
    if machine_file is not None:
        bench_args += ["--machine", str(machine_file)]
    bench, err, wall = cli(bench_args, 150)
    if bench is None:
        lines.append(f"bench failed: {err}")
    else:
        record["bench"] = bench
        for k in bench["kernels"]:
            flag = "  ABOVE THE ROOF" if k["above_roof"] else ""
            lines.append(f"{k['name']:<48} {k['bound']:<8} floor {k['time_s'] * 1e6:9.1f} us  measured "
                         f"{k['measured_time_s'] * 1e6:9.1f} us  {k['fraction_of_roof']:6.1%} of roof{flag}")
        med = bench["summary"]["median_fraction_of_roof"]
        lines.append(f"median % of roof: memory-bound {med['memory'] or 0:.0%}, "
                     f"compute-bound {med['compute'] or 0:.0%}")
        lines.append(f"({wall:.0f} s)")
    flush()

    lines.append(f"\n## 3. a traced Llama-style transformer ({'bf16' if device == 'cuda' else 'fp32'}, every op timed)")
    try:
        record["trace"] = traced_transformer(machine_file, lines, device)
    except Exception as exc:  # record the failure; the earlier steps are kept
        lines.append(f"trace failed: {type(exc).__name__}: {exc}")
    lines.append(f"\n# total {time.perf_counter() - t_start:.0f} s")
    flush()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
