"""Every measured point faster than our floor, over every GPU and kind the installed tables cover, by why.

Runs `roofline validate --machine M --kind K --json` for each catalog GPU with tables (aiconfigurator-core,
the calibration extra) and each kind, then `--kind collective` over every system, and prints one line per
GPU x kind: rows, points faster than the floor, how many are unexplained, and the explanations by class
(the working set fits in L2; the last L2-sized part of a stream stayed in L2; within the 2% scatter of
CUDA-event timings; a MoE router that hit fewer experts than a balanced spread, above the fewest-experts
floor; a row faster than its own FLOPs at the dense peak, the table's error). The done-when of issue 20:
no unexplained point.

Usage: python bench/validate_faster_points.py [--out bench/results/validate_faster_points.txt]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MACHINES = ("h100-sxm", "h200", "b200", "b300", "gb200", "a100-sxm-80gb", "l40s", "h100-pcie", "l4")
KINDS = ("gemm", "attention", "mla", "moe")
CLASSES = (  # (a phrase validate's explanation contains, the class it is counted in)
    ("stream stayed in L2", "L2: the last part of a stream"),
    ("L2; the benchmark reran", "L2: the working set fits"),
    ("2% scatter", "timing scatter (2%)"),
    ("router hit fewer experts", "MoE: the router hit fewer experts"),
    ("the table's error", "the table's error (faster than its FLOPs at the dense peak)"),
)


def _class(why: str) -> str:
    return next((name for phrase, name in CLASSES if phrase in why), "unexplained")


def _validate(*args: str) -> tuple[dict[str, Any] | None, str, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "roofline.cli", "validate", *args, "--json"],
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        return None, proc.stderr.strip(), seconds
    return json.loads(proc.stdout), "", seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = [f"load at start {os.getloadavg()[0]:.1f} (2 cores shared)"]
    total: collections.Counter[str] = collections.Counter()
    for machine in MACHINES:
        for kind in KINDS:
            report, error, seconds = _validate("--machine", machine, "--kind", kind)
            if report is None:
                lines.append(f"{machine:14s} {kind:10s} no tables: {error.removeprefix('roofline: error: ')[:90]}")
                continue
            groups = report["groups"]
            points = [(g, p) for g in groups for p in g["faster_than_floor"]]
            by = collections.Counter(_class(p["why"]) if p["explained"] else "unexplained" for _, p in points)
            unexplained = sum(1 for _, p in points if not p["explained"])
            total.update(rows=sum(g["rows"] for g in groups), faster=len(points), unexplained=unexplained)
            why = "; ".join(f"{name} {n}" for name, n in sorted(by.items())) or "-"
            lines.append(f"{machine:14s} {kind:10s} rows {sum(g['rows'] for g in groups):7d}  faster {len(points):5d}  "
                         f"unexplained {unexplained}  ({why}; {seconds:.1f} s)")
            lines += [f"    UNEXPLAINED {g['engine']} {g['kind']} {p['kernel']}: {p['why']}"
                      for g, p in points if not p["explained"]]
    report, error, seconds = _validate("--kind", "collective")
    if report is not None:
        per: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for g in report["groups"]:
            per[g["system"]][0] += g["rows"]
            per[g["system"]][1] += g["faster_than_floor"]
        for system, (rows, faster) in sorted(per.items()):
            total.update(rows=rows, faster=faster, unexplained=faster)
            lines.append(f"{system:14s} collective rows {rows:7d}  faster {faster:5d}  unexplained {faster}  "
                         "(a collective row is never explained away)")
    lines.append(f"all: {total['rows']} rows, {total['faster']} faster than the floor, "
                 f"{total['unexplained']} unexplained; load at end {os.getloadavg()[0]:.1f}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 1 if total["unexplained"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
