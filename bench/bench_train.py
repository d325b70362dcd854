"""`roofline train` and `roofline plan --train` from the command line, against `python -c pass` and
`roofline --help`, side by side.

Targets (issue 23): one train analysis at most 300 ms from the CLI (Llama 3 70B, TP 8 × PP 4 × DP 16 of
dgx-h100, --json); `plan --train` for a 405B model over a 16,384-GPU system (Llama 3.1 405B on the whole
dgx-h100 SuperPOD, 2048 nodes × 8) at most 2 s. The runs are interleaved (bare, help, train, plan, bare,
...) so that the machine's noise hits all alike; each row gives min, median and max, its median over
`roofline --help`'s (the start-up every command pays: bench_startup records it unloaded), and the ratio
of its median to its target. With --instructions (valgrind installed) each command's instruction count
too, one run each: a count the machine's load does not move (bench_startup.instructions).
Usage: python bench/bench_train.py [--runs N] [--instructions] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_startup import _uptime, instruction_rows, interleaved, roofline_command

TARGETS_S = {"roofline train (one analysis)": 0.300, "roofline plan --train (405B, 16,384 GPUs)": 2.0}


def commands() -> dict[str, list[str]]:
    base = roofline_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "roofline --help": [*base, "--help"],
        "roofline model (inference, for scale)": [*base, "model", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8",
                                                  "--batch", "64", "--context", "8192", "--json"],
        "roofline train (one analysis)": [*base, "train", "llama-3-70b", "--machine", "dgx-h100", "--seq", "8192",
                                          "--global-batch", "512", "--tp", "8", "--pp", "4", "--dp", "16", "--json"],
        "roofline plan --train (405B, 16,384 GPUs)": [*base, "plan", "--train", "llama-3.1-405b", "--machine",
                                                      "dgx-h100", "--seq", "8192", "--global-batch", "2048",
                                                      "--zero", "1", "--json"],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--instructions", action="store_true", help="also count each command's instructions")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    start = _uptime()
    times = interleaved(commands(), args.runs)
    load_end = os.getloadavg()
    width = 44
    load = ", ".join(f"{x:.1f}" for x in load_end)
    lines = [f"# bench_train: {args.runs} interleaved runs each, {os.cpu_count()} CPUs, "
             f"Python {sys.version.split()[0]}, load average {load} at the end (other work on the machine slows "
             "every row alike: compare each with `roofline --help` and `roofline model`)",
             f"{'command':<{width}}{'min':>10}{'median':>10}{'max':>10}{'× help':>9}{'target':>10}"
             f"{'median/target':>15}"]
    help_med = statistics.median(times["roofline --help"])
    ok = True
    for name, ts in times.items():
        med = statistics.median(ts)
        target = TARGETS_S.get(name)
        tail = ""
        if target is not None:
            ok &= med <= target
            tail = f"{target * 1e3:>8.0f}ms{med / target:>14.2f}x" + ("  ok" if med <= target else "  OVER")
        lines.append(f"{name:<{width}}{min(ts) * 1e3:>8.1f}ms{med * 1e3:>8.1f}ms{max(ts) * 1e3:>8.1f}ms"
                     f"{med / help_med:>8.2f}x{tail}")
    if args.instructions and shutil.which("valgrind"):
        rows, counts = instruction_rows(commands(), "python -c pass")
        over_help = {k: v / counts["roofline --help"] for k, v in counts.items()}
        lines += ["", "# instructions, one run each under valgrind --tool=callgrind (load-independent)",
                  *(f"{row}{'':4}{over_help[name]:.2f}x help" if name in over_help else row
                    for row, name in zip(rows, ["", *counts], strict=True))]
    lines += ["", f"# uptime at the start: {start}", f"# uptime at the end:   {_uptime()}"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
