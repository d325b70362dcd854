"""The sweep chart: intensity against one swept quantity (batch, length) with the ridge and the
asymptote; below it, when the rows carry times, the step time as stacked bars, one segment per
kernel, hatched where the kernel is compute-bound.

Artists carry gids ("sweep", "ridge", "limit", "crossover", "bar-0-<kernel>-<bound>",
"bar-total-0", ...) so that tests and the SVG can find them.

Layering: a report module; imports matplotlib (inside functions) and the core.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError
from roofline.placement import GraphAnalysis, Placement
from roofline.report.charts import decade_ceil, decade_floor, log_axes, new_figure
from roofline.report.labels import shorten
from roofline.report.points import ABOVE_ROOF_COLOUR, BOUND_COLOURS, ROOF_COLOUR
from roofline.units import format_intensity, format_time
from roofline.vocab import Bound

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _kernel_times(row: Mapping[str, Any]) -> list[tuple[str, float, Bound]] | None:
    """(kernel name, time per step, bound) for one sweep row, from whichever form it carries."""
    analysis = row.get("analysis")
    if isinstance(analysis, GraphAnalysis):
        return [(p.name, p.total_time_s, p.bound_class) for p in analysis.placements]
    kernels = row.get("kernels")
    if isinstance(kernels, Sequence) and kernels:
        out = []
        for k in kernels:
            if isinstance(k, Placement):
                out.append((k.name, k.total_time_s, k.bound_class))
            else:
                t = k.get("total_time_s", k.get("time_s", 0.0) * k.get("count", 1))
                out.append((str(k.get("name", "?")), float(t), Bound(str(k.get("bound_class", "memory")))))
        return out
    if "time_s" in row and "memory_bound_time_s" in row:
        mem = float(row["memory_bound_time_s"])
        return [("memory-bound kernels", mem, Bound.MEMORY),
                ("compute-bound kernels", float(row["time_s"]) - mem, Bound.COMPUTE)]
    return None


def sweep_figure(rows: Sequence[Mapping[str, Any]], x: str, *, ridge: float, limit: float | None = None,
                 title: str = "") -> Figure:
    """Intensity against `x` (e.g. batch) with the ridge and the asymptote; below it, when the rows
    carry times, the step time as stacked bars, one segment per kernel, hatched where the kernel is
    compute-bound, with the memory-bound share written over each bar."""
    if not rows:
        raise RooflineError("nothing to draw: the sweep has no rows")
    for r in rows:
        for key in (x, "flop_per_byte"):
            if key not in r:
                raise RooflineError(f"sweep row lacks {key!r}: {sorted(r)}")
    if not (ridge > 0 and math.isfinite(ridge)):
        raise RooflineError(f"ridge must be a positive number, got {ridge!r}")
    xs = [float(r[x]) for r in rows]
    ys = [float(r["flop_per_byte"]) for r in rows]
    if min(xs) <= 0 or min(ys) <= 0:
        raise RooflineError(f"{x} and intensity must be positive to draw on log axes")
    times = [_kernel_times(r) for r in rows]
    with_times = all(t is not None for t in times)
    fig = new_figure(10.5, 9.0 if with_times else 5.6)
    if with_times:
        ax = fig.add_axes((0.09, 0.58, 0.62, 0.34), gid="intensity")
        bars = fig.add_axes((0.09, 0.07, 0.62, 0.38), gid="step-time")
    else:
        ax = fig.add_axes((0.09, 0.12, 0.84, 0.74), gid="intensity")
    log_axes(ax, x, "arithmetic intensity I (FLOP/byte)")
    ax.plot(xs, ys, marker="o", ms=5, color="#1f77b4", lw=1.8, gid="sweep", label="intensity of the whole step")
    x_lo, x_hi = min(xs) / 1.5, max(xs) * 1.5
    y_all = [*ys, ridge, *([limit] if limit else [])]
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(decade_floor(min(y_all) / 1.5), decade_ceil(max(y_all) * 1.5))
    ax.axhline(ridge, color=ROOF_COLOUR, lw=1.6, gid="ridge", label=f"ridge I* = {format_intensity(ridge)}")
    ax.text(x_lo * 1.05, ridge * 1.08, f"ridge {format_intensity(ridge)}: compute-bound above",
            fontsize=8.5, va="bottom", gid="ridge-label")
    if limit is not None:
        if not (limit > 0 and math.isfinite(limit)):
            raise RooflineError(f"the limit must be a positive number, got {limit!r}")
        ax.axhline(limit, color=ABOVE_ROOF_COLOUR, lw=1.4, ls="--", gid="limit",
                   label=f"limit as {x} → ∞: {format_intensity(limit)}")
        ax.text(x_lo * 1.05, limit * 1.08, f"limit as {x} → ∞: {format_intensity(limit)}", fontsize=8.5,
                va="bottom", color=ABOVE_ROOF_COLOUR, gid="limit-label")
    cross = next((xv for xv, yv in zip(xs, ys, strict=True) if yv >= ridge), None)
    if cross is not None:
        ax.axvline(cross, color="0.5", lw=0.9, ls=":", gid="crossover")
        ax.text(cross * 1.05, ax.get_ylim()[0] * 1.3, f"reaches the ridge at {x} {cross:g}", fontsize=8.5,
                color="0.3", gid="crossover-label")
    elif limit is not None and limit < ridge:
        ax.text(0.5, 0.04, f"the limit is below the ridge: memory-bound at every {x}", transform=ax.transAxes,
                ha="center", fontsize=9, color=ABOVE_ROOF_COLOUR, gid="never-label")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8.5, frameon=False)
    fig.text(0.09, 0.975, title or f"Intensity against {x}", fontsize=13, fontweight="bold", va="top", gid="title")
    if with_times:
        _draw_step_bars(bars, xs, [t for t in times if t is not None], x)
    return fig


def _draw_step_bars(ax: Axes, xs: Sequence[float], times: Sequence[list[tuple[str, float, Bound]]], x: str) -> None:
    """Stacked bars: one segment per kernel in a colour of its own (the same across bars), hatched
    if compute-bound. The ten largest kernels by total time are named; the rest are 'other'."""
    from matplotlib import colormaps
    from matplotlib.patches import Patch

    totals: dict[str, float] = {}
    for row in times:
        for name, t, _ in row:
            totals[name] = totals.get(name, 0.0) + t
    named = sorted(totals, key=lambda k: -totals[k])[:10]
    palette = colormaps["tab20"]
    colour: dict[str, Any] = {name: palette(i % 20) for i, name in enumerate(named)}
    if set(totals) <= {"memory-bound kernels", "compute-bound kernels"}:  # totals only: colour by bound
        colour = {"memory-bound kernels": BOUND_COLOURS[Bound.MEMORY],
                  "compute-bound kernels": BOUND_COLOURS[Bound.COMPUTE]}
        named = [n for n in ("memory-bound kernels", "compute-bound kernels") if n in totals]
    other = "0.75"
    peak = max(sum(t for _, t, _ in row) for row in times) or 1.0
    scale, unit = next(((s, u) for s, u in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")) if peak >= s),
                       (1e-9, "ns"))
    positions = list(range(len(xs)))
    for pos, row in zip(positions, times, strict=True):
        bottom = 0.0
        for name, t, bound in row:
            if t <= 0:
                continue
            ax.bar(pos, t / scale, bottom=bottom, width=0.7, color=colour.get(name, other),
                   hatch="///" if bound == "compute" else None, edgecolor="white", lw=0.5,
                   gid=f"bar-{pos}-{name}-{bound}")
            bottom += t / scale
        total = sum(t for _, t, _ in row)
        mem = sum(t for _, t, b in row if b == "memory")
        ax.text(pos, bottom * 1.01, f"{format_time(total)}\n{(mem / total if total else 0):.0%} mem",
                ha="center", va="bottom", fontsize=7.5, gid=f"bar-total-{pos}")
    ax.set_xticks(positions, [f"{v:g}" for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel(f"step time floor ({unit})")
    ax.set_ylim(0, peak / scale * 1.22)
    ax.grid(True, axis="y", color="0.9")
    ax.set_axisbelow(True)
    handles = [Patch(facecolor=colour[n], label=shorten(n, 26)) for n in named]
    if len(totals) > len(named):
        handles.append(Patch(facecolor=other, label="other kernels"))
    handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="///", label="hatched: compute-bound"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title("step time by kernel (plain: memory-bound, hatched: compute-bound)", fontsize=10, loc="left")
