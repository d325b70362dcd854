"""The measured roofline of a program as text and rows: each kernel's measured time, what it achieved,
its share of the roof and its verdict; and a program against its analytic model (roofline.diff).

    achieved FLOP/s  = FLOPs / measured time;   achieved bandwidth = DRAM bytes / measured time
    % of roof        = time floor / measured time   (Placement.fraction_of_roof)
    verdict          roofline.tracing.profile.verdict (latency-bound, at bandwidth, under compute, ...)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from roofline import units as u
from roofline.diff import Diff
from roofline.placement import GraphAnalysis
from roofline.report.text.model import rows_csv
from roofline.report.text.tables import render
from roofline.tracing.kineto import Profile
from roofline.tracing.profile import verdict

PROFILE_CSV_COLUMNS = ("name", "kind", "module", "measured_time_s", "launch_gap_s", "gpu_kernels", "flop", "bytes",
                       "flop_per_byte", "achieved_flop_per_s", "achieved_bytes_per_s", "time_s", "fraction_of_roof",
                       "bound", "bound_class", "verdict", "measured_flop", "measured_dram_bytes",
                       "measured_l2_bytes", "measured_l1_bytes", "machine", "dtype")


def profile_rows(a: GraphAnalysis, p: Profile) -> list[dict[str, Any]]:
    """One row per kernel, in the order they ran: predicted (floor, FLOPs, bytes) beside measured."""
    rows = []
    for x in a.placements:
        measured = x.measured_time_s
        gap = p.gaps_s.get(x.name, 0.0) if p.device == "cuda" else None
        got = p.measured_bytes.get(x.name, {})
        rows.append({
            "name": x.name, "kind": x.kind, "module": p.trace.module_of.get(x.name, ""),
            "measured_time_s": measured, "launch_gap_s": gap, "gpu_kernels": p.launches.get(x.name),
            "flop": x.flop, "bytes": x.bytes,
            "flop_per_byte": x.flop_per_byte if math.isfinite(x.flop_per_byte) else None,
            "achieved_flop_per_s": x.flop / measured if measured else None,
            "achieved_bytes_per_s": x.bytes / measured if measured else None,
            "time_s": x.time_s, "fraction_of_roof": x.fraction_of_roof, "bound": str(x.bound),
            "bound_class": str(x.bound_class), "verdict": str(verdict(x, gap or 0.0, cpu=p.device == "cpu")),
            "measured_flop": p.measured_flop.get(x.name), "measured_dram_bytes": got.get("dram"),
            "measured_l2_bytes": got.get("l2"), "measured_l1_bytes": got.get("l1"),
            "machine": a.machine.id, "dtype": a.dtype.name,
        })
    return rows


def profile_csv(rows: list[dict[str, Any]]) -> str:
    return rows_csv(rows, PROFILE_CSV_COLUMNS)


def _t(v: Any) -> str:
    return "—" if v is None else u.format_time(v)


def profile_text(rows: list[dict[str, Any]], p: Profile, a: GraphAnalysis, title: str, top: int = 30,
                 stand_in: bool = False) -> str:
    """The slowest `top` kernels (0: all) as a table, then the totals, time by verdict and the notes;
    `stand_in`: a CPU run on the default machine (the command warned; the note says it again, shorter)."""
    from roofline.report.text.grid import Table

    timed = [r for r in rows if r["measured_time_s"] is not None]
    shown = sorted(timed, key=lambda r: -r["measured_time_s"])
    if top:
        shown = shown[:top]
    cuda = bool(p.gaps_s)
    ncu = bool(p.measured_bytes)
    t = Table(title=title, title_justify="left")
    cols = ["kernel", "measured"] + (["gap"] if cuda else []) + ["FLOPs", "bytes"]
    cols += ["DRAM meas."] if ncu else []
    cols += ["FLOP/B", "achieved", "% of roof", "verdict"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("kernel", "verdict") else "right")
    for r in shown:
        achieved = ("—" if not r["flop"] and not r["bytes"] else
                    f"{u.format_flop_per_s(r['achieved_flop_per_s'] or 0)}, "
                    f"{u.format_bytes_per_s(r['achieved_bytes_per_s'] or 0)}")
        cells = [r["name"], _t(r["measured_time_s"])] + ([_t(r["launch_gap_s"])] if cuda else [])
        cells += [u.format_flop(r["flop"]) if r["flop"] else "—", u.format_bytes(r["bytes"]) if r["bytes"] else "—"]
        if ncu:
            cells.append(u.format_bytes(r["measured_dram_bytes"]) if r["measured_dram_bytes"] is not None else "—")
        frac = r["fraction_of_roof"]
        cells += [u.format_intensity(r["flop_per_byte"]) if r["flop_per_byte"] is not None else "—", achieved,
                  "—" if frac is None or not (r["flop"] or r["bytes"]) else f"{frac:.0%}",
                  r["verdict"].split(":")[0]]
        t.add_row(*cells)
    out = [render(t, width=170)]
    total = sum(r["measured_time_s"] for r in timed)
    floors = sum(r["time_s"] for r in timed)
    left = len(timed) - len(shown)
    if left > 0:
        out.append(f"({len(shown)} slowest of {len(timed)} kernels shown; --top 0 shows all, --csv writes all)")
    line = (f"measured {u.format_time(total)} over {len(timed)} kernels; their floors sum to {u.format_time(floors)}"
            f" on {a.machine.name} ({a.dtype.name}): {floors / total:.1%} of the roof overall"
            if total else "no kernel was timed")
    out.append(line)
    above = [r["name"] for r in timed if r["verdict"].startswith("ABOVE THE ROOF")]
    if above:
        many = len(above) > 1
        out.append(f"! {len(above)} kernel{'s' if many else ''} measured ABOVE the roof ({', '.join(above[:5])}"
                   f"{', ...' if len(above) > 5 else ''}): the model or the measurement is wrong for "
                   f"{'them' if many else 'it'}")
    if cuda:
        out.append(f"launch gaps (stream idle before a kernel): {u.format_time(p.gap_time_s)}"
                   f"{f' = {p.gap_time_s / (p.gap_time_s + total):.0%} of the GPU timeline' if total else ''}")
    by: dict[str, float] = {}
    for r in timed:
        label = r["verdict"].split(":")[0]
        by[label] = by.get(label, 0.0) + r["measured_time_s"]
    if total:
        out.append("time by verdict: " + ", ".join(f"{k} {v / total:.0%}" for k, v in
                                                   sorted(by.items(), key=lambda kv: -kv[1])))
        advice = dict.fromkeys(r["verdict"] for r in shown if ":" in r["verdict"])
        out += [f"  {v.split(':')[0]} → {v.split(':', 1)[1].strip()}" for v in advice]
    if p.device == "cpu" and a.machine.kind != "cpu":
        out.append(f"note: CPU op times placed on {a.machine.name}'s roof{' (a stand-in)' if stand_in else ''}; "
                   "for this CPU's own roof, `roofline measure --save cpu.toml` then --machine cpu.toml")
    time_only = not p.shapes and not p.measured_bytes
    if time_only:
        out.append("time-only placement: the trace has no shapes (record_shapes=False), so no FLOPs or bytes")
    if p.trace.unknown:
        out.append("no FLOP formula (bytes only): " + ", ".join(f"aten::{k} ×{n}" for k, n in p.trace.unknown.items()))
    for op, why in p.trace.errors.items():
        out.append(f"not counted: {op} ({why})")
    out += [f"note: {n}" for n in dict.fromkeys(p.notes) if not (time_only and "no shapes" in n)]  # said above
    return "\n".join(out)


def diff_text(d: Diff) -> str:
    """The program beside the model, family by family, then each named difference."""
    from roofline.report.text.grid import Table

    s = d.model.shape
    title = (f"{d.program} against the model of {d.model.config.name} ({s.phase}, batch {s.batch}, "
             f"{'prompt' if str(s.phase) == 'prefill' else 'context'} {s.seq}, flash plan)")
    t = Table(title=title, title_justify="left")
    for c in ("family", "kernels", "model kernels", "FLOPs", "model FLOPs", "bytes", "model bytes"):
        t.add_column(c, justify="left" if c == "family" else "right")
    for r in d.rows:
        t.add_row(r.family, str(r.program_kernels), str(r.model_kernels), u.format_flop(r.program_flop),
                  u.format_flop(r.model_flop), u.format_bytes(r.program_bytes), u.format_bytes(r.model_bytes))
    out = [render(t, width=150)]
    if d.differences:
        out.append("differences:")
        for x in d.differences:
            cost = ", ".join(v for v in (f"+{u.format_flop(x.extra_flop)}" if x.extra_flop else "",
                                         f"{'+' if x.extra_bytes > 0 else '−'}{u.format_bytes(abs(x.extra_bytes))}"
                                         if x.extra_bytes else "") if v)
            out.append(f"- {x.name}{f' ({cost})' if cost else ''}: {x.detail}")
    else:
        out.append("no named difference found (the families above show whatever else differs)")
    out += [f"note: {n}" for n in d.notes]
    return "\n".join(out)


def diff_rows(d: Diff) -> Sequence[dict[str, Any]]:
    return [dict(r.__dict__) for r in d.rows]


__all__ = ["PROFILE_CSV_COLUMNS", "diff_rows", "diff_text", "profile_csv", "profile_rows", "profile_text"]
