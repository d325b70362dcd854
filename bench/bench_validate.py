"""Validation and calibration speed (issue 20).

Targets: `roofline validate` over every H100 row (gemm and attention, every engine's newest tables)
in at most 30 s; the shipped calibration adds at most 20 ms to a model analysis (Llama 3 70B decode
on an H100: the analysis alone, then the analysis plus the expected band of every kernel from the
shipped fit, the first call included, which reads the JSON file). Side-by-side ratios printed.
Usage: python bench/bench_validate.py [--max-rows N] [--runs N] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

VALIDATE_TARGET_S = 30.0
# the same validate before the columnar join (a graph, a kernel and a placement per shape): 180-190 s on
# this box, bench/results/bench_validate.txt of 2026-12-01
BEFORE_S = 185.0
BAND_TARGET_S = 20e-3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-rows", type=int, default=0, help="rows a table (0: every row)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--skip-validate", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    lines: list[str] = []

    from roofline.calibration.choose import choose
    from roofline.models import analyze_model

    analyze_model("llama-3-70b", "h100", "decode", 64, 8192)
    plain = []
    for _ in range(args.runs):
        t = time.perf_counter()
        analyze_model("llama-3-70b", "h100", "decode", 64, 8192)
        plain.append(time.perf_counter() - t)
    first = time.perf_counter()
    a = analyze_model("llama-3-70b", "h100", "decode", 64, 8192)
    bands = [choose(a.machine.id).band(p) for p in a.placements]
    first_s = time.perf_counter() - first
    banded = []
    for _ in range(args.runs):
        t = time.perf_counter()
        a = analyze_model("llama-3-70b", "h100", "decode", 64, 8192)
        chosen = choose(a.machine.id)
        bands = [chosen.band(p) for p in a.placements]
        banded.append(time.perf_counter() - t)
    p_med, b_med = statistics.median(plain), statistics.median(banded)
    added = b_med - p_med
    lines.append(f"model analysis, Llama 3 70B decode b64 ctx 8192 on h100, {len(bands)} kernels "
                 f"({args.runs} runs):")
    lines.append(f"  analysis alone          median {p_med * 1e3:8.2f} ms")
    lines.append(f"  analysis + bands        median {b_med * 1e3:8.2f} ms   ratio {b_med / p_med:.2f}x")
    lines.append(f"  first call (reads JSON) {first_s * 1e3:8.2f} ms")
    lines.append(f"  added by the calibration {added * 1e3:.2f} ms (target <= {BAND_TARGET_S * 1e3:.0f} ms): "
                 f"{'met' if max(added, first_s - p_med) <= BAND_TARGET_S else 'NOT met'}")

    if not args.skip_validate:
        from roofline.calibration.join import join_table
        from roofline.calibration.tables import Family, installed, tables
        from roofline.calibration.validate import validate_tables
        from roofline.expectation.shipped import shipped as files
        from roofline.expectation.shipped import shipped_files as shipped_list

        t = time.perf_counter()
        source = installed()
        read = []
        for family in (Family.GEMM, Family.ATTENTION):
            read += list(tables(source, "h100_sxm", family))
        read_s = time.perf_counter() - t
        used = [x.every(args.max_rows) if args.max_rows else x for x in read]
        t = time.perf_counter()
        joined = [join_table(x) for x in used]
        join_s = time.perf_counter() - t
        t = time.perf_counter()
        groups = validate_tables(joined, {(m, e): files(m, e) for m, e in shipped_list()})
        stats_s = time.perf_counter() - t
        total = read_s + join_s + stats_s
        n_used, n_read = sum(len(x) for x in used), sum(len(x) for x in read)
        lines.append(f"validate over h100 ({n_used} of {n_read} rows; {len(groups)} groups):")
        verdict = "met" if total <= VALIDATE_TARGET_S else "NOT met"
        lines.append(f"  read tables {read_s:7.1f} s   join {join_s:7.1f} s   summarise {stats_s:7.1f} s   "
                     f"total {total:7.1f} s (target <= {VALIDATE_TARGET_S:.0f} s: ratio to target "
                     f"{total / VALIDATE_TARGET_S:.2f}x, {BEFORE_S / total:.0f}x faster than the "
                     f"{BEFORE_S:.0f} s before the columnar join): {verdict}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
