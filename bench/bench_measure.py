"""`roofline measure` against independent references on this machine, in the same run.

Acceptance (issue 5): the measured CPU bandwidth is at least 90% of what a small C OpenMP triad
(bench/triad.c, compiled here with gcc -O3 -fopenmp -march=native) reaches in the same run; the
fp32 matmul ceiling is within 10% of the best of numpy and torch timed independently; `measure
--quick` takes at most 30 s.

The machine is shared and noisy, so the bandwidth comparison is made in interleaved rounds (C
triad, then `measure`, then C triad ...) at the same array size, and each round's ratio is taken
against the C triad's best of that round and the one after it; the median ratio over rounds is the
figure. Also recorded: a full `measure` (every dtype), `measure --quick` wall times, and `bench
--quick` (% of roof per kernel).

Usage: python bench/bench_measure.py [--rounds N] [--out bench/results/measure_cpu.txt]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def compile_triad(workdir: Path) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        raise SystemExit("bench_measure: gcc is not installed (apt-get install gcc); the C triad needs it")
    exe = workdir / "triad"
    subprocess.run([gcc, "-O3", "-fopenmp", "-march=native", str(HERE / "triad.c"), "-o", str(exe)], check=True)
    return exe


def run_triad(exe: Path, n: int, reps: int) -> float:
    out = subprocess.run([str(exe), str(n), str(reps)], capture_output=True, text=True, check=True).stdout
    match = re.search(r"best_bytes_per_s=([0-9.e+]+)", out)
    if match is None:
        raise SystemExit(f"bench_measure: unexpected triad output:\n{out}")
    return float(match.group(1))


def best_independent_fp32(sizes: tuple[int, ...] = (2048, 4096), reps: int = 5) -> dict[str, float]:
    """fp32 square matmuls timed by hand, outside roofline: the best rate of numpy and of torch."""
    import numpy as np

    best: dict[str, float] = {}
    rng = np.random.default_rng(7)
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        c = np.empty((n, n), np.float32)
        runs = {"numpy": lambda a=a, b=b, c=c: np.matmul(a, b, out=c)}
        try:
            import torch

            ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
            runs["torch"] = lambda ta=ta, tb=tb, tc=tc: torch.matmul(ta, tb, out=tc)
        except ImportError:
            pass
        for name, fn in runs.items():
            fn()
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                rate = 2 * n**3 / (time.perf_counter() - t0)
                best[name] = max(best.get(name, 0.0), rate)
    return best


def roofline_json(args: list[str]) -> tuple[dict[str, Any], float]:
    exe = shutil.which("roofline")
    base = [exe] if exe else [sys.executable, "-m", "roofline.cli"]
    t0 = time.perf_counter()
    out = subprocess.run([*base, *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out), time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "measure_cpu.txt")
    args = ap.parse_args()
    from roofline.measure.ceilings import measure_ceilings
    from roofline.measure.env import capture_environment
    from roofline.measure.runs import MeasureSettings, default_buffer_bytes

    env = capture_environment("cpu")
    buffer = default_buffer_bytes(env.llc_bytes, quick=False)
    n = buffer // 8
    lines = [f"# roofline measure vs independent references ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
             *[f"# {line}" for line in env.summary_lines()],
             f"# load average before: {os.getloadavg()[0]:.2f}", ""]
    record: dict[str, Any] = {"environment": env.to_dict()}

    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_triad(Path(tmp))
        lines.append(f"## bandwidth: {args.rounds} interleaved rounds, {buffer / 2**20:.0f} MiB per array "
                     f"({n} doubles), STREAM byte count")
        triads = [run_triad(exe, n, 10)]
        rounds = []
        for r in range(args.rounds):
            c = measure_ceilings(MeasureSettings(buffer_bytes=buffer, dtypes=()))
            triads.append(run_triad(exe, n, 10))
            ref = max(triads[-2], triads[-1])  # the C triad's best of the rounds around this measure
            by_kernel = {f"{run.name} ({run.backend})": run.best_rate for run in c.runs}
            rounds.append({"measured": c.memory_bytes_per_s, "c_triad": ref, "ratio": c.memory_bytes_per_s / ref,
                           "kernels": by_kernel})
            lines.append(f"round {r + 1}: measure {c.memory_bytes_per_s / 1e9:.1f} GB/s "
                         f"({c.memory_run.name}, {c.memory_run.backend}); C triad {ref / 1e9:.1f} GB/s; "
                         f"ratio {c.memory_bytes_per_s / ref:.1%}")
            lines.append("    " + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in by_kernel.items()) + " GB/s")
        ratio = statistics.median(r["ratio"] for r in rounds)
        lines.append(f"median ratio measure / C triad: {ratio:.1%} (acceptance: at least 90%) "
                     f"-> {'PASS' if ratio >= 0.9 else 'FAIL'}")
        record["bandwidth"] = {"rounds": rounds, "median_ratio": ratio}

    lines += ["", "## fp32 matmul: the measured ceiling against numpy and torch timed independently"]
    c32 = measure_ceilings(MeasureSettings(dtypes=("fp32",), memory=False))
    ours = c32.peak_flop_per_s["fp32"]
    ref32 = best_independent_fp32()
    best_ref = max(ref32.values())
    lines.append(f"measure fp32: {ours / 1e9:.1f} GFLOP/s ({c32.matrix_run('fp32').name}, "
                 f"{c32.matrix_run('fp32').backend}); independent: "
                 + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in ref32.items())
                 + f" GFLOP/s; ratio {ours / best_ref:.1%} (acceptance: within 10%) -> "
                 f"{'PASS' if abs(ours / best_ref - 1) <= 0.10 else 'FAIL'}")
    record["fp32"] = {"measured": ours, "independent": ref32, "ratio": ours / best_ref}

    lines += ["", "## measure --quick wall time (the CLI, start-up included)"]
    walls = []
    for _ in range(2):
        _, wall = roofline_json(["measure", "--quick", "--json"])
        walls.append(wall)
    lines.append(f"measure --quick: {', '.join(f'{w:.1f} s' for w in walls)} (acceptance: at most 30 s) -> "
                 f"{'PASS' if max(walls) <= 30 else 'FAIL'}")
    record["quick_wall_s"] = walls

    lines += ["", "## full measure (every dtype this CPU runs)"]
    full, wall = roofline_json(["measure", "--json"])
    lines.append(f"bandwidth {full['memory_bytes_per_s'] / 1e9:.1f} GB/s ({full['memory_kernel']['name']}, "
                 f"{full['memory_kernel']['backend']})")
    for key, rate in full["peak_flop_per_s"].items():
        lines.append(f"{key} matmul {rate / 1e9:.1f} GFLOP/s")
    lines.append(f"(full measure: {wall:.1f} s)")
    record["full"] = {"memory_bytes_per_s": full["memory_bytes_per_s"], "peak_flop_per_s": full["peak_flop_per_s"],
                      "wall_s": wall}

    lines += ["", "## bench --quick (fp32) under the roof measured in the same call"]
    try:
        bench, wall = roofline_json(["bench", "--quick", "--json"])
    except subprocess.CalledProcessError as exc:
        lines.append(f"bench skipped: {exc.stderr.strip() if exc.stderr else exc}")
    else:
        lines.append(f"roof: {bench['machine']['memory_bytes_per_s'] / 1e9:.1f} GB/s, fp32 "
                     f"{bench['machine']['peak_flop_per_s']['fp32'] / 1e9:.1f} GFLOP/s")
        for k in bench["kernels"]:
            flag = "  ABOVE THE ROOF" if k["above_roof"] else ""
            lines.append(f"{k['name']:<48} {k['bound']:<8} floor {k['time_s'] * 1e3:8.3f} ms  measured "
                         f"{k['measured_time_s'] * 1e3:8.3f} ms  {k['fraction_of_roof']:6.1%} of roof{flag}")
        s = bench["summary"]
        med = s["median_fraction_of_roof"]
        lines.append(f"median % of roof: memory-bound {med['memory']:.0%}, compute-bound {med['compute']:.0%}; "
                     f"above the roof: {', '.join(s['above_roof']) or 'none'} ({wall:.1f} s)")
        record["bench"] = bench

    lines.append(f"\n# load average after: {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
