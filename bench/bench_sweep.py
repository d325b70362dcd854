"""A 100,000-point sweep end to end (issue 24 item 6), side by side with a baseline checkout.

Targets: `roofline sweep llama-3-8b --batch 1:1000:1 --context 100:10000:100 --format csv` (1,000 batches ×
100 contexts = 100,000 rows) in at most 10 s, and the same with `--png` in at most 20 s. Each case runs as its
own process (start-up included, as a user runs it); we print wall time, CPU time (user + system) and peak
memory (max RSS) of each, from os.wait4, with the load average beside them: on a shared machine the load
inflates wall time, CPU time much less. With --baseline SRC (the src/ folder of another checkout, e.g. main
before the change) each case also runs on that code, interleaved, and the ratios are printed.

Usage: python bench/bench_sweep.py [--baseline /work/main/src] [--runs N] [--no-png-baseline] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS_S = {"csv": 10.0, "png": 20.0}
GRID = ["sweep", "llama-3-8b", "--batch", "1:1000:1", "--context", "100:10000:100", "--format", "csv"]


def run_once(src: str | None, png: bool, where: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, max RSS MiB) of one sweep process on `src` (None: this checkout's)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    argv = [sys.executable, "-m", "roofline.cli", *GRID, "-o", str(where / "rows.csv")]
    if png:
        argv += ["--png", str(where / "chart.png")]
    t = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default=None, help="src/ of the checkout to compare with")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--no-png-baseline", action="store_true", help="skip the baseline's chart (minutes)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    load = os.getloadavg()
    cases = [(kind, src) for kind in ("csv", "png") for src in ([None] + ([args.baseline] if args.baseline else []))
             if not (kind == "png" and src is not None and args.no_png_baseline)]
    got: dict[tuple[str, str | None], list[tuple[float, float, float]]] = {c: [] for c in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for kind, src in cases:
                got[kind, src].append(run_once(src, kind == "png", Path(tmp)))
    lines = [f"# {' '.join(['roofline', *GRID])} (+ --png), {args.runs} run(s); load average "
             f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start, "
             f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end"]
    med = {c: tuple(statistics.median(r[i] for r in v) for i in range(3)) for c, v in got.items()}
    for (kind, src), (wall, cpu, rss) in med.items():
        who = "this checkout" if src is None else f"baseline {src}"
        lines.append(f"{kind:<4} {who:<34} wall {wall:7.1f} s  cpu {cpu:7.1f} s  max RSS {rss:7.0f} MiB")
    for kind in ("csv", "png"):
        wall, cpu, _ = med[kind, None]
        verdict = "met" if wall <= TARGETS_S[kind] else "NOT met"
        line = f"{kind}: target <= {TARGETS_S[kind]:g} s wall: {verdict} ({wall:.1f} s wall, {cpu:.1f} s cpu)"
        if (kind, args.baseline) in med and args.baseline:
            b_wall, b_cpu, _ = med[kind, args.baseline]
            line += f"; this / baseline: {wall / b_wall:.2f}x wall, {cpu / b_cpu:.2f}x cpu"
        lines.append(line)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
