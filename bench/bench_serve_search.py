"""The split search of issue 21, side by side with what it replaces, in-process (no start-up).

Targets: `serve` with no split (the cheapest layout meeting the targets, serving.splits, then the winner's
whole report) in at most 1 s; `plan` with serving targets (--output, --itl-slo, --price-per-device-hour:
each layout quoted, serving.quote) as fast as today's `plan` (every valid split of one decode step,
ranked). Each case runs interleaved with the others `--runs` times after one warm-up; we print min /
median / max of each and the ratios of the medians.
Usage: python bench/bench_serve_search.py [--runs N] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from roofline.models import describe_step
from roofline.models.search import search_splits
from roofline.parallel import Split
from roofline.serving import serve_model
from roofline.serving.splits import ServeSearch, serve_search
from roofline.vocab import Phase

TARGET_SERVE_S = 1.0
MODEL, MACHINE, P, O, SLO = "llama-3-70b", "dgx-h100", 2048, 256, 0.03


def _served(s: ServeSearch) -> object:
    """What `serve` without a split shows: the search, then the winner's whole report."""
    assert s.winner is not None and s.winner.report is not None
    return s.winner.report.report()


def cases() -> dict[str, Callable[[], object]]:
    step = describe_step(MODEL, Phase.PREFILL, 1, P)
    return {
        "serve, TP 8 given": lambda: serve_model(MODEL, MACHINE, Split(tp=8), prompt=P, output=O, itl_slo_s=SLO),
        "serve, split searched": lambda: _served(serve_search(step, MACHINE, output=O, itl_slo_s=SLO,
                                                              price_per_device_hour=2.5)),
        "plan today (decode step, batch 64, 8k)": lambda: search_splits(MODEL, MACHINE, "decode", 64, 8192),
        "plan with targets (= serve's search)": lambda: serve_search(step, MACHINE, output=O, itl_slo_s=SLO,
                                                                     price_per_device_hour=2.5),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    todo = cases()
    for f in todo.values():  # warm-up: imports and caches
        f()
    load = os.getloadavg()
    times: dict[str, list[float]] = {k: [] for k in todo}
    cpu: dict[str, list[float]] = {k: [] for k in todo}
    for _ in range(args.runs):
        for name, f in todo.items():
            t, c = time.perf_counter(), time.process_time()
            f()
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    med = {k: statistics.median(v) for k, v in times.items()}
    lines = [f"# load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start, "
             f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end; {args.runs} runs"]
    lines += [f"{name:<42} wall min {min(v) * 1e3:6.0f} median {med[name] * 1e3:6.0f} max {max(v) * 1e3:6.0f} ms;"
              f" cpu median {statistics.median(cpu[name]) * 1e3:6.0f} ms" for name, v in times.items()]
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    lines.append(f"serve searched / serve TP 8 given: {med['serve, split searched'] / med['serve, TP 8 given']:.2f}x; "
                 f"target: searched <= {TARGET_SERVE_S:g} s: "
                 f"{'met' if med['serve, split searched'] <= TARGET_SERVE_S else 'NOT met'}")
    ratio = med["plan with targets (= serve's search)"] / med["plan today (decode step, batch 64, 8k)"]
    cratio = cmed["plan with targets (= serve's search)"] / cmed["plan today (decode step, batch 64, 8k)"]
    lines.append(f"plan with targets / plan today: {ratio:.2f}x wall, {cratio:.2f}x cpu; target <= 1x: "
                 f"{'met' if ratio <= 1 else 'NOT met'}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
