"""The split search of issue 21, side by side with what it replaces, in-process (no start-up).

Targets: `serve` with no split (the cheapest layout meeting the targets, serving.splits, then the winner's
whole report) in at most 1 s; `plan` with serving targets (--output, --itl-slo, --price-per-device-hour:
each layout quoted, serving.quote) as fast as today's `plan` (every valid split of one decode step,
ranked). Each case runs interleaved with the others `--runs` times after one warm-up; we print min /
median / max of each and the ratios of the medians.

"Today's plan" read two ways: plan as it is now (above), and plan as it was on the day issue 21 was filed
(45d41c3, before plan itself got faster under issues 22 and 24): --issue-day SRC times that plan, from the
`src` of a checkout of that commit, in a child process that runs one call per line it reads, in turn with
the cases here (each process times its own calls: process CPU time and wall time around the call alone).
--commands N times the two plan commands (and with --issue-day the plan command of that day) as whole
processes, N times each in turn, start-up and imports counted: what a user waits for.
Usage: python bench/bench_serve_search.py [--runs N] [--out FILE] [--issue-day SRC] [--commands N]
  e.g. git worktree add /tmp/issue-day 45d41c3 && python bench/bench_serve_search.py --issue-day /tmp/issue-day/src
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench_startup import interleaved  # the same interleaved timing of whole commands, bench/ beside it
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


# the child for --issue-day: plan's search as that checkout has it, one call per line read, its times printed
CHILD = f"""
import sys, time
from roofline.models.search import search_splits
call = lambda: search_splits({MODEL!r}, {MACHINE!r}, "decode", 64, 8192)
call()
print("ready", flush=True)
for _ in sys.stdin:
    t, c = time.perf_counter(), time.process_time()
    call()
    print(time.perf_counter() - t, time.process_time() - c, flush=True)
"""
OLD = "plan on issue 21's day (45d41c3)"


def _child(src: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready", f"{src}: the child did not start"
    return p


def _child_call(p: subprocess.Popen[str]) -> tuple[float, float]:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write("go\n")
    p.stdin.flush()
    wall, cpu = p.stdout.readline().split()
    return float(wall), float(cpu)


PLAN = ["plan", MODEL, "--machine", MACHINE, "--batch", "64", "--context", "8192"]
PLAN_TARGETS = ["plan", MODEL, "--machine", MACHINE, "--prompt", str(P), "--output", str(O), "--itl-slo",
                f"{SLO * 1e3:g}ms", "--price-per-device-hour", "2.5"]


def _commands(n: int, issue_day: Path | None) -> list[str]:
    """--commands: medians of whole processes (roofline.cli.main from each checkout's src, put first on
    sys.path), taking turns (bench_startup.interleaved) after one round that warms the file cache."""
    def command(src: Path, argv: list[str]) -> list[str]:
        run = f"import sys; sys.path.insert(0, {str(src)!r}); from roofline.cli import main; sys.exit(main())"
        return [sys.executable, "-c", run, *argv]

    here = Path(__file__).resolve().parents[1] / "src"
    todo = {"plan today": command(here, PLAN), "plan with targets": command(here, PLAN_TARGETS)}
    if issue_day:
        todo[OLD] = command(issue_day, PLAN)
    interleaved(todo, 1)
    walls = interleaved(todo, n)
    med = {k: statistics.median(v) for k, v in walls.items()}
    lines = [f"# whole commands, {n} runs each in turn: roofline {' '.join(PLAN_TARGETS)} against roofline "
             f"{' '.join(PLAN)}"]
    lines += [f"{name:<42} wall min {min(v):6.3f} median {med[name]:6.3f} max {max(v):6.3f} s"
              for name, v in walls.items()]
    lines.append(f"command: plan with targets / plan today {med['plan with targets'] / med['plan today']:.2f}x"
                 + (f"; / {OLD} {med['plan with targets'] / med[OLD]:.2f}x" if issue_day else ""))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--issue-day", type=Path, default=None, help="src of a checkout of 45d41c3 (module docstring)")
    ap.add_argument("--commands", type=int, default=0, help="also time the plan commands as whole processes")
    args = ap.parse_args()
    todo = cases()
    for f in todo.values():  # warm-up: imports and caches
        f()
    child = _child(args.issue_day) if args.issue_day else None
    load = os.getloadavg()
    times: dict[str, list[float]] = {k: [] for k in (*todo, *((OLD,) if child else ()))}
    cpu: dict[str, list[float]] = {k: [] for k in times}
    for _ in range(args.runs):
        for name, f in todo.items():
            t, c = time.perf_counter(), time.process_time()
            f()
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
        if child:
            wall, used = _child_call(child)
            times[OLD].append(wall)
            cpu[OLD].append(used)
    if child:
        child.terminate()
    med = {k: statistics.median(v) for k, v in times.items()}
    lines = [f"# load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start, "
             f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end; {args.runs} runs"]
    lines += [f"{name:<42} wall min {min(v) * 1e3:6.1f} median {med[name] * 1e3:6.1f} max {max(v) * 1e3:6.1f} ms;"
              f" cpu median {statistics.median(cpu[name]) * 1e3:6.1f} ms" for name, v in times.items()]
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    lines.append(f"serve searched / serve TP 8 given: {med['serve, split searched'] / med['serve, TP 8 given']:.2f}x; "
                 f"target: searched <= {TARGET_SERVE_S:g} s: "
                 f"{'met' if med['serve, split searched'] <= TARGET_SERVE_S else 'NOT met'}")
    ratio = med["plan with targets (= serve's search)"] / med["plan today (decode step, batch 64, 8k)"]
    cratio = cmed["plan with targets (= serve's search)"] / cmed["plan today (decode step, batch 64, 8k)"]
    lines.append(f"plan with targets / plan today: {ratio:.2f}x wall, {cratio:.2f}x cpu; target <= 1x: "
                 f"{'met' if ratio <= 1 else 'NOT met'}")
    if child:
        old, cold = med["plan with targets (= serve's search)"] / med[OLD], \
            cmed["plan with targets (= serve's search)"] / cmed[OLD]
        lines.append(f"plan with targets / {OLD}: {old:.2f}x wall, {cold:.2f}x cpu; target <= 1x: "
                     f"{'met' if old <= 1 else 'NOT met'}")
    if args.commands:
        lines += _commands(args.commands, args.issue_day)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
