"""`roofline serve` wall time: the full serving view with its 1-1024 batch curve, against `roofline --help`.

Target (issue 10): `roofline serve llama-3-70b --machine dgx-h100 --tp 8 --prompt 2048 --output 256`
(TTFT, ITL over 256 contexts, the memory and SLO batches, the curve over batch 1, 2, ... 1024) in at most
300 ms of CLI wall time. The runs are interleaved (help, serve, serve with targets, help, ...) so the
machine's noise hits all alike; we report min, median and max of each and the medians' differences
from `roofline --help` (the start-up every command pays).
Usage: python bench/bench_serve.py [--runs N] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench_startup import interleaved, roofline_command, table  # the same interleaved timing, bench/ beside it

TARGET_S = 0.300
SERVE = ["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output", "256"]


def commands() -> dict[str, list[str]]:
    base = roofline_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "roofline --help": [*base, "--help"],
        "roofline serve": [*base, *SERVE],
        "roofline serve + SLOs": [*base, *SERVE, "--itl-slo", "30ms", "--ttft-slo", "2s",
                                  "--price-per-device-hour", "2.5"],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    times = interleaved(commands(), args.runs)
    # a shared machine's load and whether compiled bytecode is kept both move these figures: say which
    cache = ("off (PYTHONDONTWRITEBYTECODE: a module edited since its .pyc recompiles every run)"
             if os.environ.get("PYTHONDONTWRITEBYTECODE") else
             "on" + (f" (PYTHONPYCACHEPREFIX={os.environ['PYTHONPYCACHEPREFIX']})"
                     if os.environ.get("PYTHONPYCACHEPREFIX") else ""))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
    rows, ok = table(times, "roofline --help", lambda name: name.startswith("roofline serve"), TARGET_S, False, 24)
    lines = [f"# bench_serve: {args.runs} interleaved runs each, {os.cpu_count()} CPUs, "
             f"Python {sys.version.split()[0]}",
             f"# bytecode cache {cache}; load average after the runs {load} (a shared machine: quote the median)",
             f"# target: roofline serve ... --prompt 2048 --output 256 (curve 1-1024) <= {TARGET_S * 1e3:.0f} ms wall",
             *rows]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
