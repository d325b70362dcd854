"""Inside the chip, drawn: the hierarchical roofline and the sub-roof chart (matplotlib).

Hierarchical roofline (left panel), as Nsight Compute draws it (its "Hierarchical Roofline" section,
after Yang et al., "Hierarchical Roofline Analysis for GPUs", 2020): one roof per memory level that
has a bandwidth, attainable = min(peak, BW_level × I_level), all meeting the same compute roof (the
matrix peak at the kernel's dtype); and for each kernel one point per level it moves bytes through:

    x = I_level = FLOPs / bytes through that level        (the kernel's FLOPs are the same at every level)
    y = FLOPs / time floor                                (the same for all of one kernel's points)

A point far right of its level's ridge has reuse to spare at that level; the level whose point
sits closest under its own roof is the one that binds. Shared memory (SMEM) and L2 bytes come from
the kernel's tiling (roofline.kernels: matmul_onchip, attention_ops), DRAM bytes from the tensors
crossing the kernel's boundary; a CPU's L1, L2 and L3 roofs come from `roofline measure`'s cache
ladder. A level with bytes but no bandwidth on the machine has no roof and no point; the subtitle
names it.

Sub-roof chart (right panel): the compute ceilings as horizontal roofs under one DRAM slope,
min(peak_unit, BW_DRAM × I): the matrix units at the dtype's peak, the FP32 vector lanes, and the
exponential units (MUFU). An exponential is an op, not a FLOP, so the exp roof is drawn where the
kernels' FLOPs would be if the exp units alone set their time, as FlashAttention-4 compares them:

    exp roof = exponentials per second × FLOPs per exponential   (Σ FLOPs / Σ exps of the kernels doing any)

Each kernel is one point at its DRAM intensity and FLOPs / time floor, marked with the resource
that binds it.

Artists carry gids: "level-roof-<level>", "level-point-<n>-<level>" (n: the kernel's number, from 1),
"unit-roof-<unit>", "unit-slope-dram", "unit-point-<n>".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.placement import Placement
from roofline.report.charts.labels import literal_text
from roofline.report.charts.roofline import decade_ceil, decade_floor, log_axes, new_figure
from roofline.report.points import BOUND_COLOURS, ROOF_COLOUR
from roofline.units import format_bytes_per_s, format_flop_per_s, format_si
from roofline.vocab import LINKS, Level, Unit, bound_class

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# fastest level first: the order of the legend and of a kernel's points from right to left
LEVEL_ORDER = (Level.SMEM, Level.L1, Level.L2, Level.L3, Level.DRAM)
LEVEL_COLOURS = {Level.SMEM: "#9467bd", Level.L1: "#2ca02c", Level.L2: "#17becf", Level.L3: "#bcbd22",
                 Level.DRAM: ROOF_COLOUR}
LEVEL_MARKERS = {Level.SMEM: "s", Level.L1: "^", Level.L2: "D", Level.L3: "v", Level.DRAM: "o"}
LEVEL_NAMES = {Level.SMEM: "shared memory", Level.L1: "L1", Level.L2: "L2", Level.L3: "L3", Level.DRAM: "DRAM"}
UNIT_COLOURS = {Unit.MATRIX: "#e6550d", Unit.VECTOR: "#2ca02c", Unit.EXP: "#9467bd"}
UNIT_STYLES = {Unit.MATRIX: "-", Unit.VECTOR: "--", Unit.EXP: "-."}


@frozen
class LevelPoint:
    """One kernel's point at one memory level: x = FLOPs / that level's bytes, y = FLOPs / time floor."""

    kernel: int  # the kernel's number, from 1, in execution order
    name: str
    level: Level
    flop: float
    bytes: float
    y: float

    @property
    def x(self) -> float:
        return self.flop / self.bytes


def level_bandwidths(placements: Sequence[Placement]) -> dict[Level, float]:
    """The memory levels (not links) with a bandwidth, fastest first: each one roof."""
    found: dict[Level, float] = {}
    for p in placements:
        for level, bw in p.bandwidth_by_level.items():
            if level not in LINKS and bw:
                found.setdefault(level, bw)
    return {lv: found[lv] for lv in (*LEVEL_ORDER, *found) if lv in found}


def level_points(placements: Sequence[Placement]) -> list[LevelPoint]:
    """Every kernel's point per level it moves bytes through, where that level has a bandwidth and
    the kernel does FLOPs (a zero-FLOP kernel has no place on log axes)."""
    out: list[LevelPoint] = []
    for n, p in enumerate(placements, start=1):
        if not p.flop > 0 or not p.time_s > 0:
            continue
        for level in level_bandwidths([p]):
            b = p.cost.bytes_by_level.get(level, 0.0)
            if b > 0:
                out.append(LevelPoint(n, p.name, level, p.flop, b, p.flop / p.time_s))
    return out


def unit_ceilings(placements: Sequence[Placement]) -> dict[Unit, float]:
    """Each compute unit's peak placed (FLOP/s; exponentials per second for the exp units), in Unit order."""
    found: dict[Unit, float] = {}
    for p in placements:
        for unit, peak in p.peak_by_unit.items():
            found.setdefault(unit, peak)
    return {u: found[u] for u in Unit if u in found}


def _missing_levels(placements: Sequence[Placement]) -> list[Level]:
    """Levels some kernel moves bytes through that have no bandwidth on the machine."""
    have = level_bandwidths(placements)
    return sorted({lv for p in placements for lv, b in p.cost.bytes_by_level.items()
                   if b and lv not in have and lv not in LINKS}, key=lambda lv: list(Level).index(lv))


def _span(xs: Sequence[float], ridges: Sequence[float]) -> tuple[float, float]:
    values = [v for v in (*xs, *ridges) if v > 0 and math.isfinite(v)] or [1.0]
    return decade_floor(min(values) / 3), decade_ceil(max(values) * 3)


def flop_per_exp(placements: Sequence[Placement]) -> float | None:
    """Σ FLOPs / Σ exponentials over the kernels that evaluate any (None: none does)."""
    doing = [p for p in placements if p.cost.work(Unit.EXP) > 0]
    exps = sum(p.cost.work(Unit.EXP) for p in doing)
    return sum(p.flop for p in doing) / exps if exps else None


def subroofs(placements: Sequence[Placement]) -> dict[Unit, float]:
    """Each unit's horizontal roof in FLOP/s: its peak; the exp units' rate × FLOPs per exponential."""
    out: dict[Unit, float] = {}
    ratio = flop_per_exp(placements)
    for unit, peak in unit_ceilings(placements).items():
        if unit is Unit.EXP:
            if ratio:
                out[unit] = peak * ratio
        else:
            out[unit] = peak
    return out


def _label_groups(ax: Axes, labelled: Sequence[tuple[float, float, str]], dx: float, dy: float) -> None:
    """One label per cluster of points (within 0.06 decade of each other on both axes): "5,6,9"
    instead of three labels on top of one another."""
    groups: list[tuple[float, float, list[str]]] = []
    for x, y, text in labelled:
        lx, ly = math.log10(x), math.log10(y)
        for gx, gy, texts in groups:
            if abs(gx - lx) < 0.06 and abs(gy - ly) < 0.06:
                texts.append(text)
                break
        else:
            groups.append((lx, ly, [text]))
    for gx, gy, texts in groups:
        ax.annotate(",".join(texts), (10**gx, 10**gy), textcoords="offset points", xytext=(dx, dy), fontsize=8)


def _unit_label(unit: Unit, roof: float, placements: Sequence[Placement]) -> str:
    if unit is Unit.EXP:
        rate = unit_ceilings(placements)[Unit.EXP]
        return (f"exp {format_si(rate, 'op/s')} × {flop_per_exp(placements) or 0:.3g} FLOP/exp = "
                f"{format_flop_per_s(roof)}")
    return f"{unit} {format_flop_per_s(roof)}"


def draw_hierarchical(ax: Axes, placements: Sequence[Placement]) -> list[LevelPoint]:
    """The left panel: one roof per level with a bandwidth, one point per kernel and level."""
    bws = level_bandwidths(placements)
    if not bws:
        raise RooflineError("no memory level with a bandwidth to draw")
    peak = max(p.peak_by_unit.get(Unit.MATRIX, 0.0) for p in placements) or max(unit_ceilings(placements).values())
    points = level_points(placements)
    x_lo, x_hi = _span([pt.x for pt in points], [peak / bw for bw in bws.values()])
    ys = [pt.y for pt in points] or [peak]
    y_lo = decade_floor(min(min(ys), min(bw * x_lo for bw in bws.values())) / 3)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, decade_ceil(peak * 2))
    log_axes(ax, "intensity at each level, FLOPs / level bytes (FLOP/byte)", "FLOPs / time floor", "FLOP/s")
    for level, bw in bws.items():
        ridge = peak / bw
        xs = [x_lo, ridge, x_hi] if x_lo < ridge < x_hi else [x_lo, x_hi]
        colour = LEVEL_COLOURS.get(level, "#7f7f7f")
        ax.plot(xs, [min(peak, bw * x) for x in xs], color=colour, lw=1.8, gid=f"level-roof-{level}",
                label=f"{LEVEL_NAMES.get(level, str(level))} {format_bytes_per_s(bw)}", zorder=2)
    for pt in points:
        colour = LEVEL_COLOURS.get(pt.level, "#7f7f7f")
        ax.scatter([pt.x], [pt.y], s=46, marker=LEVEL_MARKERS.get(pt.level, "o"), color=colour,
                   edgecolors="white", linewidths=0.8, gid=f"level-point-{pt.kernel}-{pt.level}", zorder=5)
    for n in sorted({pt.kernel for pt in points}):  # join one kernel's points: same FLOPs, same height
        mine = sorted((pt for pt in points if pt.kernel == n), key=lambda pt: pt.x)
        if len(mine) > 1:
            ax.plot([pt.x for pt in mine], [pt.y for pt in mine], color="0.55", lw=0.8, ls=":", zorder=3,
                    gid=f"level-join-{n}")
    leftmost = {}  # each kernel labelled once, at its leftmost point
    for pt in sorted(points, key=lambda pt: -pt.x):
        leftmost[pt.kernel] = (pt.x, pt.y, str(pt.kernel))
    _label_groups(ax, [leftmost[n] for n in sorted(leftmost)], -9, 5)
    ax.legend(loc="lower right", fontsize=8, title="roof per level", title_fontsize=8)
    ax.set_title("hierarchical roofline: a point per level (Nsight Compute's)", fontsize=10)
    return points


def _bound_colour(p: Placement) -> str:
    """The colour of what binds: a unit's roof colour, a level's, or the bound class's."""
    bound = p.bound
    if isinstance(bound, Unit) and bound in UNIT_COLOURS:
        return UNIT_COLOURS[bound]
    if isinstance(bound, Level) and bound in LEVEL_COLOURS and bound is not Level.DRAM:
        return LEVEL_COLOURS[bound]
    return BOUND_COLOURS[bound_class(bound)]


def draw_subroofs(ax: Axes, placements: Sequence[Placement]) -> None:
    """The right panel: each compute unit's ceiling as a horizontal roof under the DRAM slope."""
    units = subroofs(placements)
    bws = level_bandwidths(placements)
    if Level.DRAM not in bws or not units:
        raise RooflineError("the sub-roof chart needs a DRAM bandwidth and a compute peak")
    dram = bws[Level.DRAM]
    drawn = [p for p in placements if p.flop > 0 and p.bytes > 0 and p.time_s > 0]
    xs = [p.flop_per_byte for p in drawn]
    x_lo, x_hi = _span(xs, [peak / dram for peak in units.values()])
    top = max(units.values())
    ys = [p.flop / p.time_s for p in drawn] or [top]
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(decade_floor(min(min(ys), min(units.values()), dram * x_lo) / 3), decade_ceil(top * 2))
    log_axes(ax, "intensity I = FLOPs / DRAM bytes (FLOP/byte)", "FLOPs / time floor", "FLOP/s")
    ax.plot([x_lo, top / dram], [dram * x_lo, top], color=ROOF_COLOUR, lw=1.4, gid="unit-slope-dram",
            label=f"DRAM {format_bytes_per_s(dram)}", zorder=2)
    for unit, peak in units.items():
        ridge = peak / dram
        ax.plot([max(ridge, x_lo), x_hi], [peak, peak], color=UNIT_COLOURS.get(unit, "#7f7f7f"), lw=1.8,
                ls=UNIT_STYLES.get(unit, "-"), gid=f"unit-roof-{unit}", label=_unit_label(unit, peak, placements),
                zorder=2)
    labelled: list[tuple[float, float, str]] = []
    bounds_seen: dict[str, str] = {}
    for n, p in enumerate(placements, start=1):
        if p not in drawn:
            continue
        colour = _bound_colour(p)
        bounds_seen.setdefault(str(p.bound), colour)
        x, y = p.flop_per_byte, p.flop / p.time_s
        ax.scatter([x], [y], s=48, color=colour, edgecolors="white", linewidths=0.8, gid=f"unit-point-{n}", zorder=5)
        labelled.append((x, y, str(n)))
    _label_groups(ax, labelled, 5, 4)
    for bound, colour in bounds_seen.items():  # the legend names what binds each colour of point
        ax.scatter([], [], s=48, color=colour, label=f"kernel bound by {bound}")
    ax.legend(loc="lower right", fontsize=8, title="compute ceilings", title_fontsize=8)
    ax.set_title("sub-roofs: matrix, vector, exp ceilings", fontsize=10)


@literal_text
def levels_figure(placements: Sequence[Placement], title: str = "") -> Figure:
    """Both panels for `placements` (one kernel, or the kernels of a plan in execution order)."""
    if not placements:
        raise RooflineError("nothing to draw: no kernel given")
    first = placements[0]
    fig = new_figure(13.0, 5.6)
    left, right = fig.subplots(1, 2)
    draw_hierarchical(left, placements)
    draw_subroofs(right, placements)
    import textwrap

    names = "\n".join(textwrap.wrap("; ".join(f"{n} {p.name}" for n, p in enumerate(placements, start=1)), 180))
    head = title or (placements[0].name if len(placements) == 1 else "kernels")
    where = "" if first.machine.name in head else f" on {first.machine.name}"
    fig.suptitle(f"{head}{where} ({first.dtype.name}): inside the chip", fontsize=11)
    notes = [names]
    missing = _missing_levels(placements)
    if missing:
        notes.append("no bandwidth on this machine, so no roof: " + ", ".join(str(lv) for lv in missing))
    fig.text(0.01, 0.01, "\n".join(notes), fontsize=7.5, color="0.3", va="bottom")
    lines = sum(note.count("\n") + 1 for note in notes)
    fig.subplots_adjust(left=0.075, right=0.985, top=0.86, bottom=0.15 + 0.022 * lines, wspace=0.26)
    return fig


def check_levels_png(path: str | None) -> None:
    """--levels-png writes PNG: a name ending otherwise is refused before anything runs."""
    from pathlib import Path

    if path and Path(path).suffix and Path(path).suffix.lower() != ".png":
        raise RooflineError(f"--levels-png writes PNG, but {path} ends in {Path(path).suffix}; "
                            f"name it {Path(path).with_suffix('.png')}")


def write_levels_png(placements: Sequence[Placement], path: str, title: str = "") -> None:
    """Render the figure in memory, then write it atomically (fileio.atomic_write)."""
    from roofline.fileio import atomic_write
    from roofline.report.charts.roofline import figure_bytes

    atomic_write(path, figure_bytes(levels_figure(placements, title), "png"))


__all__ = ["LevelPoint", "check_levels_png", "draw_hierarchical", "draw_subroofs", "flop_per_exp", "level_bandwidths",
           "level_points", "levels_figure", "subroofs", "unit_ceilings", "write_levels_png"]
