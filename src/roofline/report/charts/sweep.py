"""The sweep chart: intensity against one swept quantity (batch, length) with the ridge and the
asymptote; below it, when the rows carry times, the step time as stacked bars, one segment per
kernel, hatched where the kernel is compute-bound.

Several machines (`series="machine"`) each get an intensity line, a ridge and a step-time panel;
a batch whose step does not fit in memory is drawn hollow (its bar faded), with a key entry. The bars
show at most MAX_BARS of the swept values, evenly spaced (the panel's title says so); the line, all.

Artists carry gids ("sweep", "ridge", "limit", "crossover", "nofit", "bar-0-<kernel>-<bound>",
"bar-total-0", ...; with a series "sweep-<name>", "ridge-<name>", "step-time-<name>",
"bar-<name>-0-<kernel>-<bound>") so that tests and the SVG can find them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError
from roofline.placement import GraphAnalysis, Placement
from roofline.report.charts.labels import literal_text, shorten
from roofline.report.charts.roofline import decade_ceil, decade_floor, log_axes, new_figure
from roofline.report.points import ABOVE_ROOF_COLOUR, BOUND_COLOURS, ROOF_COLOUR
from roofline.units import format_intensity, format_time
from roofline.vocab import Bound

MAX_BARS = 40  # the step-time panel's bars: beyond this many values, this many of them, evenly spaced

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


SERIES_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
SERIES_LINES = ("-", "--", ":", "-.")


def fits_memory(row: Mapping[str, Any]) -> bool | None:
    """Whether a row's step fits in its devices' memory: the row's own `fits` where it has one (compare,
    analyze_model); otherwise `devices`, the fewest devices of a valid split that hold the weights
    and the KV cache (sweep), against the devices the row runs on (`split_devices`, 1 without a
    split). None where neither is known (a machine without a capacity)."""
    if row.get("fits") is not None:
        return bool(row["fits"])
    devices = row.get("devices")
    if isinstance(devices, int) and not isinstance(devices, bool) and devices > 0:
        return devices <= int(row.get("split_devices") or 1)
    return None


def _groups(rows: Sequence[Mapping[str, Any]], series: str | None) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """The rows by `series` (e.g. "machine"), in order of first appearance; one group without it."""
    if series is None:
        return [("", list(rows))]
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if series not in r:
            raise RooflineError(f"sweep row lacks {series!r}: {sorted(r)}")
        out.setdefault(str(r[series]), []).append(r)
    return list(out.items())


@literal_text
def sweep_figure(rows: Sequence[Mapping[str, Any]], x: str, *, ridge: float, limit: float | None = None,
                 title: str = "", series: str | None = None) -> Figure:
    """Intensity against `x` (e.g. batch) with the ridge and the asymptote; below it, when the rows
    carry times, the step time as stacked bars, one segment per kernel, hatched where the kernel is
    compute-bound, with the memory-bound share written over each bar.

    With `series` (e.g. "machine"), the rows are grouped by that column: one intensity line and one
    ridge per group (each group's ridge is its rows' `ridge_flop_per_byte`, else `ridge`), and one
    step-time panel per group. A point whose step does not fit in memory (`fits_memory`) is drawn
    hollow, and its bar faded, each with a key entry."""
    if not rows:
        raise RooflineError("nothing to draw: the sweep has no rows")
    for r in rows:
        for key in (x, "flop_per_byte"):
            if key not in r:
                raise RooflineError(f"sweep row lacks {key!r}: {sorted(r)}")
    if not (ridge > 0 and math.isfinite(ridge)):
        raise RooflineError(f"ridge must be a positive number, got {ridge!r}")
    if limit is not None and not (limit > 0 and math.isfinite(limit)):
        raise RooflineError(f"the limit must be a positive number, got {limit!r}")
    groups = _groups(rows, series)
    multi = len(groups) > 1
    xs_all = [float(r[x]) for r in rows]
    ys_all = [float(r["flop_per_byte"]) for r in rows]
    if min(xs_all) <= 0 or min(ys_all) <= 0:
        raise RooflineError(f"{x} and intensity must be positive to draw on log axes")
    ridges = [float(g[0].get("ridge_flop_per_byte") or ridge) if multi else ridge for _, g in groups]
    times = [[_kernel_times(r) for r in g] for _, g in groups]
    with_times = all(t is not None for ts in times for t in ts)
    panels = len(groups) if with_times else 0
    # inches: title, intensity axes, gap, then one step-time panel per group
    panel_h = 3.42 if panels == 1 else 2.6
    height = (0.72 + 3.06 + 1.17 + panels * panel_h + max(0, panels - 1) * 0.85 + 0.63) if panels else 5.6
    fig = new_figure(10.5, height)
    if panels:
        ax = fig.add_axes((0.09, (height - 0.72 - 3.06) / height, 0.62, 3.06 / height), gid="intensity")
    else:
        ax = fig.add_axes((0.09, 0.12, 0.84, 0.74), gid="intensity")
    log_axes(ax, x, "arithmetic intensity I (FLOP/byte)")
    x_lo, x_hi = min(xs_all) / 1.5, max(xs_all) * 1.5
    y_all = [*ys_all, *ridges, *([limit] if limit else [])]
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(decade_floor(min(y_all) / 1.5), decade_ceil(max(y_all) * 1.5))
    any_nofit = False
    crossed = False
    for i, ((name, g), g_ridge) in enumerate(zip(groups, ridges, strict=True)):
        suffix = f"-{name}" if multi else ""
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        marker = SERIES_MARKERS[i % len(SERIES_MARKERS)] if multi else "o"
        # machines often share the intensity (it is the step's, not the machine's): later markers are
        # smaller, drawn inside the earlier ones, so that each machine's stays visible
        ms = 5.0 + 2.0 * (len(groups) - 1 - i)
        xs = [float(r[x]) for r in g]
        ys = [float(r["flop_per_byte"]) for r in g]
        nofit = [j for j, r in enumerate(g) if fits_memory(r) is False]
        any_nofit = any_nofit or bool(nofit)
        ax.plot(xs, ys, marker=marker, ms=ms, color=colour, lw=1.8, ls=SERIES_LINES[i % len(SERIES_LINES)],
                markevery=[j for j in range(len(g)) if j not in nofit], gid=f"sweep{suffix}",
                label=f"intensity, {name}" if multi else "intensity of the whole step")
        if nofit:
            ax.plot([xs[j] for j in nofit], [ys[j] for j in nofit], marker=marker, ms=ms + 1, ls="none", mfc="white",
                    mec=colour, mew=1.5, gid=f"nofit{suffix}", zorder=4)
        ridge_colour = colour if multi else ROOF_COLOUR
        ax.axhline(g_ridge, color=ridge_colour, lw=1.6 if not multi else 1.2, ls="-" if not multi else (0, (6, 2)),
                   gid=f"ridge{suffix}",
                   label=f"ridge I* = {format_intensity(g_ridge)}" + (f", {name}" if multi else ""))
        if not multi:
            ax.text(x_lo * 1.05, g_ridge * 1.08, f"ridge {format_intensity(g_ridge)}: compute-bound above",
                    fontsize=8.5, va="bottom", gid="ridge-label")
        cross = next((xv for xv, yv in zip(xs, ys, strict=True) if yv >= g_ridge), None)
        if cross is not None:
            crossed = True
            ax.axvline(cross, color="0.5" if not multi else colour, lw=0.9, ls=":", gid=f"crossover{suffix}",
                       label=f"{name} reaches its ridge at {x} {cross:g}" if multi else None)
            if not multi:
                ax.text(cross * 1.05, ax.get_ylim()[0] * 1.3, f"reaches the ridge at {x} {cross:g}", fontsize=8.5,
                        color="0.3", gid="crossover-label")
    if limit is not None:
        ax.axhline(limit, color=ABOVE_ROOF_COLOUR, lw=1.4, ls="--", gid="limit",
                   label=f"limit as {x} → ∞: {format_intensity(limit)}")
        ax.text(x_lo * 1.05, limit * 1.08, f"limit as {x} → ∞: {format_intensity(limit)}", fontsize=8.5,
                va="bottom", color=ABOVE_ROOF_COLOUR, gid="limit-label")
        if not crossed and limit < min(ridges):
            ax.text(0.5, 0.04, f"the limit is below the ridge: memory-bound at every {x}", transform=ax.transAxes,
                    ha="center", fontsize=9, color=ABOVE_ROOF_COLOUR, gid="never-label")
    if any_nofit:
        ax.plot([], [], marker="o", ms=6, ls="none", mfc="white", mec="0.3", mew=1.5, gid="nofit-key",
                label="hollow: does not fit in memory")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8.5, frameon=False)
    fig.text(0.09, 1 - 0.25 / height if panels else 0.975, title or f"Intensity against {x}", fontsize=13,
             fontweight="bold", va="top", gid="title")
    for i, ((name, g), ts) in enumerate(zip(groups, times, strict=True)):
        if not panels:
            break
        bottom = 0.63 + (panels - 1 - i) * (panel_h + 0.85)
        gid = f"step-time-{name}" if multi else "step-time"
        bars = fig.add_axes((0.09, bottom / height, 0.62, panel_h / height), gid=gid)
        timed = [(r, t) for r, t in zip(g, ts, strict=True) if t is not None]
        shown = _evenly(timed, MAX_BARS)
        some = f", {len(shown)} of the {len(timed)} {x} values, evenly spaced" if len(shown) < len(timed) else ""
        _draw_step_bars(bars, [float(r[x]) for r, _ in shown], [t for _, t in shown], x,
                        fits=[fits_memory(r) is not False for r, _ in shown], prefix=f"bar-{name}" if multi else "bar",
                        where=(f" on {name}" if multi else "") + some)
    return fig


def _evenly(items: list[Any], most: int) -> list[Any]:
    """At most `most` of `items`, evenly spaced, the first and the last among them: a panel of stacked bars
    stays readable (and drawable: each bar is a dozen patches and a label) whatever the sweep's length."""
    if len(items) <= most:
        return items
    return [items[i] for i in sorted({round(k * (len(items) - 1) / (most - 1)) for k in range(most)})]


def _draw_step_bars(ax: Axes, xs: Sequence[float], times: Sequence[list[tuple[str, float, Bound]]], x: str,
                    fits: Sequence[bool] | None = None, prefix: str = "bar", where: str = "") -> None:
    """Stacked bars: one segment per kernel in a colour of its own (the same across bars), hatched
    if compute-bound. The ten largest kernels by total time are named; the rest are 'other'. A bar
    whose step does not fit in memory (`fits` False) is faded and says so."""
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
    fit = list(fits) if fits is not None else [True] * len(xs)
    for pos, row in zip(positions, times, strict=True):
        bottom = 0.0
        for name, t, bound in row:
            if t <= 0:
                continue
            ax.bar(pos, t / scale, bottom=bottom, width=0.7, color=colour.get(name, other),
                   hatch="///" if bound == "compute" else None, edgecolor="white", lw=0.5,
                   alpha=1.0 if fit[pos] else 0.35, gid=f"{prefix}-{pos}-{name}-{bound}")
            bottom += t / scale
        total = sum(t for _, t, _ in row)
        mem = sum(t for _, t, b in row if b == "memory")
        ax.text(pos, bottom * 1.01, f"{format_time(total)}\n{(mem / total if total else 0):.0%} mem"
                + ("" if fit[pos] else "\nno fit"), ha="center", va="bottom", fontsize=7.5,
                color="black" if fit[pos] else ABOVE_ROOF_COLOUR, gid=f"{prefix}-total-{pos}")
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
    if not all(fit):
        handles.append(Patch(facecolor="0.3", alpha=0.35, label="faded: does not fit in memory"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(f"step time by kernel{where} (plain: memory-bound, hatched: compute-bound)", fontsize=10,
                 loc="left")
