"""`roofline import` against its resource targets (issue 24, item 6): time and peak memory per case.

Targets: import <= 30 s and <= 1 GiB for an ncu CSV of 1M rows or a 1 GiB trace, "streamed, or refused up front
past a stated cap". The caps (README, "Import"): a trace is streamed (only the operator, kernel and runtime
events are kept) up to 512 MiB and 90,000 kept events; an ncu CSV is counted before it is parsed, up to 128 MiB
and 30,000 kernel rows. The cases, each run as its own `python -m roofline.cli import FILE` process (time:
wall clock; memory: the process's peak resident set, from wait4):

    ncu 1M rows          refused up front (324 MB: past 128 MiB)
    trace 1 GiB          refused up front (past 512 MiB)
    ncu at the cap       30,000 rows of the fixture's three kernels: parsed, placed, reported
    trace at the cap     30,000 aten::mm with their launches and kernels (90,000 kept events)
    trace 500 MiB        streamed: 2,000 operators among Python-function events the importer drops

Each line prints the time and memory beside their targets as ratios (<= 1.00: met) and the machine's load
(`os.getloadavg`) before it: two cores shared with other work make the times noisy, not the memory.

Usage: python bench/bench_import.py [--dir TMP] [--out FILE] [--skip-big]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "ncu_raw_small.csv"
TARGET_S, TARGET_BYTES = 30.0, 1 << 30


def ncu_csv(path: Path, rows: int) -> None:
    lines = [line for line in FIXTURE.read_text().splitlines() if not line.startswith("#")]
    header, units, *kernels = lines
    with path.open("w") as f:
        f.write(header + "\n" + units + "\n")
        for i in range(rows):
            r = kernels[i % len(kernels)]
            f.write(f'"{i}"' + r[r.index(","):] + "\n")


def trace(path: Path, ops: int, target_bytes: int = 0, python_events: int = 0) -> None:
    """`ops` aten::mm 1024^3 (fp16) each with its launch and kernel, and `python_events` Python-function
    events after each, until the file reaches `target_bytes` (when given)."""
    with path.open("w") as f:
        f.write('{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [\n')
        size, i, first = 0, 0, True
        while i < ops or (target_bytes and size < target_bytes):
            t = 100.0 * i
            evs: list[dict[str, object]] = []
            if i < ops:
                evs += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 10.0,
                         "args": {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["c10::Half", "c10::Half"],
                                  "Concrete Inputs": ["", ""], "External id": i}},
                        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                         "ts": t + 5, "dur": 2.0, "args": {"correlation": i, "External id": i}},
                        {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm_f16f16_f16f32_tn_n", "pid": 0, "tid": 7,
                         "ts": t + 15, "dur": 20.0, "args": {"correlation": i, "stream": 7, "device": 0}}]
            evs += [{"ph": "X", "cat": "python_function", "name": f"nn.Module: Linear_{j} (model.py:{j})", "pid": 1,
                     "tid": 1, "ts": t + 0.1 * j, "dur": 0.05, "args": {"Python id": j, "Python parent id": j - 1}}
                    for j in range(python_events)]
            text = ",\n".join(json.dumps(e) for e in evs)
            if text:
                text = ("" if first else ",\n") + text
                first = False
            f.write(text)
            size += len(text)
            i += 1
        f.write("\n], \"traceName\": \"bench\"}\n")


def run(file: Path) -> tuple[float, int, int, str]:
    """Wall seconds, peak RSS bytes, exit code and the last stderr line of one import."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "roofline.cli", "import", str(file), "--machine", "h100",
                             "--top", "5"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    return seconds, usage.ru_maxrss * 1024, proc.returncode, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="where to write the files (about 1.9 GB; removed after)")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    ap.add_argument("--skip-big", action="store_true", help="leave out the 1 GiB and 500 MiB traces")
    args = ap.parse_args()
    lines = [f"bench_import: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, python {sys.version.split()[0]}, "
             f"{os.cpu_count()} cores; targets {TARGET_S:.0f} s and {TARGET_BYTES / 2**30:.0f} GiB (<= 1.00: met)"]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        d = Path(tmp)
        cases: list[tuple[str, Path, object]] = [
            ("ncu 1M rows", d / "k1m.csv", lambda p: ncu_csv(p, 1_000_000)),
            ("ncu at the cap (30,000 rows)", d / "k30k.csv", lambda p: ncu_csv(p, 30_000)),
            ("trace at the cap (30,000 ops)", d / "t30k.json", lambda p: trace(p, 30_000)),
        ]
        if not args.skip_big:
            cases[1:1] = [("trace 1 GiB", d / "t1g.json", lambda p: trace(p, 0, 1 << 30, python_events=8))]
            cases.append(("trace 500 MiB streamed", d / "t500m.json",
                          lambda p: trace(p, 2_000, 500 << 20, python_events=8)))
        for name, path, write in cases:
            write(path)  # type: ignore[operator]
            load = os.getloadavg()[0]
            seconds, rss, code, last = run(path)
            size = path.stat().st_size
            what = "refused" if code == 2 else ("read" if code == 0 else f"exit {code}")
            lines.append(f"  {name:32s} {size / 1e6:8.0f} MB  {what:8s} {seconds:6.1f} s ({seconds / TARGET_S:4.2f}) "
                         f"{rss / 2**20:6.0f} MiB ({rss / TARGET_BYTES:4.2f})  load {load:4.1f}")
            if code == 2:
                lines.append(f"      {last[:150]}")
            path.unlink()
            print(lines[-1] if code != 2 else "\n".join(lines[-2:]), flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
