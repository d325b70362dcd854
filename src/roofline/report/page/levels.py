"""The page's view inside the chip: each kernel's points per memory level and one roof per level,
as the static hierarchical roofline draws them (report/charts/levels.py), for the page's "levels" toggle.

    x = FLOPs / bytes through the level,  y = the kernel's y on the page (FLOPs / time floor)
    roof of a level: min(peak, BW_level × I)

DRAM's point is the kernel's own point and DRAM's roof the page's main roof, so the page draws the
other levels only; the kernel's panel lists every level, DRAM included, with its bytes, intensity,
bandwidth and time (bytes / bandwidth).

The traces (plain plotly dicts, in the figure from the start so that the toggle only restyles):
"level roof <level>" per level other than DRAM (hidden until the toggle is on), and "levels", the
current kernel's points (empty until then).

No matplotlib is loaded: the levels chart's drawing functions import it themselves.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from roofline.placement import Placement
from roofline.report.charts.levels import LEVEL_COLOURS, LEVEL_NAMES, level_bandwidths, level_points
from roofline.units import format_bytes, format_bytes_per_s, format_intensity, format_time
from roofline.vocab import Level

# plotly's marker symbols for the levels, matching the static chart's matplotlib markers
LEVEL_SYMBOLS = {Level.SMEM: "square", Level.L1: "triangle-up", Level.L2: "diamond", Level.L3: "triangle-down",
                 Level.DRAM: "circle"}


def kernel_levels(p: Placement) -> list[dict[str, Any]]:
    """The kernel's level records, fastest level first: level, bytes, x (FLOPs / bytes), bandwidth,
    time (bytes / bandwidth), and one line of text for the kernel's panel."""
    out = []
    for pt in level_points([p]):
        bw = p.bandwidth_by_level[pt.level]
        name = LEVEL_NAMES.get(pt.level, str(pt.level))
        out.append({
            "level": str(pt.level), "name": name, "bytes": pt.bytes, "x": pt.x, "bytes_per_s": bw,
            "time_s": pt.bytes / bw, "symbol": LEVEL_SYMBOLS.get(pt.level, "circle"),
            "colour": LEVEL_COLOURS.get(pt.level, "#7f7f7f"),
            "text": (f"{name}: {format_bytes(pt.bytes)}, I = {format_intensity(pt.x)}, "
                     f"{format_bytes_per_s(bw)} → {format_time(pt.bytes / bw)}"),
        })
    return out


def level_xs(p: Placement) -> list[float]:
    """The x of the kernel's points at the levels other than DRAM (for the page's axis range)."""
    return [pt.x for pt in level_points([p]) if pt.level is not Level.DRAM]


def level_traces(placements: Sequence[Placement], peak: float, x_lo: float, x_hi: float) -> list[dict[str, Any]]:
    """One hidden roof per level other than DRAM, then the empty "levels" trace of the current kernel."""
    traces: list[dict[str, Any]] = []
    for level, bw in level_bandwidths(placements).items():
        if level is Level.DRAM:
            continue
        ridge = peak / bw
        xs = [x_lo, ridge, x_hi] if x_lo < ridge < x_hi else [x_lo, x_hi]
        name = LEVEL_NAMES.get(level, str(level))
        traces.append({
            "type": "scatter", "mode": "lines", "name": f"level roof {level}", "x": xs,
            "y": [min(peak, bw * x) for x in xs], "visible": False, "showlegend": False,
            "line": {"color": LEVEL_COLOURS.get(level, "#7f7f7f"), "width": 1.6, "dash": "dashdot"},
            "hovertemplate": html.escape(f"{name} roof: min(peak, {format_bytes_per_s(bw)} × I)") + "<extra></extra>",
        })
    traces.append({"type": "scatter", "mode": "markers+text", "name": "levels", "x": [], "y": [], "text": [],
                   "textposition": "top center", "hovertemplate": "%{hovertext}<extra></extra>", "showlegend": False,
                   "marker": {"size": 11, "symbol": [], "color": [], "line": {"color": "white", "width": 1}}})
    return traces


__all__ = ["LEVEL_SYMBOLS", "kernel_levels", "level_traces", "level_xs"]
