"""CLI start-up: `roofline --help` and a `roofline kernel` query against `python -c pass`, side by side.

Target (issue 2): at most 150 ms above bare Python. The runs are interleaved (bare, help, query,
bare, ...) so that the machine's noise hits all three alike; we report min and median of each and
the medians' differences. Usage: python bench/bench_startup.py [--runs N] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

TARGET_S = 0.150


def roofline_command() -> list[str]:
    """The installed `roofline`, else `python -m roofline.cli`."""
    exe = shutil.which("roofline")
    return [exe] if exe else [sys.executable, "-m", "roofline.cli"]


def interleaved(cmds: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    """Each command's wall times over `runs` rounds, the commands taking turns (A B C A B C ...), so a
    machine whose speed drifts slows them alike."""
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):
        for name, argv in cmds.items():
            t0 = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - t0)
    return times


def commands() -> dict[str, list[str]]:
    base = roofline_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "roofline --help": [*base, "--help"],
        "roofline kernel matmul": [*base, "kernel", "matmul", "4096", "4096", "4096", "--machine", "h100"],
    }


def table(times: dict[str, list[float]], ref: str, judged: Callable[[str], bool], target_s: float,
          against_ref: bool, width: int) -> tuple[list[str], bool]:
    """One row a command: min, median, max and median − the `ref` command's median; the `judged` rows
    hold the target on that difference (`against_ref`) or on their median. Returns (rows, all ok)."""
    ref_med = statistics.median(times[ref])
    short = "bare" if ref.startswith("python") else "help"
    rows = [f"{'command':<{width}}{'min':>10}{'median':>10}{'max':>10}{'median - ' + short:>16}"]
    ok = True
    for name, ts in times.items():
        med = statistics.median(ts)
        extra = med - ref_med
        verdict = ""
        if judged(name):
            value = extra if against_ref else med
            verdict = "  ok" if value <= target_s else f"  OVER the {target_s * 1e3:.0f} ms target"
            ok &= value <= target_s
        rows.append(f"{name:<{width}}{min(ts) * 1e3:>8.1f}ms{med * 1e3:>8.1f}ms{max(ts) * 1e3:>8.1f}ms"
                    f"{extra * 1e3:>14.1f}ms{verdict}")
    return rows, ok


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    times = interleaved(commands(), args.runs)
    rows, ok = table(times, "python -c pass", lambda name: name != "python -c pass", TARGET_S, True, 26)
    lines = [f"# bench_startup: {args.runs} interleaved runs each, {os.cpu_count()} CPUs, "
             f"Python {sys.version.split()[0]}", *rows]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
