"""Step-by-step derivations: every number a placement and a machine print, with the numbers put in.

Layering: imports roofline.placement, roofline.graph, roofline.hardware, roofline.units and
roofline.vocab only.
"""

from __future__ import annotations

from roofline.graph import Tensor
from roofline.hardware import Machine
from roofline.placement import Placement
from roofline.units import (
    format_bytes,
    format_bytes_per_s,
    format_flop,
    format_flop_per_s,
    format_intensity,
    format_time,
)
from roofline.vocab import Bound, Level, Unit


def _tensor_line(verb: str, t: Tensor) -> str:
    dims = "·".join(str(s) for s in t.shape)
    bpe = f"{t.dtype.bytes_per_element:g}"
    scale = ""
    if t.dtype.scale_bits:
        scale = f" ({t.dtype.bits} bits + {t.dtype.scale_bits}-bit scale per {t.dtype.block_size} = " \
                f"{t.dtype.bits_per_element:g} bits)"
    return f"    {verb:5} {t.name:<24} [{dims}] {t.dtype.name}{scale}: {dims}·{bpe} B = {format_bytes(t.bytes)}"


def explain_placement(p: Placement) -> str:
    """The derivation of intensity, ridge, attainable FLOP/s, time floor and bound for one kernel."""
    lines: list[str] = [f"{p.name} on {p.machine.name}, {p.dtype.name}"
                        + (f", ×{p.count} per step" if p.count > 1 else "")]
    k = p.kernel
    lines.append("FLOPs")
    if k is not None:
        for op in k.ops:
            unit = ", ".join(f"{u}" for u in op.flop_by_unit)
            lines.append(f"    {op.name}: {op.formula} = {format_flop(op.flop)} ({unit} units)")
            if op.note:
                lines.append(f"      NB: {op.note}")
    lines.append(f"    total = {format_flop(p.flop)} ({p.flop:.6g} FLOP)")
    lines.append("bytes (each tensor crossing the kernel boundary, once)")
    if k is not None:
        for t in k.reads:
            lines.append(_tensor_line("read", t))
        for t in k.writes:
            lines.append(_tensor_line("write", t))
    lines.append(f"    total = {format_bytes(p.bytes)} ({p.bytes:.6g} B)")
    lines.append("intensity")
    lines.append(f"    I = FLOPs / bytes = {p.flop:.6g} / {p.bytes:.6g} = {format_intensity(p.flop_per_byte, 5)}")
    lines.append("ceilings")
    for unit, peak in p.peak_by_unit.items():
        if unit is Unit.MATRIX or p.cost.flop_by_unit.get(unit):
            key = p.dtype.peak_key if unit is Unit.MATRIX else p.machine.vector_peak_key(p.dtype)
            what = f"{key} {unit} peak"
            source = p.machine.sources.get("peak." + unit, "catalog")
            lines.append(f"    {what:<22} = {format_flop_per_s(peak, 4)}   [{source}]")
    lines.append(f"    {'DRAM bandwidth':<22} = {format_bytes_per_s(p.bytes_per_s, 4)}   "
                 f"[{p.machine.sources.get('memory.dram', 'catalog')}]")
    if len([u for u, f in p.cost.flop_by_unit.items() if f]) > 1:
        lines.append(f"    blended peak = FLOPs / compute time = {format_flop_per_s(p.peak_flop_per_s, 4)}")
    lines.append("ridge point")
    lines.append(f"    I* = peak / BW = {format_flop_per_s(p.roof_flop_per_s, 4)} / "
                 f"{format_bytes_per_s(p.bytes_per_s, 4)}"
                 f" = {format_intensity(p.ridge_flop_per_byte, 4)} (the {p.dtype.peak_key} matrix roof)")
    if abs(p.kernel_ridge_flop_per_byte - p.ridge_flop_per_byte) > 1e-9 * p.ridge_flop_per_byte:
        lines.append(f"    this kernel's FLOPs run at {format_flop_per_s(p.peak_flop_per_s, 4)}, so its own ridge is "
                     f"{format_flop_per_s(p.peak_flop_per_s, 4)} / {format_bytes_per_s(p.bytes_per_s, 4)} = "
                     f"{format_intensity(p.kernel_ridge_flop_per_byte, 4)}")
    lines.append("attainable")
    lines.append(f"    min(peak, BW × I) = min({format_flop_per_s(p.peak_flop_per_s, 4)}, "
                 f"{format_bytes_per_s(p.bytes_per_s, 4)} × {format_intensity(p.flop_per_byte, 5)}) "
                 f"= {format_flop_per_s(p.attainable_flop_per_s, 4)}"
                 f" = {p.fraction_of_peak:.3%} of the {p.dtype.peak_key} matrix peak")
    if p.fraction_of_peak > 1:
        lines.append("    (above 100%: the vector units' FLOPs run alongside the matrix units', and the headline peak "
                     "counts only the matrix units)")
    lines.append("time floor")
    terms = []
    for unit, seconds in p.unit_times_s.items():
        terms.append(f"{unit} FLOPs / peak = {p.cost.flop_by_unit[unit]:.4g} / {p.peak_by_unit[unit]:.4g} = "
                     f"{format_time(seconds)}")
    for level, seconds in p.level_times_s.items():
        name = "DRAM" if level is Level.DRAM else level
        terms.append(f"{name} bytes / BW = {p.cost.bytes_by_level[level]:.4g} / {p.bandwidth_by_level[level]:.4g} = "
                     f"{format_time(seconds)}")
    for term in terms:
        lines.append(f"    {term}")
    vector_flop = p.cost.flop_by_unit.get(Unit.VECTOR, 0.0)
    if vector_flop and p.compute_time_s < p.memory_time_s:
        at_matrix = vector_flop / p.peak_by_unit[Unit.MATRIX]
        lines.append(f"    (counted at the {p.dtype.peak_key} matrix peak, as a one-roof model does, the FLOPs would "
                     f"take {format_time(at_matrix)}; either way memory sets the floor)")
    lines.append(f"    floor = the largest = {format_time(p.time_s)}, set by {p.bound}")
    if p.count > 1:
        lines.append(f"    × {p.count} per step = {format_time(p.total_time_s)}")
    lines.append("bound")
    cmp = ">" if p.bound_class is Bound.COMPUTE else "≤"
    lines.append(f"    I = {format_intensity(p.flop_per_byte, 5)} {cmp} "
                 f"{format_intensity(p.kernel_ridge_flop_per_byte, 4)}"
                 f" → {p.bound_class}-bound (limited by {p.bound})")
    if p.measured_time_s is not None:
        lines.append("measured")
        lines.append(f"    time = {format_time(p.measured_time_s)}; achieved = FLOPs / time = "
                     f"{format_flop_per_s(p.achieved_flop_per_s or 0.0)}")
        lines.append(f"    % of roof = floor / measured = {format_time(p.time_s)} / {format_time(p.measured_time_s)}"
                     f" = {p.fraction_of_roof or 0.0:.1%}" + ("  ABOVE THE ROOF: model or measurement is wrong"
                                                            if p.above_roof else ""))
    return "\n".join(lines)


def explain_machine(m: Machine) -> str:
    """Each ridge point I* = peak / BW, with both ceilings and their sources."""
    bw = m.memory_bytes_per_s
    lines = [f"{m.name} ({m.id})" + (" — measured" if m.measured else ""),
             f"DRAM bandwidth BW = {format_bytes_per_s(bw, 4)} = {bw:.6g} B/s   [{m.sources.get('memory.dram', '')}]",
             f"dense matrix peaks   [{m.sources.get('peak.matrix', '')}]"]
    for key in m.dtypes():
        peak = m.matrix_flop_per_s[key]
        lines.append(f"    {key:<5} I* = peak / BW = {peak:.6g} / {bw:.6g} = {peak / bw:.2f} FLOP/B"
                     f"   ({format_flop_per_s(peak, 4)} / {format_bytes_per_s(bw, 4)})")
    if m.vector_flop_per_s:
        lines.append(f"vector peaks (elementwise work)   [{m.sources.get('peak.vector', '')}]")
        for key, peak in m.vector_flop_per_s.items():
            lines.append(f"    {key:<5} I* = {peak:.6g} / {bw:.6g} = {peak / bw:.2f} FLOP/B")
    if m.sparse_flop_per_s:
        lines.append("sparse (2:4) peaks, listed for reference and never used by the analyses: "
                     + ", ".join(f"{k} {format_flop_per_s(v, 4)}" for k, v in m.sparse_flop_per_s.items()))
    lines.append("left of I* a kernel is memory-bound (only bandwidth helps); right of it, compute-bound")
    return "\n".join(lines)


__all__ = ["explain_machine", "explain_placement"]
