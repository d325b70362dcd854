"""Step-by-step derivations: every number a placement and a machine print, with the numbers put in.

A collective's time on a link is the alpha-beta time, α + bytes / BW (latency plus the bytes one
device sends over the busiest link at the link's bandwidth per direction), and is printed that way,
with the link named (Level.LINK inside a node, Level.NETWORK between nodes) and its source cited.

A system's links (`explain_system`) are derived per direction from the vendor's bidirectional total
where that is how the vendor states them (NVLink, Infinity Fabric, ICI: the device's [interconnect]
figure / 2), and shown as stated where the figure is per direction already (a network port rate).
"""

from __future__ import annotations

from collections.abc import Iterable

from roofline import units as u
from roofline.graph import Tensor
from roofline.hardware import Machine
from roofline.hardware.system import Link, System
from roofline.parallel.collectives import Collective, bus_bytes
from roofline.placement import Placement
from roofline.vocab import LINKS, Bound, Level, Unit


class Sources:
    """The sources of one derivation, each printed once: cite() numbers a source the first time it is
    cited and gives "[n]" every time; text() lists them, "[1] NVIDIA H100 ... datasheet, https://...".
    Without a Sources, explain_placement cites each source in full where it is used."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}

    def cite(self, source: str) -> str:
        return f"[{self._numbers.setdefault(source, len(self._numbers) + 1)}]"

    def text(self) -> str:
        if not self._numbers:
            return ""
        return "sources\n" + "\n".join(f"    [{n}] {source}" for source, n in self._numbers.items())


def _cite(source: str, sources: Sources | None) -> str:
    return f"[{source}]" if sources is None else sources.cite(source)


def _tensor_line(verb: str, t: Tensor) -> str:
    dims = "·".join(str(s) for s in t.shape)
    bpe = f"{t.dtype.bytes_per_element:g}"
    scale = ""
    if t.dtype.scale_bits:
        scale = f" ({t.dtype.bits} bits + {t.dtype.scale_bits}-bit scale per {t.dtype.block_size} = " \
                f"{t.dtype.bits_per_element:g} bits)"
    return f"    {verb:5} {t.name:<24} [{dims}] {t.dtype.name}{scale}: {dims}·{bpe} B = {u.format_bytes(t.bytes)}"


def _link_name(p: Placement, level: Level) -> str:
    """'link (NVLink 4 through NVSwitch)': the level and, where the machine names it, the link itself."""
    ml = p.machine.memory.get(level)
    return f"{level} ({ml.technology})" if ml is not None and ml.technology else str(level)


def _link_source(p: Placement, level: Level) -> str:
    ml = p.machine.memory.get(level)
    return p.machine.sources.get(f"memory.{level}") or (ml.source if ml is not None else "") or "catalog"


def _links(p: Placement) -> list[Level]:
    """The links this kernel moves bytes over (a collective's), in Level order."""
    return [lv for lv in LINKS if p.cost.bytes_by_level.get(lv) and lv in p.bandwidth_by_level]


def level_time_line(p: Placement, level: Level) -> str:
    """One level's time with its numbers: 'DRAM bytes / BW = b / bw = t', or over a link (a level with
    a latency) 'link (NVLink ...) α + bytes / BW = 15 µs + 1,572,864 / 4.5e+11 = 15 µs + 3.4953 µs = 18.495 µs'."""
    b = p.cost.bytes_by_level[level]
    bw = p.bandwidth_by_level[level]
    seconds = p.level_times_s[level]
    alpha = p.latency_by_level.get(level, 0.0)
    if alpha or level in LINKS:
        return (f"{_link_name(p, level)} α + bytes / BW = {u.format_time(alpha, 5)} + {b:,.0f} / {bw:.4g} = "
                f"{u.format_time(alpha, 5)} + {u.format_time(b / bw, 5)} = {u.format_time(seconds, 5)}")
    name = "DRAM" if level is Level.DRAM else level
    return f"{name} bytes / BW = {b:.4g} / {bw:.4g} = {u.format_time(seconds)}"


_RESOURCE_WORDS = {"exp": "exponential units", "smem": "shared-memory bytes", "l2": "L2 bytes"}


def explain_placement(p: Placement, sources: Sources | None = None) -> str:
    """The derivation of intensity, ridge, attainable FLOP/s, time floor and bound for one kernel; its
    ceilings cite their sources in full, or as [n] of `sources` (listed once by whoever holds it)."""
    links = _links(p)
    communication = p.bound_class is Bound.COMMUNICATION
    lines: list[str] = [f"{p.name} on {p.machine.name}, {p.dtype.name}"
                        + (f", ×{p.count} per step" if p.count > 1 else "")]
    k = p.kernel
    lines.append("FLOPs")
    if k is not None:
        for op in k.ops:
            units = ", ".join(f"{u}" for u, f in op.flop_by_unit.items() if f)
            what = f"{units} units" if units else "no arithmetic: it only moves bytes"
            lines.append(f"    {op.name}: {op.formula} = {u.format_flop(op.flop)} ({what})")
            if op.note:
                lines.append(f"      NB: {op.note}")
    lines.append(f"    total = {u.format_flop(p.flop)} ({p.flop:.6g} FLOP)")
    lines.append("bytes (each tensor crossing the kernel boundary, once)")
    if k is not None:
        for t in k.reads:
            lines.append(_tensor_line("read", t))
        for t in k.writes:
            lines.append(_tensor_line("write", t))
    lines.append(f"    total = {u.format_bytes(p.bytes)} ({p.bytes:.6g} B)")
    for lv in links:
        b = p.cost.bytes_by_level[lv]
        lines.append(f"    over the {_link_name(p, lv)}: {b:,.0f} B ({u.format_bytes(b)}) sent by each device, and as "
                     "many received (not DRAM bytes)")
    lines.append("intensity")
    lines.append(f"    I = FLOPs / bytes = {p.flop:.6g} / {p.bytes:.6g} = {u.format_intensity(p.flop_per_byte, 5)}")
    for lv in links:
        b = p.cost.bytes_by_level[lv]
        where = (f"where the collective sits under the {lv} roof" if p.flop
                 else "no FLOPs: listed, not drawn on log axes")
        lines.append(f"    on the {lv}: I = FLOPs / {lv} bytes = {p.flop:.6g} / {b:.6g} = "
                     f"{u.format_intensity(p.flop / b, 5)} ({where})")
    lines.append("ceilings")
    for unit, peak in p.peak_by_unit.items():
        if (unit is Unit.MATRIX and p.machine.has_peak(p.dtype)) or p.cost.flop_by_unit.get(unit):
            key = p.dtype.peak_key if unit is Unit.MATRIX else p.machine.vector_peak_key(p.dtype)
            what = f"{key} {unit} peak"
            source = p.machine.sources.get("peak." + unit, "catalog")
            lines.append(f"    {what:<22} = {u.format_flop_per_s(peak, 4)}   {_cite(source, sources)}")
    lines.append(f"    {'DRAM bandwidth':<22} = {u.format_bytes_per_s(p.bytes_per_s, 4)}   "
                 f"{_cite(p.machine.sources.get('memory.dram', 'catalog'), sources)}")
    for lv in links:
        lines.append(f"    {_link_name(p, lv)} = {u.format_bytes_per_s(p.bandwidth_by_level[lv], 4)} per direction "
                     f"({p.bandwidth_by_level[lv]:.6g} B/s), latency α = "
                     f"{u.format_time(p.latency_by_level.get(lv, 0.0), 4)}   {_cite(_link_source(p, lv), sources)}")
    if len([u for u, f in p.cost.flop_by_unit.items() if f]) > 1:
        lines.append(f"    blended peak = FLOPs / compute time = {u.format_flop_per_s(p.peak_flop_per_s, 4)}")
    peak_unit = "matrix" if p.machine.has_peak(p.dtype) else "vector"  # fp32 on a GPU's FP32 cores
    lines.append("ridge point")
    lines.append(f"    I* = peak / BW = {u.format_flop_per_s(p.roof_flop_per_s, 4)} / "
                 f"{u.format_bytes_per_s(p.bytes_per_s, 4)}"
                 f" = {u.format_intensity(p.ridge_flop_per_byte, 4)} (the {p.dtype.peak_key} {peak_unit} roof)")
    if abs(p.kernel_ridge_flop_per_byte - p.ridge_flop_per_byte) > 1e-9 * p.ridge_flop_per_byte:
        lines.append(f"    this kernel's FLOPs run at {u.format_flop_per_s(p.peak_flop_per_s, 4)}, so its own ridge is "
                     f"{u.format_flop_per_s(p.peak_flop_per_s, 4)} / {u.format_bytes_per_s(p.bytes_per_s, 4)} = "
                     f"{u.format_intensity(p.kernel_ridge_flop_per_byte, 4)}")
    lines.append("attainable")
    if communication and isinstance(p.bound, Level) and not p.flop:
        lines.append("    no FLOPs: the collective only moves bytes (0 FLOP/s)")
    elif communication and isinstance(p.bound, Level):
        lv, b = p.bound, p.cost.bytes_by_level[p.bound]
        bw, i_link = p.bandwidth_by_level[lv], p.flop / b
        lines.append(f"    FLOPs / time floor = {p.flop:.6g} / {u.format_time(p.time_s, 5)} = "
                     f"{u.format_flop_per_s(p.attainable_flop_per_s, 4)}")
        lines.append(f"    under the {lv} roof without α: min(peak, BW × I) = "
                     f"min({u.format_flop_per_s(p.peak_flop_per_s, 4)}, {u.format_bytes_per_s(bw, 4)} × "
                     f"{u.format_intensity(i_link, 5)}) = "
                     f"{u.format_flop_per_s(min(p.peak_flop_per_s, bw * i_link), 4)}; the latency α puts it below")
    elif p.bound not in (Unit.MATRIX, Unit.VECTOR, Level.DRAM) and p.flop:
        roof = min(p.peak_flop_per_s, p.bytes_per_s * p.flop_per_byte)
        what = _RESOURCE_WORDS.get(str(p.bound), str(p.bound))
        lines.append(f"    the {what} bind, not a FLOP unit or DRAM: FLOPs / time floor = {p.flop:.6g} / "
                     f"{u.format_time(p.time_s, 5)} = {u.format_flop_per_s(p.attainable_flop_per_s, 4)} = "
                     f"{p.fraction_of_peak:.3%} of the {p.dtype.peak_key} {peak_unit} peak")
        lines.append(f"    (under the two-ceiling roof min(peak, BW × I) = {u.format_flop_per_s(roof, 4)}: the {what} "
                     f"take {roof / p.attainable_flop_per_s - 1:.1%} more time than that roof allows)")
    else:
        lines.append(f"    min(peak, BW × I) = min({u.format_flop_per_s(p.peak_flop_per_s, 4)}, "
                     f"{u.format_bytes_per_s(p.bytes_per_s, 4)} × {u.format_intensity(p.flop_per_byte, 5)}) "
                     f"= {u.format_flop_per_s(p.attainable_flop_per_s, 4)}"
                     f" = {p.fraction_of_peak:.3%} of the {p.dtype.peak_key} {peak_unit} peak")
    if p.fraction_of_peak > 1:
        lines.append("    (above 100%: the vector units' FLOPs run alongside the matrix units', and the headline peak "
                     "counts only the matrix units)")
    lines.append("time floor")
    terms = []
    for unit, seconds in p.unit_times_s.items():
        work = seconds * p.peak_by_unit[unit]  # the unit's FLOPs (or, for exponential units, operations)
        what = "FLOPs" if unit in (Unit.MATRIX, Unit.VECTOR) else "ops"
        terms.append(f"{unit} {what} / peak = {work:.4g} / {p.peak_by_unit[unit]:.4g} = {u.format_time(seconds)}")
    for level in p.level_times_s:
        terms.append(level_time_line(p, level))
    for term in terms:
        lines.append(f"    {term}")
    vector_flop = p.cost.flop_by_unit.get(Unit.VECTOR, 0.0)
    if vector_flop and p.compute_time_s < p.memory_time_s and p.machine.has_peak(p.dtype):  # a matrix peak to cite
        at_matrix = vector_flop / p.peak_by_unit[Unit.MATRIX]
        what = f"the {p.bound}" if communication else "memory"
        lines.append(f"    (counted at the {p.dtype.peak_key} matrix peak, as a one-roof model does, the FLOPs would "
                     f"take {u.format_time(at_matrix)}; either way {what} sets the floor)")
    lines.append(f"    floor = the largest = {u.format_time(p.time_s)}, set by {p.bound}")
    if p.count > 1:
        lines.append(f"    × {p.count} per step = {u.format_time(p.total_time_s)}")
    lines.append("bound")
    if communication:
        others = [f"compute {u.format_time(p.compute_time_s)}"] + [
            f"{'DRAM' if lv is Level.DRAM else lv} {u.format_time(t)}" for lv, t in p.level_times_s.items()
            if lv != p.bound]
        lines.append(f"    the {p.bound} time {u.format_time(p.time_s)} is the largest ({', '.join(others)})"
                     f" → {p.bound_class}-bound (limited by {p.bound})")
    else:
        cmp = ">" if p.bound_class is Bound.COMPUTE else "≤"
        lines.append(f"    I = {u.format_intensity(p.flop_per_byte, 5)} {cmp} "
                     f"{u.format_intensity(p.kernel_ridge_flop_per_byte, 4)}"
                     f" → {p.bound_class}-bound (limited by {p.bound})")
    if len(p.resource_times_s) > 2 or p.chip_notes:  # inside the chip: every unit and level, with headroom
        from roofline.explain.chip import explain_resources

        lines.append(explain_resources(p))
    if p.measured_time_s is not None:
        lines.append("measured")
        lines.append(f"    time = {u.format_time(p.measured_time_s)}; achieved = FLOPs / time = "
                     f"{u.format_flop_per_s(p.achieved_flop_per_s or 0.0)}")
        lines.append(f"    % of roof = floor / measured = {u.format_time(p.time_s)} / "
                     f"{u.format_time(p.measured_time_s)} = {p.fraction_of_roof or 0.0:.1%}"
                     + ("  ABOVE THE ROOF: model or measurement is wrong" if p.above_roof else ""))
    return "\n".join(lines)


def explain_machine(m: Machine) -> str:
    """Each ridge point I* = peak / BW, with both ceilings and their sources."""
    bw = m.memory_bytes_per_s
    lines = [f"{m.name} ({m.id})" + (" — measured" if m.measured else ""),
             f"DRAM bandwidth BW = {u.format_bytes_per_s(bw, 4)} = {bw:.6g} B/s   [{m.sources.get('memory.dram', '')}]",
             f"dense matrix peaks   [{m.sources.get('peak.matrix', '')}]"]
    for key in m.dtypes():
        peak = m.matrix_flop_per_s[key]
        lines.append(f"    {key:<5} I* = peak / BW = {peak:.6g} / {bw:.6g} = {peak / bw:.2f} FLOP/B"
                     f"   ({u.format_flop_per_s(peak, 4)} / {u.format_bytes_per_s(bw, 4)})")
    if m.vector_flop_per_s:
        lines.append(f"vector peaks (elementwise work)   [{m.sources.get('peak.vector', '')}]")
        for key, peak in m.vector_flop_per_s.items():
            lines.append(f"    {key:<5} I* = {peak:.6g} / {bw:.6g} = {peak / bw:.2f} FLOP/B")
    if m.sparse_flop_per_s:
        lines.append("sparse (2:4) peaks, listed for reference and never used by the analyses: "
                     + ", ".join(f"{k} {u.format_flop_per_s(v, 4)}" for k, v in m.sparse_flop_per_s.items()))
    lines.append("left of I* a kernel is memory-bound (only bandwidth helps); right of it, compute-bound")
    if m.interconnect_bytes_per_s:
        ic = m.interconnect_bytes_per_s
        lines.append(f"device-to-device link {m.interconnect_name or ''}".rstrip() + "   "
                     f"[{m.sources.get('interconnect', '')}]")
        lines.append(f"    {u.format_bytes_per_s(ic, 4)} as the vendor states it, both directions together; "
                     f"per direction {u.format_bytes_per_s(ic, 4)} / 2 = {u.format_bytes_per_s(ic / 2, 4)} "
                     "(what a collective's alpha-beta time divides by)")
    return "\n".join(lines)


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-3 * max(abs(a), abs(b))


def _explain_link(s: System, which: str, link: Link) -> list[str]:
    lines = [f"{which} link: {link.name or which} (topology {link.topology})" + (" — measured" if link.measured else "")
             + f"   [{link.source or 'no source given'}]"]
    bw = link.bytes_per_s
    ic = s.device.interconnect_bytes_per_s
    if link.measured:
        lines.append(f"    {u.format_bytes_per_s(bw, 4)} per device, per direction: fitted by `roofline measure "
                     "--collectives` (busbw, as nccl-tests defines it)")
    elif which == "node" and ic and _same(ic / 2, bw):
        named = f", {s.device.interconnect_name}" if s.device.interconnect_name else ""
        lines.append(f"    the vendor states {u.format_bytes_per_s(ic, 4)} per device, both directions together "
                     f"(the device's [interconnect]{named})   [{s.device.sources.get('interconnect', s.device.id)}]")
        lines.append(f"    per direction = {u.format_bytes_per_s(ic, 4)} / 2 = {u.format_bytes_per_s(ic / 2, 4)} "
                     f"({ic:.6g} / 2 = {bw:.6g} B/s)")
    elif which == "node" and ic:
        lines.append(f"    {u.format_bytes_per_s(bw, 4)} per device, per direction, as this system states it; the "
                     f"device's [interconnect] gives {u.format_bytes_per_s(ic, 4)} both directions together "
                     f"(/ 2 = {u.format_bytes_per_s(ic / 2, 4)} each way), which this system's link does not reach")
    else:
        lines.append(f"    {u.format_bytes_per_s(bw, 4)} per device, per direction, as stated"
                     + (" (a network port rate is per direction already)" if which == "network" else ""))
    if link.note:
        lines.append(f"    note: {link.note}")
    lines.append(f"    latency α = {u.format_time(link.latency_s, 4)} ({link.latency_s:.6g} s)")
    return lines


def explain_system(s: System) -> str:
    """A system's size and each link's figure per direction, derived from the vendor's bidirectional
    total where that is how it was stated, with α and an all-reduce over the node worked through."""
    size = (f"{s.devices_per_node} × {s.device.name} ({s.device.id}) per node"
            + (f", up to {s.max_nodes:,} nodes = {s.max_devices:,} devices" if s.max_nodes > 1 else ", one node"))
    lines = [f"{s.name} ({s.id})", f"    {size}" + (f"   [{s.sources['system']}]" if s.sources.get("system") else "")]
    for note in s.notes:
        if not note.startswith(("link.node:", "link.network:")):
            lines.append(f"    note: {note}")
    lines += _explain_link(s, "node", s.node_link)
    if s.network_link is not None:
        lines += _explain_link(s, "network", s.network_link)
    else:
        lines.append("network link: none (collectives stay inside one node)")
    n = s.devices_per_node
    lines.append("a collective: t = α + bytes on the busiest link / BW (per direction), with nccl-tests' factors: "
                 "all-reduce 2(n−1)/n · S, all-gather and reduce-scatter (n−1)/n · S, all-to-all (n−1)/n · S, "
                 "send/recv S")
    if n > 1:
        size_b = 1 << 20
        moved = bus_bytes(Collective.ALL_REDUCE, size_b, n)
        link = s.node_link
        t = link.latency_s + moved / link.bytes_per_s
        lines.append(f"    e.g. an all-reduce of S = {size_b:,} B over the node's {n} devices: "
                     f"2·{n - 1}/{n} · {size_b:,} = {moved:,.0f} B; {u.format_time(link.latency_s, 5)} + "
                     f"{moved:,.0f} / {link.bytes_per_s:.4g} = {u.format_time(t, 5)}")
    return "\n".join(lines)


def explain_placements(placements: Iterable[Placement]) -> str:
    """Several kernels' derivations, then their sources, each listed once and cited as [n]."""
    sources = Sources()
    body = "\n\n".join(explain_placement(p, sources) for p in placements)
    listed = sources.text()
    return body + ("\n\n" + listed if listed else "")


__all__ = ["Sources", "explain_machine", "explain_placement", "explain_placements", "explain_system",
           "level_time_line"]
