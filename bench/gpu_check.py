"""The measuring layer on a CUDA GPU, in under five minutes: measure, bench, a traced transformer, collectives.

    PYTHONPATH=src python3 bench/gpu_check.py --out DIR        # on the GPU machine (bench/GPU_CHECK.md)
    python bench/gpu_check.py --cpu [--out bench/results]     # the rehearsal on a machine without one

Steps, each in its own child process with its own time limit inside one overall budget (280 s by
default), each writing what it found as it goes, so a step that hangs or crashes costs only itself:
  1. measure: copy/scale/add/triad bandwidth over 4 GiB arrays and inside the chip (Triton microkernels:
     L2 reads over a quarter of the L2, L1/shared SRAM reads, exponentials per second; the CPU
     rehearsal runs the cache ladder instead), then matmul FLOP/s per dtype in the
     order bf16, fp16, tf32, fp8, fp32, fp64 (the acceptance's dtype first, the slow ones last); after
     each piece the partial results (JSON) and the measured machine file (TOML) are rewritten.
     On an H200 the acceptance is: copy >= 4.2 TB/s and bf16 matmul >= 760 TFLOP/s.
  2. `roofline bench --device cuda --quick --json --machine <the machine file of step 1>`: % of roof
     per kernel, every point above its roof flagged.
  3. A Llama-style model (the tests' TinyLlama at a larger size, bf16) traced on the GPU with every
     op timed: FLOPs per kernel kind against roofline.models' analytic graph of the same config
     (acceptance: within 1%), and the traced kernels' share of the measured roof.
  4. Collectives (`roofline measure --collectives`): NCCL over every visible GPU, all-reduce,
     all-gather, reduce-scatter, all-to-all and send/recv from 4 KiB to 1 GiB, algbw and busbw per
     size and each collective's fitted latency and bandwidth, inside its own budget (what finished
     is kept; the record is rewritten about once a second while it runs). A machine with one GPU
     skips it, said so (a collective needs two ranks, NCCL one GPU each); the CPU rehearsal runs
     gloo over 2 processes.

Files in OUT (eight at most): gpu_check_<gpu>.txt (the report), gpu_check_<gpu>.json (everything),
gpu_check_<gpu>.measure.json, .trace.json and .collectives.json (the children's own records, kept
even when they die), <gpu>.toml (the measured machine, usable with --machine) and <gpu>-system.toml
(the measured node link, a system file). The report ends with a SUMMARY of PASS/FAIL lines. Needs
torch with CUDA; it runs on whatever torch the machine has (the pin, torch==2.13.0, is for installs;
a GPU machine's own build is used as it is).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
H200_COPY_BYTES_PER_S = 4.2e12  # the acceptance: H200s have shown about 4.3 TB/s
H200_BF16_FLOP_PER_S = 760e12  # and 770-800 TFLOP/s on random data
CUDA_ORDER = ("bf16", "fp16", "tf32", "fp8", "fp32", "fp64")
CPU_ORDER = ("fp32", "fp64", "bf16", "fp16")
# seconds each step may take at most (the overall budget cuts them further)
STEP_LIMIT_S = {"measure": 150.0, "bench": 90.0, "trace": 90.0, "collectives": 90.0}


def _write_json(path: Path, obj: Any) -> None:
    from roofline.fileio import atomic_write

    atomic_write(path, json.dumps(obj, indent=1, default=str) + "\n")


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


# --- step 1, in a child: the ceilings, piece by piece -------------------------------------------

def child_measure(device: str, record_path: Path, machine_path: Path) -> int:
    """Bandwidth, then one matmul dtype at a time; after each piece the partial record and the
    machine file are rewritten, so whatever was measured survives a kill."""
    from roofline.fileio import atomic_write
    from roofline.hardware import machine_to_toml
    from roofline.measure.ceilings import Ceilings, measure_ceilings
    from roofline.measure.env import capture_environment
    from roofline.measure.runs import CeilingRun, MeasureSettings

    quick = device == "cpu"  # the rehearsal: seconds, not minutes
    t0 = time.perf_counter()
    env = capture_environment(device)
    runs: list[CeilingRun] = []
    skipped: dict[str, str] = {}
    record: dict[str, Any] = {"device": device, "complete": False, "pieces": []}
    inside: dict[str, Any] = {}  # the memory piece's cache ladder (CPU) or chip runs (CUDA)

    def save(piece: str) -> None:
        record["pieces"].append(piece)
        record["runs"] = [r.to_dict() for r in runs]
        record["skipped"] = dict(skipped)
        record["wall_s"] = time.perf_counter() - t0
        if any(r.kind == "memory" for r in runs):
            c = Ceilings(device, env, tuple(runs), skipped, time.perf_counter() - t0, quick,
                         inside.get("ladder"), inside.get("chip_runs", ()))
            record.update(c.to_dict())
            if c.peak_flop_per_s:
                atomic_write(machine_path, machine_to_toml(c.to_machine(), header=(
                    "written by bench/gpu_check.py (roofline measure, piece by piece); "
                    f"use it anywhere with --machine {machine_path.name}")))
        _write_json(record_path, record)

    def piece(name: str, plan: MeasureSettings) -> None:
        print(f"measure: {name} ...", file=sys.stderr, flush=True)
        nonlocal env
        try:
            c = measure_ceilings(plan)
            env = c.environment  # the latest clocks: read just after the previous piece's load
            runs.extend(c.runs)
            skipped.update(c.skipped)
            if c.ladder is not None or c.chip_runs:
                inside.update(ladder=c.ladder, chip_runs=c.chip_runs)
        except Exception as exc:  # one piece failing must not cost the others
            skipped[name] = _first_line(exc)
        save(name)

    piece("memory", MeasureSettings(device=device, quick=quick, dtypes=()))
    for key in CUDA_ORDER if device == "cuda" else CPU_ORDER:
        piece(key, MeasureSettings(device=device, quick=quick, dtypes=(key,), memory=False))
    record["complete"] = True
    save("done")
    return 0


# --- step 3, in a child: a traced transformer -----------------------------------------------------

def traced_transformer(machine_file: Path | None, lines: list[str], device: str) -> dict[str, Any]:
    import torch

    from roofline.measure.accuracy import Accuracy
    from roofline.models import build_graph, config_from_dict, model_dtypes
    from roofline.report.text.accuracy import accuracy_table
    from roofline.tracing import bytes_by_kind, flop_by_kind, trace

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
    # the op that carried the attention (its name ends in the aten op's) and whether it ran fused
    ops = sorted({op.name.rsplit(".", 1)[0].split(".")[-1].split("#")[0]
                  + (" (fused)" if "ran fused" in op.note else " (unfused)")
                  for op in t.ops if op.kind == "attention_qk"})
    lines.append(f"attention ran as: {', '.join(ops) or 'no attention op'}")
    roof = str(machine_file) if machine_file else ("h200" if device == "cuda" else "h100")
    analysis = t.analyze(roof, dt_name)
    acc = Accuracy.of(analysis.placements)
    lines.append(accuracy_table([p for p in analysis.placements if p.measured_time_s is not None][:40],
                                title=f"traced kernels on {analysis.machine.name} (first 40)"))
    lines += acc.lines()
    return {"flop_by_kind_traced": traced_flop, "flop_by_kind_analytic": model_flop, "worst_flop_diff": worst,
            "attention_ops": ops, "accuracy": acc.to_dict(), "unknown_ops": dict(t.unknown),
            "not_counted": dict(t.errors), "roof": roof}


def child_trace(device: str, record_path: Path, machine_path: Path) -> int:
    lines: list[str] = []
    record: dict[str, Any] = {"lines": lines}
    try:
        record["trace"] = traced_transformer(machine_path if machine_path.exists() else None, lines, device)
    except Exception as exc:  # recorded; the parent reports it
        lines.append(f"trace failed: {_first_line(exc)}")
        record["error"] = _first_line(exc)
    _write_json(record_path, record)
    # 3b. the same kind of step under torch.profiler, imported as `roofline profile` does: predicted
    # floor against measured time per kernel, MAPE by kind (bench/profile_check.py)
    lines.append("\n## 3b. profiled step: predicted floor vs measured, per kernel (roofline.tracing.kineto)")
    try:
        sys.path.insert(0, str(HERE))
        from profile_check import profile_report, report_lines

        record["profile"] = profile_report(device, str(machine_path) if machine_path.exists() else None)
        lines += report_lines(record["profile"])
    except Exception as exc:
        lines.append(f"profile failed: {_first_line(exc)}")
        record["profile_error"] = _first_line(exc)
    _write_json(record_path, record)
    return 0


# --- step 4, in a child: collectives over every visible GPU ----------------------------------------

def child_collectives(device: str, record_path: Path, system_path: Path, budget_s: float) -> int:
    """NCCL (gloo in the rehearsal) over the ladder, inside `budget_s`; the record is rewritten while the
    workers run and at the end, and the system file written once the all-reduce has a fit."""
    from roofline.errors import RooflineError
    from roofline.fileio import atomic_write
    from roofline.measure.collectives import Collectives
    from roofline.measure.collectives_run import CollectivesSettings, measure_collectives

    record: dict[str, Any] = {"device": device, "complete": False}

    def save(c: Collectives, final: bool) -> None:
        record.update(c.to_dict())
        record["complete"] = final and c.complete
        try:
            atomic_write(system_path, c.to_link_section())
            record["system_file"] = system_path.name
        except RooflineError as exc:  # no all-reduce fit yet (or at all)
            record["system_file_error"] = str(exc)
        _write_json(record_path, record)

    try:
        plan = CollectivesSettings(device=device, quick=device == "cpu", budget_s=budget_s)
        save(measure_collectives(plan, on_update=lambda c: save(c, final=False)), final=True)
    except Exception as exc:  # recorded; the parent reports it
        record["error"] = _first_line(exc)
        _write_json(record_path, record)
    return 0


def _binary(size: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


def collectives_lines(rec: dict[str, Any], lines: list[str], summary: list[str]) -> None:
    """Report lines for the collectives record: busbw by size, then each collective's fit."""
    n = rec.get("ranks")
    for name, fit in rec.get("fits", {}).items():
        pts = [p for p in rec.get("points", []) if p["collective"] == name]
        best = max((p["busbw_bytes_per_s"] for p in pts), default=0.0)
        lines.append(f"{name:<15} alpha {fit['alpha_s'] * 1e6:9.2f} us  beta {fit['beta_bytes_per_s'] / 1e9:9.2f} GB/s"
                     f"  best busbw {best / 1e9:8.2f} GB/s  (residual {fit['residual']:.1%} rms, "
                     f"{fit['points']} sizes)")
        lines.append("    busbw by size: " + ", ".join(
            f"{_binary(p['size_bytes'])} {p['busbw_bytes_per_s'] / 1e9:.3g}" for p in pts) + " GB/s")
    for name, why in rec.get("fit_problems", {}).items():
        lines.append(f"{name}: no fit ({why})")
    for what, why in rec.get("not_measured", {}).items():
        lines.append(f"not measured: {what} ({why})")
    lines += rec.get("notes", [])
    link = rec.get("link")
    if link:
        summary.append(f"collectives over {n} ranks ({rec.get('backend')}): all-reduce alpha "
                       f"{link['alpha_s'] * 1e6:.1f} us, beta {link['beta_bytes_per_s'] / 1e9:.1f} GB/s per direction"
                       f"{'' if rec.get('complete') else ' (INCOMPLETE)'}; {len(rec.get('points', []))} points")
    else:
        summary.append(f"collectives: FAIL (no all-reduce fit: {rec.get('system_file_error') or rec.get('error')})")


# --- the parent ----------------------------------------------------------------------------------

def run_child(args: list[str], timeout_s: float) -> tuple[int | None, str, str, float]:
    """(exit code or None on timeout, stdout, the tail of stderr, seconds)."""
    t0 = time.perf_counter()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    src = str(ROOT / "src")
    if src not in env.get("PYTHONPATH", "").split(os.pathsep):  # the checkout's roofline, installed or not
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    try:
        r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=max(1.0, timeout_s),
                           check=False, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return None, "", err[-2000:], time.perf_counter() - t0
    return r.returncode, r.stdout, r.stderr[-2000:], time.perf_counter() - t0


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def measure_lines(measured: dict[str, Any], lines: list[str]) -> float:
    """Report lines for the measure record; returns the best copy rate (0 when not measured)."""
    copy = max((r["max_bytes_per_s"] for r in measured.get("runs", [])
                if r["kind"] == "memory" and r["name"] == "copy"), default=0.0)
    if "memory_bytes_per_s" in measured:
        lines.append(f"bandwidth (best kernel {measured['memory_kernel']['name']}): "
                     f"{measured['memory_bytes_per_s'] / 1e12:.4f} TB/s; copy {copy / 1e12:.4f} TB/s")
    for r in measured.get("runs", []):
        if r["kind"] == "memory":
            lines.append(f"  {r['name']:<6} {r['bytes'] / 2**30:.1f} GiB moved per call: best "
                         f"{r['max_bytes_per_s'] / 1e12:.4f}, median {r['median_bytes_per_s'] / 1e12:.4f} TB/s "
                         f"({r['repeats']} samples)")
    for key, rate in measured.get("peak_flop_per_s", {}).items():
        sizes = ", ".join(f"{r['name'].split()[-1]} {r['max_flop_per_s'] / 1e12:.4g}"
                          for r in measured["runs"] if r["kind"] == "matrix" and r["dtype"] == key)
        lines.append(f"{key} matmul: {rate / 1e12:.4g} TFLOP/s (by size: {sizes})")
    for key, why in measured.get("skipped", {}).items():
        lines.append(f"{key}: not measured ({why})")
    inside_lines(measured, lines)
    for row in measured.get("datasheet", {}).get("comparison", []):
        lines.append(f"vs {measured['datasheet']['machine']} datasheet: {row['ceiling']} {row['ratio']:.1%}")
    clocks = measured.get("environment", {}).get("clocks")
    if clocks:
        lines.append(f"clocks (nvidia-smi, before the last piece): {clocks}")
    versions = measured.get("environment", {}).get("versions")
    if versions:
        lines.append(f"versions: {versions}")
    return float(copy)


def inside_lines(measured: dict[str, Any], lines: list[str]) -> list[str]:
    """Report lines for inside the chip: the CUDA microkernels (L2, L1/shared SRAM, exponentials), each
    against the catalog's per-SM figures, or the CPU's cache ladder levels. Returns the SUMMARY's lines."""
    summary: list[str] = []
    compared = {row["resource"]: row for row in measured.get("chip_comparison", [])}
    for r in measured.get("chip_runs", []):
        unit = "ops_per_s" if r["resource"] == "exp" else "bytes_per_s"
        rate = r[f"max_{unit}"]
        text = f"{rate / 1e12:.4g} {'T exp/s' if unit == 'ops_per_s' else 'TB/s'}"
        row = compared.get(r["resource"])
        versus = f", {row['ratio']:.0%} of the per-SM figures' {row['per_sm_figures'] / 1e12:.4g} T" if row else ""
        lines.append(f"inside the chip: {r['name']} {text} (median {r[f'median_{unit}'] / 1e12:.4g} T; "
                     f"{r['counted']}{versus})")
        summary.append(f"{r['name']}: {text}{versus} (CHECK: a measured figure, no acceptance bound)")
    levels = measured.get("levels_bytes_per_s", {})
    if levels:
        lines.append("cache ladder levels: " + ", ".join(f"{lv} {bw / 1e9:.4g} GB/s" for lv, bw in levels.items()))
        summary.append("cache levels measured: " + ", ".join(levels))
    return summary


def main() -> int:
    if importlib.util.find_spec("roofline") is None:  # the checkout, not installed: run it from src/
        sys.path.insert(0, str(ROOT / "src"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--cpu", action="store_true",
                    help="Rehearse every step on the CPU (small sizes), to check the script without a GPU.")
    ap.add_argument("--budget-s", type=float, default=280.0, help="Overall time limit in seconds.")
    ap.add_argument("--step", choices=["measure", "trace", "collectives"], help=argparse.SUPPRESS)  # the children
    ap.add_argument("--step-budget-s", type=float, default=60.0, help=argparse.SUPPRESS)
    ap.add_argument("--record", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--machine-file", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    device = "cpu" if args.cpu else "cuda"
    if args.step == "collectives":
        return child_collectives(device, args.record, args.machine_file, args.step_budget_s)
    if args.step:
        child: Callable[[str, Path, Path], int] = child_measure if args.step == "measure" else child_trace
        return child(device, args.record, args.machine_file)

    t_start = time.perf_counter()
    deadline = t_start + args.budget_s
    try:
        import torch
    except ImportError:
        print("gpu_check: torch is not installed: pip install -e '.[torch,test]' (a CUDA build of torch)")
        return 2
    if device == "cuda" and not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device here (torch {torch.__version__}, built for CUDA "
              f"{torch.version.cuda}); nothing to check (--cpu rehearses the steps on the CPU)")
        return 2
    if device == "cuda":
        name = torch.cuda.get_device_name(0)
    else:
        from roofline.measure.env import cpu_name

        name = f"{cpu_name()} rehearsal"
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    machine_file = out / f"{slug}.toml"
    measure_json, trace_json = out / f"gpu_check_{slug}.measure.json", out / f"gpu_check_{slug}.trace.json"
    collectives_json, system_file = out / f"gpu_check_{slug}.collectives.json", out / f"{slug}-system.toml"
    for stale in (machine_file, measure_json, trace_json, collectives_json, system_file):  # never an earlier run's
        stale.unlink(missing_ok=True)
    lines = [f"# gpu_check on {name} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"torch {torch.__version__}, python {sys.version.split()[0]})"]
    record: dict[str, Any] = {"device": name, "torch": torch.__version__}
    summary: list[str] = []

    def flush() -> None:
        from roofline.fileio import atomic_write

        atomic_write(out / f"gpu_check_{slug}.txt", "\n".join([*lines, "", "## SUMMARY", *summary]) + "\n")
        _write_json(out / f"gpu_check_{slug}.json", {**record, "summary": summary})

    def limit(step: str) -> float:
        return min(STEP_LIMIT_S[step], deadline - time.perf_counter())

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    me = str(Path(__file__).resolve())
    common = ["--machine-file", str(machine_file)] + (["--cpu"] if args.cpu else [])

    # 1. ceilings
    say(f"gpu_check: 1. measure ({limit('measure'):.0f} s at most)")
    lines.append(f"\n## 1. measure --device {device} (piece by piece; partial results kept)")
    code, _, err, wall = run_child([me, "--step", "measure", "--record", str(measure_json), *common],
                                   limit("measure"))
    measured = _read_json(measure_json)
    copy = 0.0
    if code != 0:
        lines.append(f"measure child {'timed out' if code is None else f'exited {code}'} after {wall:.0f} s; "
                     f"stderr tail: {err.strip()[-600:]}")
    if measured is None:
        lines.append("measure: no results")
    else:
        record["measure"] = measured
        if not measured.get("complete"):
            lines.append(f"measure INCOMPLETE: pieces done {measured.get('pieces')}")
        copy = measure_lines(measured, lines)
    lines.append(f"({wall:.0f} s)")
    peaks = (measured or {}).get("peak_flop_per_s", {})
    if "h200" in slug:
        bf16 = peaks.get("bf16", 0.0)
        summary.append(f"H200 copy >= 4.2 TB/s: {'PASS' if copy >= H200_COPY_BYTES_PER_S else 'FAIL'} "
                       f"({copy / 1e12:.3f} TB/s)")
        summary.append(f"H200 bf16 matmul >= 760 TFLOP/s: {'PASS' if bf16 >= H200_BF16_FLOP_PER_S else 'FAIL'} "
                       f"({bf16 / 1e12:.1f} TFLOP/s)")
    else:
        summary.append(f"copy {copy / 1e12:.4f} TB/s, bf16 {peaks.get('bf16', 0.0) / 1e12:.4g} TFLOP/s "
                       f"(no H200 here: no acceptance bound)")
    if device == "cuda" and "fp32" in peaks and "tf32" in peaks:
        ok = peaks["tf32"] > 2 * peaks["fp32"]
        summary.append(f"tf32 switch works (tf32 > 2x fp32): {'PASS' if ok else 'FAIL'} "
                       f"({peaks['tf32'] / 1e12:.4g} vs {peaks['fp32'] / 1e12:.4g} TFLOP/s)")
    summary.append(f"dtypes measured: {', '.join(peaks) or 'none'}; not: "
                   f"{', '.join((measured or {}).get('skipped', {})) or 'none'}")
    summary += inside_lines(measured or {}, [])
    flush()

    # 2. bench under the measured roof
    say(f"gpu_check: 2. bench ({limit('bench'):.0f} s at most)")
    lines.append(f"\n## 2. bench --device {device} --quick")
    bench_args = ["-m", "roofline.cli", "bench", "--device", device, "--quick", "--json"]
    bench_args += ["--machine", str(machine_file) if machine_file.exists() else ("h200" if "h200" in slug else
                                                                                  "h100")]
    code, stdout, err, wall = run_child(bench_args, limit("bench"))
    bench: dict[str, Any] | None = None
    if code == 0:
        try:
            bench = json.loads(stdout)
        except ValueError:
            err = f"unreadable JSON: {stdout[:200]!r}"
    if bench is None:
        lines.append(f"bench failed ({'timed out' if code is None else f'exit {code}'} after {wall:.0f} s): "
                     f"{err.strip()[-800:]}")
        summary.append("bench: FAIL (no results)")
    else:
        record["bench"] = bench
        lines.append(f"roof: {bench['machine']['name']} ({bench['dtype']})")
        above = 0
        for k in bench["kernels"]:
            above += bool(k["above_roof"])
            flag = "  ABOVE THE ROOF" if k["above_roof"] else ""
            frac = k.get("fraction_of_roof")
            lines.append(f"{k['name']:<48} {k['bound']:<8} floor {k['time_s'] * 1e6:9.1f} us  measured "
                         f"{k['measured_time_s'] * 1e6:9.1f} us  "
                         f"{'   n/a' if frac is None else f'{frac:6.1%}'} of roof{flag}")
        med = bench["summary"]["median_fraction_of_roof"]
        lines.append(f"median % of roof: memory-bound {med['memory'] or 0:.0%}, "
                     f"compute-bound {med['compute'] or 0:.0%}")
        lines.append(f"({wall:.0f} s)")
        summary.append(f"bench: {len(bench['kernels'])} kernels, {above} above the roof "
                       f"({'PASS' if above == 0 else 'CHECK'}); median % of roof memory {med['memory'] or 0:.0%}, "
                       f"compute {med['compute'] or 0:.0%}")
    flush()

    # 3. a traced transformer
    say(f"gpu_check: 3. trace ({limit('trace'):.0f} s at most)")
    lines.append(f"\n## 3. a traced Llama-style transformer ({'bf16' if device == 'cuda' else 'fp32'}, every op timed)")
    if limit("trace") < 10:
        lines.append("trace skipped: the overall budget is spent")
        summary.append("trace: FAIL (no time left)")
    else:
        code, _, err, wall = run_child([me, "--step", "trace", "--record", str(trace_json), *common], limit("trace"))
        traced = _read_json(trace_json)
        if traced is None:
            lines.append(f"trace failed ({'timed out' if code is None else f'exit {code}'} after {wall:.0f} s): "
                         f"{err.strip()[-800:]}")
            summary.append("trace: FAIL (no results)")
        else:
            lines += traced.get("lines", [])
            lines.append(f"({wall:.0f} s)")
            if "trace" in traced:
                record["trace"] = traced["trace"]
                worst = traced["trace"]["worst_flop_diff"]
                summary.append(f"trace FLOPs per kind within 1% of the analytic model: "
                               f"{'PASS' if worst <= 0.01 else 'FAIL'} (worst {worst:.3%}; attention ran as "
                               f"{', '.join(traced['trace']['attention_ops'])})")
            else:
                summary.append(f"trace: FAIL ({traced.get('error')})")
            if "profile" in traced:
                record["profile"] = traced["profile"]
                mape = traced["profile"]["mape_by_kind"]
                summary.append("profile MAPE by kind (|measured − floor| / measured): "
                               + ", ".join(f"{k} {v:.0%}" for k, v in sorted(mape.items())))
            elif "profile_error" in traced:
                summary.append(f"profile: FAIL ({traced['profile_error']})")
    flush()

    # 4. collectives over every visible GPU (gloo over 2 processes in the rehearsal)
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    backend = "nccl" if device == "cuda" else "gloo"
    ranks = gpus if device == "cuda" else 2
    lines.append(f"\n## 4. measure --collectives --device {device} ({backend}, {ranks} ranks)")
    if device == "cuda" and gpus < 2:
        lines.append(f"collectives skipped: {gpus} GPU visible, and a collective needs at least 2 "
                     "(NCCL runs one rank per GPU); run this on a machine with 2 or more GPUs")
        summary.append(f"collectives: SKIPPED ({gpus} GPU here; needs 2 or more)")
    elif limit("collectives") < 20:
        lines.append("collectives skipped: the overall budget is spent")
        summary.append("collectives: FAIL (no time left)")
    else:
        step_limit = limit("collectives")
        say(f"gpu_check: 4. collectives ({step_limit:.0f} s at most)")
        code, _, err, wall = run_child([me, "--step", "collectives", "--record", str(collectives_json),
                                        "--machine-file", str(system_file), "--step-budget-s",
                                        f"{max(10.0, step_limit - 10.0):.0f}", *(["--cpu"] if args.cpu else [])],
                                       step_limit)
        coll = _read_json(collectives_json)
        if coll is None:
            lines.append(f"collectives failed ({'timed out' if code is None else f'exit {code}'} after {wall:.0f} s): "
                         f"{err.strip()[-800:]}")
            summary.append("collectives: FAIL (no results)")
        else:
            record["collectives"] = coll
            if coll.get("error"):
                lines.append(f"collectives failed: {coll['error']}")
            if code != 0:
                lines.append(f"collectives child {'timed out' if code is None else f'exited {code}'} after "
                             f"{wall:.0f} s; partial results kept")
            collectives_lines(coll, lines, summary)
            lines.append(f"({wall:.0f} s)")
    total = time.perf_counter() - t_start
    lines.append(f"\n# total {total:.0f} s")
    summary.append(f"total {total:.0f} s (< 300 s: {'PASS' if total < 300 else 'FAIL'})")
    flush()
    print("\n".join([*lines, "", "## SUMMARY", *summary]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
