"""Static roofline charts: matplotlib on the Agg canvas, rendered to PNG or SVG bytes in memory.

Charts are built on a bare `matplotlib.figure.Figure` with an Agg canvas, never through pyplot,
whose registry of open figures is global mutable state. Rendering happens into a buffer first, so a
failure never leaves a half-written file (outputs.py writes the bytes with `atomic_write`).

What a roofline chart shows:
    x = arithmetic intensity I = FLOPs / bytes (FLOP/byte), log scale
    y = attainable FLOP/s = FLOPs / time floor = min(peak, BW × I) for a pure matmul, log scale
    roof: y = min(peak, BW × x), a slope of BW meeting a flat roof at the ridge I* = peak / BW
Each kernel is one point at (I, attainable), coloured by its bound, sized by its share of the step's
time floor (`marker_size`), numbered in execution order; the key beside the plot names the numbers,
and the legend lists only the bound classes some kernel has. The title names the machine once. When
some kernels are collectives (bytes on a link between devices), each link they cross adds its roof:
a dashed slope of the link's bandwidth per direction meeting the same compute roof, and each
collective sits under it at I = FLOPs per byte on the link. A measured kernel adds a second marker
at (I, FLOPs / measured time), joined to its predicted point; one above the roof is drawn as a red
cross and called out in red, because it means the model or the measurement is wrong.

Artists carry gids ("roof", "ridge", "kernel-3", "measured-3", "above-roof-3", ...) so that tests
and the SVG can find them.

Here: the figure plumbing (canvas, bytes, log axes), the roofs, the roofline chart with its key and
the roofs comparison. Label placement is in labels.py, the sweep chart in sweep.py.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.hardware import Machine, get_machine
from roofline.placement import Placement
from roofline.report.charts.labels import literal_text, number_ranges, place_labels, shorten, text_box
from roofline.report.points import (
    ABOVE_ROOF_COLOUR,
    BOUND_COLOURS,
    ROOF_COLOUR,
    ROOF_CYCLE,
    LinkRoof,
    intensity,
    link_level,
    link_roofs,
    measured_xy,
    on_chart,
    point_xy,
    secondary_ceilings,
)
from roofline.units import format_bytes_per_s, format_flop_per_s, format_intensity, format_si, format_time
from roofline.vocab import Bound, Level

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox

DPI = 110


# --- figures and bytes ----------------------------------------------------------------------------

def new_figure(width_in: float, height_in: float) -> Figure:
    """A Figure on its own Agg canvas: no pyplot, no global figure list."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


@literal_text
def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """Render to PNG or SVG in memory. SVG keeps text as text (searchable, parseable) and carries no
    date, so the same chart gives the same bytes."""
    import matplotlib

    if fmt not in ("png", "svg"):
        raise RooflineError(f"unknown chart format {fmt!r}; use png or svg")
    buf = io.BytesIO()
    metadata: dict[str, Any] = {"Date": None} if fmt == "svg" else {"Software": "roofline"}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "roofline"}):
        fig.savefig(buf, format=fmt, dpi=DPI, metadata=metadata, facecolor="white")
    return buf.getvalue()


# --- axes ---------------------------------------------------------------------------------------

def _si(value: float, unit: str = "") -> str:
    """Tick label with a decimal prefix: 1e12 -> '1 T', 3e-1 -> '0.3'."""
    return format_si(value, unit) if value > 0 else ""


def log_axes(ax: Axes, xlabel: str, ylabel: str, y_unit: str = "", x_unit: str = "") -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.yaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _si(v, x_unit)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _si(v, y_unit)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", color="0.88", lw=0.6)
    ax.set_axisbelow(True)


def decade_floor(v: float) -> float:
    return 10.0 ** math.floor(math.log10(v))


def decade_ceil(v: float) -> float:
    return 10.0 ** math.ceil(math.log10(v))


# --- roofs --------------------------------------------------------------------------------------

@frozen
class Roof:
    """One machine at one precision: attainable = min(peak, BW × I)."""

    label: str
    peak_flop_per_s: float
    bytes_per_s: float

    @property
    def ridge_flop_per_byte(self) -> float:
        """I* = peak / BW."""
        return self.peak_flop_per_s / self.bytes_per_s

    def attainable(self, flop_per_byte: float) -> float:
        return min(self.peak_flop_per_s, self.bytes_per_s * flop_per_byte)


def roof_of(machine: Machine | str, dtype: str | DType | None = None) -> Roof:
    """The matrix roof of `machine` at `dtype` (default: its default dtype) over its DRAM bandwidth."""
    m = get_machine(machine)
    dt = get_dtype(dtype or m.default_dtype())
    return Roof(f"{m.name} {dt.peak_key}", m.peak_flop_per_s(dt), m.memory_bytes_per_s)


def _draw_roof(ax: Axes, roof: Roof, x_lo: float, x_hi: float, colour: str, gid: str, lw: float = 2.0,
               ls: str = "-", label: str | None = None) -> None:
    """The slope from x_lo up to the ridge, then the flat roof to x_hi; the ridge as a marker and a
    dotted drop line to the bottom of the axes."""
    ridge = roof.ridge_flop_per_byte
    xs = [x_lo, ridge, x_hi] if x_lo < ridge < x_hi else [x_lo, x_hi]
    ax.plot(xs, [roof.attainable(x) for x in xs], color=colour, lw=lw, ls=ls, gid=gid, label=label,
            solid_capstyle="round", zorder=2)
    ax.plot([ridge], [roof.peak_flop_per_s], marker="o", ms=7, mfc="white", mec=colour, mew=1.8,
            ls="none", gid=f"ridge{gid.removeprefix('roof')}", zorder=4)
    ax.plot([ridge, ridge], [ax.get_ylim()[0], roof.peak_flop_per_s], color=colour, lw=0.9, ls=":",
            gid=f"ridge-line{gid.removeprefix('roof')}", zorder=1)


def _slope_angle(ax: Axes, x0: float, y0: float, x1: float, y1: float) -> float:
    """The on-screen angle (degrees) of the segment from (x0, y0) to (x1, y1): on log axes the
    memory slope's angle depends on the axes' aspect, so it is measured, not assumed to be 45°."""
    (px0, py0), (px1, py1) = ax.transData.transform([(x0, y0), (x1, y1)])
    return math.degrees(math.atan2(py1 - py0, px1 - px0))


# --- the roofline chart of one analysis -------------------------------------------------------------

@literal_text
def roofline_figure(placements: Sequence[Placement], *, machine: Machine | None = None, dtype: DType | None = None,
                    title: str = "", names: Sequence[str] | None = None, subtitle: str | None = None,
                    shares: bool = True, plan: str = "") -> Figure:
    """Every kernel of `placements` (execution order) on the roofline of `machine` at `dtype`.

    The main roof is the machine's matrix peak at `dtype` over DRAM bandwidth. If some kernels run
    their matmuls at another precision (an fp8 matmul in a bf16 model), that roof is drawn dashed
    too; if some kernels do vector work, the vector ceiling is drawn dashed grey. `subtitle` replaces
    the totals line and `shares=False` drops the share-of-step column, for charts that put several
    alternatives (naive and fused attention) side by side, whose times do not add up."""
    if not placements:
        raise RooflineError("nothing to draw: the analysis has no kernels")
    m = machine or placements[0].machine
    dt = dtype or placements[0].dtype
    labels = list(names) if names is not None else [p.name for p in placements]
    if len(labels) != len(placements):
        raise RooflineError(f"{len(labels)} names for {len(placements)} kernels")
    main = roof_of(m, dt)
    ceilings = secondary_ceilings(placements, dt.peak_key, main.peak_flop_per_s)
    extra = {label: Roof(f"{m.name} {label}", peak, main.bytes_per_s) for kind, label, peak in ceilings
             if kind == "matrix"}
    vector_peak = next((peak for kind, _, peak in ceilings if kind == "vector"), None)
    links = link_roofs(placements)

    drawn = [(i, p) for i, p in enumerate(placements) if on_chart(p)]
    xs = [point_xy(p)[0] for _, p in drawn]
    ys = [point_xy(p)[1] for _, p in drawn]
    for _, p in drawn:
        mxy = measured_xy(p)
        if mxy is not None:
            ys.append(mxy[1])
    ridges = [main.ridge_flop_per_byte, *(r.ridge_flop_per_byte for r in extra.values())]
    x_lo = decade_floor(min([*xs, *ridges]) / 3)
    # room right of the ridge for its label
    x_hi = decade_ceil(max(max(xs, default=1.0) * 3, max(ridges) * 12))
    if links:  # each link's slope reaches the compute roof inside the axes
        x_hi = max(x_hi, decade_ceil(max(lk.ridge(main.peak_flop_per_s) for lk in links) * 3))
    peaks = [main.peak_flop_per_s, *(r.peak_flop_per_s for r in extra.values())]
    y_lo = decade_floor(min([*ys, main.attainable(x_lo)]) / 2)
    y_hi = max(peaks) * 6

    n_rows = len(placements) + sum(1 for p in placements if _key_note(p))
    key_font = 8.0 if n_rows <= 40 else 6.5
    row_in = key_font * 1.55 / 72
    height = max(6.0, 1.9 + row_in * (n_rows + 4))
    fig = new_figure(13.0, height)
    # fixed layout (no tight_layout): the slope label's angle is measured in this geometry
    above_any = any(p.above_roof for p in placements)
    top_in = 1.2 if above_any else 0.95
    plot_h = min(5.2, height - top_in - 0.7)
    ax = fig.add_axes((0.75 / 13, (height - top_in - plot_h) / height, 7.4 / 13, plot_h / height), gid="roofline")
    key = fig.add_axes((8.55 / 13, 0.3 / height, 4.35 / 13, (height - 1.2) / height), gid="key")
    key.set_axis_off()
    log_axes(ax, "arithmetic intensity I (FLOP/byte)", "attainable performance (FLOP/s)", y_unit="")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)

    _draw_roof(ax, main, x_lo, x_hi, ROOF_COLOUR, "roof")
    obstacles = []
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for j, (key_name, r) in enumerate(sorted(extra.items())):
        colour = ROOF_CYCLE[j % len(ROOF_CYCLE)]
        _draw_roof(ax, r, x_lo, x_hi, colour, f"roof-{key_name.split()[0]}", lw=1.4, ls="--")
        t = ax.text(x_hi / 1.15, r.peak_flop_per_s * 1.12, f"{key_name} {format_flop_per_s(r.peak_flop_per_s)}",
                    ha="right", va="bottom", fontsize=8, color=colour, gid=f"roof-label-{key_name.split()[0]}")
        obstacles.append(t.get_window_extent(renderer))
    if vector_peak is not None and vector_peak < main.peak_flop_per_s:
        v_ridge = vector_peak / main.bytes_per_s
        ax.plot([v_ridge, x_hi], [vector_peak, vector_peak], color="0.55", lw=1.1, ls="--", gid="vector-roof", zorder=1)
        t = ax.text(x_hi / 1.15, vector_peak / 1.12, f"vector peak {format_flop_per_s(vector_peak)}",
                    ha="right", va="top", fontsize=8, color="0.4", gid="vector-roof-label")
        obstacles.append(t.get_window_extent(renderer))

    # roof labels: the values they stand for, in the chart
    ridge = main.ridge_flop_per_byte
    t_roof = ax.text(x_hi / 1.15, main.peak_flop_per_s * 1.12,
                     f"compute roof: {dt.peak_key} peak {format_flop_per_s(main.peak_flop_per_s)}",
                     ha="right", va="bottom", fontsize=9, fontweight="bold", gid="roof-label")
    x_mid = math.sqrt(x_lo * ridge) if ridge > x_lo else x_lo * 1.5
    angle = _slope_angle(ax, x_lo, main.attainable(x_lo), ridge, main.peak_flop_per_s)
    t_slope = ax.text(x_mid, main.attainable(x_mid) * 1.35,
                      f"memory slope: DRAM {format_bytes_per_s(main.bytes_per_s)} × I",
                      rotation=angle, rotation_mode="anchor", ha="center", va="bottom", fontsize=9,
                      fontweight="bold", gid="slope-label")
    t_ridge = ax.text(ridge * 1.12, main.peak_flop_per_s / 1.25,
                      f"ridge I* = {format_intensity(ridge)}\n(peak / BW)", ha="left", va="top", fontsize=8.5,
                      gid="ridge-label")
    obstacles += [text_box(fig, t) for t in (t_roof, t_slope, t_ridge)]
    for lk in links:
        xs_on = [point_xy(p)[0] for _, p in drawn if link_level(p) is lk.level]
        obstacles += _draw_link_roof(fig, ax, lk, main.peak_flop_per_s, x_lo, max(xs_on, default=x_lo))

    # kernels: one point each, coloured by bound; with shares, its size grows with its share of the step
    total_s = sum(p.total_time_s for p in placements)
    anchors: list[tuple[float, float]] = []
    anchor_ids: list[list[int]] = []
    anchor_colour: list[str] = []
    above: list[int] = []
    for i, p in drawn:
        n = i + 1
        x, y = point_xy(p)
        colour = BOUND_COLOURS[p.bound_class]
        ms = marker_size(p.total_time_s / total_s) if shares and total_s > 0 else 7.5
        point = ax.plot([x], [y], marker="o", ms=ms, mfc=colour, mec="white", mew=0.8, ls="none",
                        gid=f"kernel-{n}", zorder=5.5 - ms / 40)[0]  # larger under smaller: coincident stay seen
        if ms > 7.5:  # a large point is an obstacle for the numbers, beyond the marker place_labels assumes
            obstacles.append(point.get_window_extent(renderer))
        mxy = measured_xy(p)
        if mxy is not None:
            if p.above_roof:
                above.append(n)
                ax.plot([mxy[0]], [mxy[1]], marker="X", ms=11, mfc=ABOVE_ROOF_COLOUR, mec="white", mew=0.8,
                        ls="none", gid=f"above-roof-{n}", zorder=7)
                ax.plot([x, x], [y, mxy[1]], color=ABOVE_ROOF_COLOUR, lw=1.2, ls="--", zorder=3,
                        gid=f"measured-link-{n}")
            else:
                ax.plot([mxy[0]], [mxy[1]], marker="D", ms=6.5, mfc="white", mec=colour, mew=1.6, ls="none",
                        gid=f"measured-{n}", zorder=5)
                ax.plot([x, x], [y, mxy[1]], color=colour, lw=0.9, ls="--", zorder=3, gid=f"measured-link-{n}")
        # coincident points (same pixel) share one label: "3,5,7"
        px, py = ax.transData.transform((x, y))
        for j, (ax_, ay_) in enumerate(anchors):
            qx, qy = ax.transData.transform((ax_, ay_))
            if abs(qx - px) < 2.5 and abs(qy - py) < 2.5:
                anchor_ids[j].append(n)
                break
        else:
            anchors.append((x, y))
            anchor_ids.append([n])
            anchor_colour.append(colour)
    # the markers of measured points are obstacles too
    for line in ax.get_lines():
        gid = line.get_gid() or ""
        if gid.startswith(("measured-", "above-roof-")) and not gid.startswith("measured-link"):
            obstacles.append(line.get_window_extent(renderer))
    place_labels(fig, ax, anchors, [number_ranges(ids) for ids in anchor_ids], anchor_colour, obstacles)

    # legend of colours and markers
    from matplotlib.lines import Line2D

    present = {p.bound_class for _, p in drawn}  # only the classes some drawn kernel has
    handles = [Line2D([], [], marker="o", ls="none", mfc=BOUND_COLOURS[b], mec="white", ms=8,
                      label=f"{b}-bound kernel") for b in (Bound.MEMORY, Bound.COMPUTE) if b in present]
    if links:
        handles.append(Line2D([], [], marker="o", ls="none", mfc=BOUND_COLOURS[Bound.COMMUNICATION], mec="white",
                              ms=8, label="collective (I = FLOPs / byte on the link)"))
    if any(measured_xy(p) is not None for _, p in drawn):
        handles.append(Line2D([], [], marker="D", ls="none", mfc="white", mec="0.3", ms=7, label="measured"))
    if above:
        handles.append(Line2D([], [], marker="X", ls="none", mfc=ABOVE_ROOF_COLOUR, mec="white", ms=10,
                              label="measured ABOVE the roof"))
    ax.legend(handles=handles, loc="lower right", fontsize=8, framealpha=0.95)

    total = sum(p.total_time_s for p in placements)
    mem = sum(p.total_time_s for p in placements if p.bound_class == "memory")
    comm = sum(p.total_time_s for p in placements if p.bound_class == Bound.COMMUNICATION)
    head = title or f"{m.name}, {dt.name}"
    fig.text(0.7 / 13, 1 - 0.25 / height, head, fontsize=12.5, fontweight="bold", va="top", gid="title")
    said = [w for w in (m.name, dt.name) if w not in head]  # what the title already names, once
    sub = _without_machine(subtitle, m.name, head) if subtitle is not None else (
        "".join(f"{w} · " for w in said) + f"{f'plan {plan} · ' if plan else ''}{len(placements)} kernels · "
        f"time floor {format_time(total)}, "
        f"{(mem / total if total else 0):.0%} of it memory-bound"
        + (f", {comm / total:.0%} communication" if links and total else ""))
    fig.text(0.7 / 13, 1 - 0.55 / height, sub, fontsize=9, color="0.3", va="top", gid="subtitle")
    if above:
        which = "kernel" if len(above) == 1 else "kernels"
        fig.text(0.7 / 13, 1 - 0.8 / height,
                 f"! {which} {', '.join(map(str, above))} measured ABOVE the roof: "
                 "the model or the measurement is wrong",
                 fontsize=9.5, color=ABOVE_ROOF_COLOUR, fontweight="bold", va="top", gid="above-roof-warning")

    _draw_key(key, placements, labels, key_font, total if shares else 0.0, links=bool(links),
              classes=[b for b in (Bound.MEMORY, Bound.COMPUTE) if b in present])
    return fig


def marker_size(share: float) -> float:
    """A kernel's marker diameter (points) for its share of the step time: 5 pt + 13 pt × √share, so
    that the area beyond a visible floor grows with the share: 5 pt at 0, 18 pt for the whole step."""
    return 5.0 + 13.0 * math.sqrt(min(max(share, 0.0), 1.0))


def _without_machine(subtitle: str, machine: str, head: str) -> str:
    """A given subtitle less its leading machine name when the title already names the machine."""
    lead = f"{machine} · "
    return subtitle[len(lead):] if machine in head and subtitle.startswith(lead) else subtitle


def _draw_link_roof(fig: Figure, ax: Axes, lk: LinkRoof, peak: float, x_lo: float, x_points: float) -> list[Bbox]:
    """A link's roof: the dashed slope BW_link × I from the left edge up to the compute roof, its
    ridge marked, and its label along the slope, below it (the DRAM slope runs above), right of the
    collectives under it (`x_points`, the largest of their intensities). Returns the label's box, an
    obstacle for the kernel numbers."""
    colour = BOUND_COLOURS[Bound.COMMUNICATION]
    ridge = lk.ridge(peak)
    ax.plot([x_lo, ridge], [lk.bytes_per_s * x_lo, peak], color=colour, lw=1.6,
            ls="--" if lk.level is Level.LINK else "-.", gid=f"link-roof-{lk.level}", zorder=2)
    ax.plot([ridge], [peak], marker="o", ms=5.5, mfc="white", mec=colour, mew=1.5, ls="none",
            gid=f"link-ridge-{lk.level}", zorder=4)
    y_lo = ax.get_ylim()[0]
    x_start = max(x_lo, y_lo * 1.5 / lk.bytes_per_s)  # where the slope enters the axes
    clear = x_points * 4  # right of the collectives, if that leaves the label a decade and a half of slope
    x_mid = math.sqrt((clear if ridge / clear > 30 else x_start) * ridge)
    angle = _slope_angle(ax, x_start, lk.bytes_per_s * x_start, ridge, peak)
    t = ax.text(x_mid, lk.bytes_per_s * x_mid / 1.3, f"{lk.level} slope: {lk.label}", rotation=angle,
                rotation_mode="anchor", ha="center", va="top", fontsize=8.5, color=colour,
                gid=f"link-roof-label-{lk.level}")
    return [text_box(fig, t)]


def _key_note(p: Placement) -> str:
    if not on_chart(p):
        return "not drawn: no FLOPs" if p.flop <= 0 else "not drawn: no bytes"
    if p.above_roof:
        return f"measured {format_time(p.measured_time_s or 0.0)}: ABOVE THE ROOF ({p.fraction_of_roof or 0:.0%})"
    if p.fraction_of_roof is not None:
        return f"measured {format_time(p.measured_time_s or 0.0)}: {p.fraction_of_roof:.0%} of the roof"
    return ""


def _intensity_cell(p: Placement) -> str:
    if not on_chart(p):
        return "—"
    v = intensity(p)
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"


def _draw_key(key: Axes, placements: Sequence[Placement], labels: Sequence[str], fontsize: float,
              total_time_s: float, links: bool = False, classes: Sequence[Bound] = (Bound.MEMORY, Bound.COMPUTE)
              ) -> None:
    """Numbered rows in execution order: number, name (×count), intensity, time floor per step, share;
    a measured kernel gets a second line with its measured time and share of the roof."""
    notes = [_key_note(p) for p in placements]
    rows = len(placements) + sum(1 for n in notes if n) + 3
    step = 1.0 / max(rows, 26)
    key.set_xlim(0, 1)
    key.set_ylim(0, 1)
    key.text(0.0, 1.0, " #  kernel", fontsize=fontsize, fontweight="bold", family="monospace", va="top")
    header = "FLOP/B     floor share" if total_time_s else "FLOP/B     floor"
    key.text(1.0, 1.0, header, fontsize=fontsize, fontweight="bold", family="monospace",
             va="top", ha="right")
    row = 1.3
    for i, (p, name, note) in enumerate(zip(placements, labels, notes, strict=True)):
        y = 1.0 - row * step
        colour = BOUND_COLOURS[p.bound_class]
        count = f" ×{p.count}" if p.count > 1 else ""
        label = shorten(name, 27 - len(count)) + count
        share = p.total_time_s / total_time_s if total_time_s else 0.0
        key.text(0.0, y, f"{i + 1:>2}  {label}", fontsize=fontsize, family="monospace", va="top", color="black",
                 gid=f"key-{i + 1}")
        cells = f"{_intensity_cell(p):>6} {format_time(p.total_time_s):>9}"
        if total_time_s:
            cells += f" {share:>5.0%}"
        key.text(1.0, y, cells,
                 fontsize=fontsize, family="monospace", va="top", ha="right", color=colour)
        row += 1
        if note:
            key.text(0.07, 1.0 - row * step, note, fontsize=fontsize - 0.5, va="top", ha="left",
                     fontweight="bold" if p.above_roof else "normal",
                     color=ABOVE_ROOF_COLOUR if p.above_roof else "0.35", gid=f"key-note-{i + 1}")
            row += 1
    names = {Bound.MEMORY: "blue memory", Bound.COMPUTE: "orange compute"}
    colours = [names[b] for b in classes] + (["purple communication"] if links else [])
    legend = (f"colour = bound ({', '.join(colours)}); " if colours else "") + "floor = time floor per step"
    if links:
        legend = (f"colour = bound ({', '.join(colours)});\n"
                  "floor = time floor per step; a collective's FLOP/B is per byte on\n"
                  "its link, and its latency α puts it below its link's slope")
    if total_time_s:
        legend += "\nmarker size on the chart grows with the kernel's share of the step time"
    key.text(0.0, 1.0 - (row + 0.5) * step, legend, fontsize=fontsize - 0.5, color="0.4", va="top")


# --- several machines or precisions on one chart ------------------------------------------------------

@literal_text
def roofs_figure(roofs: Sequence[tuple[Machine | str, str | DType | None]], *,
                 placements: Sequence[Placement] = (), title: str = "") -> Figure:
    """Several roofs on one chart: machines (A100 → H100 → B200: "the roof rose seven times, the ridge
    moved by two") or precisions (B200 bf16/fp8/fp4: "each halving of precision doubles the ridge").

    Each roof is a line of its own colour with its peak, bandwidth and ridge in the legend; each
    ridge is marked and numbered on the chart. The caption states the spread of roofs and ridges:
    highest / lowest peak and highest / lowest ridge."""
    if not roofs:
        raise RooflineError("no roofs to compare")
    rs = [roof_of(machine, dtype) for machine, dtype in roofs]
    ridges = [r.ridge_flop_per_byte for r in rs]
    xs = [p.flop_per_byte for p in placements if on_chart(p)]
    x_lo = decade_floor(min([*ridges, *xs]) / 30)
    x_hi = decade_ceil(max([*ridges, *xs]) * 10)
    y_lo = decade_floor(min(r.attainable(x_lo) for r in rs))
    y_hi = max(r.peak_flop_per_s for r in rs) * 4

    fig = new_figure(10.5, 6.8)
    ax = fig.add_axes((0.08, 0.27, 0.88, 0.63), gid="roofline")
    log_axes(ax, "arithmetic intensity I (FLOP/byte)", "attainable performance (FLOP/s)")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    for i, r in enumerate(rs):
        colour = ROOF_CYCLE[i % len(ROOF_CYCLE)]
        _draw_roof(ax, r, x_lo, x_hi, colour, f"roof-{i + 1}",
                   label=(f"{r.label}: {format_flop_per_s(r.peak_flop_per_s)}, {format_bytes_per_s(r.bytes_per_s)},"
                          f" ridge {format_intensity(r.ridge_flop_per_byte)}"))
    for p in placements:
        if on_chart(p):
            ax.plot([p.flop_per_byte], [p.attainable_flop_per_s], marker="o", ms=7, ls="none",
                    mfc=BOUND_COLOURS[p.bound_class], mec="white", gid=f"kernel-{p.name}", zorder=5)
    # ridge values as numbered labels that never overlap, in each roof's colour
    obstacles: list[Bbox] = []
    place_labels(fig, ax, [(r.ridge_flop_per_byte, r.peak_flop_per_s) for r in rs],
                 [f"{r.ridge_flop_per_byte:.0f}" for r in rs],
                 [ROOF_CYCLE[i % len(ROOF_CYCLE)] for i in range(len(rs))], obstacles, gid_prefix="ridge-label")
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.1), fontsize=9, ncols=1, frameon=False)
    fig.text(0.08, 0.965, title or "Roofs compared", fontsize=13, fontweight="bold", va="top", gid="title")
    peaks = [r.peak_flop_per_s for r in rs]
    hi, lo = rs[peaks.index(max(peaks))], rs[peaks.index(min(peaks))]
    caption = (f"roof: {hi.label} / {lo.label} = ×{max(peaks) / min(peaks):.2g}; "
               f"ridge: highest / lowest = ×{max(ridges) / min(ridges):.2g}")
    fig.text(0.08, 0.925, caption, fontsize=9.5, color="0.3", va="top", gid="caption")
    return fig
