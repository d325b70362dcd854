"""Issue 20's accuracy done-when, per GPU × engine × kind (bench/results/validate_done_when.txt).

What `roofline validate --machine M --engine E --kind K --json` reports for M = h100, h200, b200,
every engine, K = gemm and attention, over every row of each table (`--max-rows N`: every ⌈n/N⌉-th row,
quicker; a stride through a table's grid of shapes picks a structured part of it, which the band was
not fitted to hold, so the recorded table is scored on every row), summarised on the kernels whose
floor is at least 10 µs: the expected time's MAPE ≤ 15% with ≥ 50% of the points inside the band (the target). The
same functions as the command (roofline.calibration.tables.tables, validate.join_any,
validate.validate_tables), in one process.

    --fits shipped   score with the shipped fits of src/roofline/expectation/data/ (the default: what
                     `validate` prints)
    --fits fresh     fit here on every ⌈n/4000⌉-th row of each table (the stride `roofline calibrate`
                     takes by default) and score the 3000-row stride: what the shipped fits would give
                     once regenerated, without writing them
    --max-rows N     score every ⌈n/N⌉-th row of each table (default 0: every row, as `validate` does)
    --oos            also, per kind, take every ⌈n/8000⌉-th of its rows (every row of a kind split off a
                     table), fit on the even ones of those (at most 4000, as `roofline calibrate` fits a
                     kind) and score the odd ones: out of sample, beside the in-sample figure

Usage: python bench/validate_done_when.py [--fits shipped|fresh] [--max-rows N] [--oos] [--machine M ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

MACHINES = ("h100", "h200", "b200")
MAX_ROWS = 0  # validate's --max-rows of the recorded table (0: every row)
FIT_ROWS = 4000  # roofline calibrate's default --max-rows
MAPE_TARGET = 0.15
INSIDE_TARGET = 0.50
HEADER = ("GPU      engine  kind                         rows  floor/meas med   MAPE in band | floor>=10us rows"
          "   MAPE in band  target met")


def _groups(machine: str, fits: str, max_rows: int) -> list:  # type: ignore[type-arg]
    from roofline.calibration.tables import Family, installed, systems, tables
    from roofline.calibration.validate import fit_group, join_any, split, summarise_rows, validate_tables
    from roofline.expectation.shipped import shipped, shipped_files
    from roofline.hardware import get_machine

    source = installed()
    mid = get_machine(machine).id
    out = []
    for system in systems(source, mid):
        for family in (Family.GEMM, Family.ATTENTION):
            for table in tables(source, system, family):
                jt = join_any(table.every(max_rows) if max_rows else table)
                if fits == "shipped":
                    out += validate_tables([jt], {(m, e): shipped(m, e) for m, e in shipped_files()})
                    continue
                fitted = {r.kind: fit_group(r, FIT_ROWS)[0] for r in split(join_any(table.every(FIT_ROWS)))}
                out += [summarise_rows(r, fitted[r.kind], "fitted here (calibrate's stride)") for r in split(jt)
                        if r.kind in fitted]
    return out


def _oos(machine: str) -> list[tuple[str, str, str, int, int, float, float, float, float]]:
    """(machine, engine, kind, rows, rows >= 10 us, in-sample MAPE, band, out-of-sample MAPE, band)."""
    from roofline.calibration.tables import Family, installed, systems, tables
    from roofline.calibration.validate import Rows, fit_group, join_any, split, summarise_rows

    source = installed()
    out = []
    from roofline.hardware import get_machine

    for system in systems(source, get_machine(machine).id):
        for family in (Family.GEMM, Family.ATTENTION):
            for table in tables(source, system, family):
                for r in split(join_any(table)):
                    # calibrate's sampling (at most FIT_ROWS of each kind), every other row held out
                    every = range(0, len(r.measured_s), max(1, -(-len(r.measured_s) // (2 * FIT_ROWS))))
                    n = len(every)
                    if n < 40:
                        continue

                    def part(rows: Rows, sel: range) -> Rows:
                        import numpy as np

                        idx = np.array(list(sel))
                        return Rows(rows.machine, rows.engine, rows.version, rows.kind, rows.floors.take(idx),
                                    rows.measured_s[idx], rows.sms, rows.l2_bytes, lambda i: rows.name(int(idx[i])),
                                    rows.l2_s)

                    even, odd = part(r, every[0::2]), part(r, every[1::2])
                    fit, _ = fit_group(even, FIT_ROWS)
                    ins, outs = summarise_rows(even, fit, ""), summarise_rows(odd, fit, "")
                    out.append((r.machine, r.engine, r.kind, n, ins.big_rows + outs.big_rows,
                                ins.big_mape or 0.0, ins.big_inside or 0.0, outs.big_mape or 0.0,
                                outs.big_inside or 0.0))
    return out


def met(g: object) -> bool:
    m, inside = g.big_mape, g.big_inside
    return m is not None and inside is not None and m <= MAPE_TARGET and inside >= INSIDE_TARGET


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fits", choices=("shipped", "fresh"), default="shipped")
    ap.add_argument("--max-rows", type=int, default=MAX_ROWS)
    ap.add_argument("--oos", action="store_true")
    ap.add_argument("--machine", action="append", default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    machines = args.machine or list(MACHINES)
    start = time.perf_counter()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rows = f"every ceil(n/{args.max_rows})-th row of each table" if args.max_rows else "every row of each table"
    lines = [f"python bench/validate_done_when.py --fits {args.fits}"
             f"{f' --max-rows {args.max_rows}' if args.max_rows else ''}{' --oos' if args.oos else ''}  "
             f"(= roofline validate --machine M --engine E --kind gemm|attention"
             f"{f' --max-rows {args.max_rows}' if args.max_rows else ''} --json, "
             f"M = {', '.join(machines)}; E = every engine's newest tables; {rows}; aiconfigurator-core 0.12.0)",
             f"fits: {'the shipped ones, src/roofline/expectation/data/' if args.fits == 'shipped' else 'fitted here'}"
             f" (roofline calibrate --from aiconfigurator --machine M --engine E, --max-rows {FIT_ROWS}: at most "
             f"{FIT_ROWS} rows of each kind, at a stride through its rows)",
             f"run {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on the CPU dev box; uptime: {load}",
             "", HEADER]
    groups = []
    for machine in machines:
        groups += _groups(machine, args.fits, args.max_rows)
    faster: dict[str, tuple[int, int]] = {}
    for g in groups:
        if not g.kind.startswith(("gemm", "context_attention", "generation_attention")):
            continue
        big = (f"{g.big_rows:>17}  {100 * (g.big_mape or 0):4.1f}%  {100 * (g.big_inside or 0):5.0f}%  "
               f"{'yes' if met(g) else 'no'}")
        lines.append(f"{g.machine.split('-')[0]:<8} {g.engine:<7} {g.kind:<27} {g.rows:>5}  {g.share_median:>14.2f}"
                     f"  {100 * g.mape:4.1f}%  {100 * g.inside:5.0f}% |{big}")
        n, u = faster.get(g.machine, (0, 0))
        faster[g.machine] = (n + len(g.faster), u + g.unexplained)
    lines.append("")
    lines += [f"{m}: faster than the floor {n}, unexplained {u}" for m, (n, u) in faster.items()]
    scored = [g for g in groups if g.kind.startswith(("gemm", "context_attention", "generation_attention"))]
    lines.append("")
    lines.append(f"Summary (floor >= 10 us; target MAPE <= 15% and >= 50% inside the band): "
                 f"{sum(met(g) for g in scored)} of {len(scored)} groups met.")
    missed = [g for g in scored if not met(g)]
    for g in missed:
        lines.append(f"  missed: {g.machine} {g.engine} {g.kind}: {100 * (g.big_mape or 0):.1f}% MAPE, "
                     f"{100 * (g.big_inside or 0):.0f}% in band")
    if args.oos:
        lines += ["", f"Out of sample (per kind, every ceil(n / {2 * FIT_ROWS})-th row: fit on the even ones, at most "
                  f"{FIT_ROWS} as calibrate fits a kind, scored on the odd; floor >= 10 us, MAPE / in band):", "",
                  "GPU      engine kind                       rows   >=10us   in-sample MAPE / band | out of sample"]
        for machine in machines:
            for m, e, k, n, nb, im, ib, om, ob in _oos(machine):
                lines.append(f"{m:<8} {e:<6} {k:<26} {n:>5}  {nb:>5}    {100 * im:5.1f}%  {100 * ib:3.0f}%"
                             f"           | {100 * om:5.1f}%  {100 * ob:3.0f}%")
    lines.append("")
    lines.append(f"({time.perf_counter() - start:.0f} s)")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
