"""Human-readable tables (rich) for placements and machines. Numbers always carry their units."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

from roofline.hardware import Machine
from roofline.hardware.machine import PEAK_KEYS
from roofline.placement import GraphAnalysis, Placement
from roofline.units import (
    format_bytes,
    format_bytes_per_s,
    format_flop,
    format_flop_per_s,
    format_intensity,
    format_time,
)


def render(table: object, width: int = 120) -> str:
    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True, highlight=False, soft_wrap=False).print(table)
    return buf.getvalue().rstrip("\n")


def placement_text(p: Placement, title: str = "") -> str:
    from rich.table import Table

    t = Table(title=title or f"{p.name} on {p.machine.name} ({p.dtype.name})", show_header=False,
              box=None, title_justify="left", pad_edge=False)
    t.add_column("quantity", style="bold")
    t.add_column("value")
    t.add_column("how")
    t.add_row("FLOPs", format_flop(p.flop), f"{p.flop:.6g} FLOP")
    t.add_row("bytes", format_bytes(p.bytes), f"{p.bytes:.6g} B to and from DRAM")
    t.add_row("intensity", format_intensity(p.flop_per_byte, 5), "FLOPs / bytes")
    t.add_row("ridge", format_intensity(p.ridge_flop_per_byte, 4),
              f"{format_flop_per_s(p.roof_flop_per_s, 4)} / {format_bytes_per_s(p.bytes_per_s, 4)}")
    if abs(p.kernel_ridge_flop_per_byte - p.ridge_flop_per_byte) > 1e-9 * p.ridge_flop_per_byte:
        units = sorted(u for u, f in p.cost.flop_by_unit.items() if f)
        where = f"{units[0]} units" if len(units) == 1 else f"{' and '.join(units)} units, each at its own peak"
        t.add_row("", format_intensity(p.kernel_ridge_flop_per_byte, 4),
                  f"at the {format_flop_per_s(p.peak_flop_per_s, 4)} its FLOPs run at ({where})")
    how = f"{p.fraction_of_peak:.2%} of the {p.dtype.peak_key} peak; min(peak, BW × I)"
    if p.fraction_of_peak > 1:  # the vector FLOPs (a softmax) run alongside the matmuls
        how = f"{p.fraction_of_peak:.2%} of the {p.dtype.peak_key} matrix peak: vector FLOPs overlap the matmuls"
    t.add_row("attainable", format_flop_per_s(p.attainable_flop_per_s, 4), how)
    t.add_row("time floor", format_time(p.time_s),
              f"compute {format_time(p.compute_time_s)}, memory {format_time(p.memory_time_s)}")
    t.add_row("bound", p.bound_class, f"limited by {p.bound}")
    if p.measured_time_s is not None:
        t.add_row("measured", format_time(p.measured_time_s),
                  f"{p.fraction_of_roof or 0:.1%} of the roof" + (" (ABOVE THE ROOF)" if p.above_roof else ""))
    return render(t)


def placements_table(placements: Sequence[Placement], title: str = "", total_time_s: float | None = None) -> str:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col, just in (("kernel", "left"), ("×", "right"), ("FLOPs", "right"), ("bytes", "right"),
                      ("FLOP/B", "right"), ("bound", "left"), ("time floor", "right"), ("share", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    total = total_time_s if total_time_s is not None else sum(p.total_time_s for p in placements)
    for p in placements:
        share = p.total_time_s / total if total else 0.0
        t.add_row(p.name, str(p.count), format_flop(p.flop), format_bytes(p.bytes),
                  format_intensity(p.flop_per_byte), p.bound_class, format_time(p.total_time_s), f"{share:.1%}")
    return render(t)


def analysis_text(a: GraphAnalysis, title: str) -> str:
    """The kernels of a sequence as a table, then its totals on one line."""
    return (placements_table(a.placements, title=title) + "\n"
            + f"total: {format_flop(a.flop)}, {format_bytes(a.bytes)}, {format_intensity(a.flop_per_byte)}, "
              f"time floor {format_time(a.time_s)}")


def machines_table(machines: Iterable[Machine], dtypes: Sequence[str] = ("bf16", "fp8", "fp4")) -> str:
    from rich.table import Table

    t = Table(title="Machines (dense peaks; ridge = peak / DRAM bandwidth)", title_justify="left")
    t.add_column("id")
    t.add_column("aliases")
    t.add_column("name")
    for d in dtypes:
        t.add_column(f"{d} peak", justify="right")
    t.add_column("DRAM BW", justify="right")
    t.add_column("capacity", justify="right")
    for d in dtypes:
        t.add_column(f"ridge {d}", justify="right")
    for m in machines:
        peaks = [format_flop_per_s(m.matrix_flop_per_s[d]) if d in m.matrix_flop_per_s else "—" for d in dtypes]
        ridges = [f"{m.ridge_flop_per_byte(d):.0f}" if d in m.matrix_flop_per_s else "—" for d in dtypes]
        cap = m.memory_capacity_bytes
        t.add_row(m.id, ", ".join(m.aliases), m.name, *peaks, format_bytes_per_s(m.memory_bytes_per_s),
                  format_bytes(cap, binary=True) if cap else "—", *ridges)
    return render(t, width=200)


def machine_text(m: Machine) -> str:
    from rich.table import Table

    t = Table(title=f"{m.name} ({m.id})", title_justify="left")
    t.add_column("ceiling")
    t.add_column("value", justify="right")
    t.add_column("ridge", justify="right")
    t.add_column("source")
    bw = m.memory_bytes_per_s
    for section, table in (("matrix", m.matrix_flop_per_s), ("vector", m.vector_flop_per_s),
                           ("sparse (2:4, not used by default)", m.sparse_flop_per_s)):
        key = section.split()[0]
        for d in sorted(table, key=PEAK_KEYS.index):
            t.add_row(f"{section} {d}", format_flop_per_s(table[d], 4), f"{table[d] / bw:.1f} FLOP/B",
                      m.sources.get(f"peak.{key}", ""))
    for level in m.memory.values():
        if level.bytes_per_s:
            t.add_row(f"{level.name} bandwidth", format_bytes_per_s(level.bytes_per_s, 4), "", level.source)
        if level.capacity_bytes:
            cap = f"{format_bytes(level.capacity_bytes, 4, binary=True)} ({format_bytes(level.capacity_bytes, 4)})"
            t.add_row(f"{level.name} capacity" + (f" ({level.technology})" if level.technology else ""),
                      cap, "", level.source)
    if m.interconnect_bytes_per_s:
        t.add_row(f"interconnect {m.interconnect_name}".strip(), format_bytes_per_s(m.interconnect_bytes_per_s, 4),
                  "", m.sources.get("interconnect", ""))
    text = render(t, width=220)
    if m.notes:
        text += "\nnotes:\n" + "\n".join(f"  - {n}" for n in m.notes)
    return text
