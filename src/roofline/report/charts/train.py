"""The training chart: the step's kernels on the roofline coloured by pass, and the step's breakdown.

Left: every kernel of the step that does arithmetic, at (intensity, FLOPs / floor) under the machine's
matrix roof at the compute dtype; forward blue, backward orange, recompute purple, optimizer green
(collectives do no arithmetic worth a point: they are in the breakdown); a point's area grows with its
share of the step. Right: the step as stacked bars, floor and the expected band's two ends, split into
compute, exposed communication, pipeline bubble and optimizer, with MFU written on each.

The page (--html) is the same two panels drawn by plotly (roofline.report.page.train: hover, legend
toggles, offline, the other pages' Content-Security-Policy) beside the step's figures and the
collectives' table. Artists carry gids ("roofline", "roof", "pass-<pass>",
"breakdown", "bar-<which>-<part>", "title") for tests and the SVG.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from roofline.errors import RooflineError
from roofline.report.charts.roofline import decade_ceil, decade_floor, log_axes, new_figure, roof_of
from roofline.report.points import on_chart, point_xy
from roofline.training.analysis import TrainAnalysis
from roofline.training.step import Pass
from roofline.units import format_bytes, format_time

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PASS_COLOUR = {Pass.FORWARD: "#1f77b4", Pass.BACKWARD: "#ff7f0e", Pass.RECOMPUTE: "#9467bd",
               Pass.OPTIMIZER: "#2ca02c"}
PART_COLOUR = {"compute": "#1f77b4", "exposed communication": "#d62728", "pipeline bubble": "0.65",
               "optimizer": "#2ca02c"}


def train_figure(a: TrainAnalysis, *, title: str = "") -> Figure:
    """The two panels of the module docstring."""
    drawn = [x for x in a.placed if on_chart(x.placement) and not x.is_comm]
    if not drawn:
        raise RooflineError("nothing to draw: the step has no kernel with arithmetic")
    roof = roof_of(a.machine, a.dtype)
    fig = new_figure(14.0, 6.6)
    ax = fig.add_axes((0.06, 0.12, 0.50, 0.74), gid="roofline")
    log_axes(ax, "arithmetic intensity I (FLOP/byte)", "attainable performance (FLOP/s)")
    xs = [point_xy(x.placement)[0] for x in drawn]
    ys = [point_xy(x.placement)[1] for x in drawn]
    x_lo = decade_floor(min([*xs, roof.ridge_flop_per_byte]) / 3)
    x_hi = decade_ceil(max([*xs, roof.ridge_flop_per_byte * 10]) * 3)
    y_lo = decade_floor(min([*ys, roof.attainable(x_lo)]) / 2)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, roof.peak_flop_per_s * 4)
    ridge = roof.ridge_flop_per_byte
    ax.plot([x_lo, ridge, x_hi], [roof.attainable(x_lo), roof.peak_flop_per_s, roof.peak_flop_per_s],
            color="#222222", lw=2, gid="roof", label=f"{roof.label} roof")
    total = a.floor.step_s
    m = a.setup.micro_batches
    for pass_, colour in PASS_COLOUR.items():
        pts = [(x, y, k) for x, y, k in zip(xs, ys, drawn, strict=True) if k.kernel.pass_ is pass_]
        if not pts:
            continue
        sizes = [30 + 900 * math.sqrt(k.floor_s * (k.runs_per_micro_batch * m + k.runs_per_step) / total)
                 for _, _, k in pts]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=sizes, color=colour, alpha=0.7, edgecolors="white",
                   linewidths=0.6, label=str(pass_), gid=f"pass-{pass_}", zorder=4)
    legend = ax.legend(loc="lower right", fontsize=8.5, framealpha=0.9)
    legend.set_gid("legend")

    bx = fig.add_axes((0.66, 0.22, 0.31, 0.64), gid="breakdown")
    ends = (("floor", a.floor), ("expected low", a.low), ("expected high", a.high))
    for i, (label, st) in enumerate(ends):
        left = 0.0
        for part, value in (("compute", st.compute_s), ("exposed communication", st.exposed_comm_s),
                            ("pipeline bubble", st.bubble_s), ("optimizer", st.optimizer_s)):
            bx.barh([i], [value], left=left, color=PART_COLOUR[part], gid=f"bar-{label.replace(' ', '-')}-"
                    f"{part.replace(' ', '-')}", label=part if i == 0 else None)
            left += value
        bx.text(left * 1.01, i, f"{format_time(st.step_s)}, MFU {a.mfu(st.step_s):.0%}", va="center", fontsize=8.5)
    bx.set_yticks(range(len(ends)), [e[0] for e in ends])
    bx.invert_yaxis()
    bx.set_xlim(0, a.high.step_s * 1.45)
    bx.set_xlabel("seconds a step")
    bx.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=2, fontsize=8, frameon=False)
    bx.grid(True, axis="x", color="0.9")
    head = title or a.title
    fig.text(0.06, 0.97, head, fontsize=12.5, fontweight="bold", va="top", gid="title")
    s = a.setup
    fig.text(0.06, 0.925, f"{a.dtype.name} · ZeRO {int(s.zero)} · recompute {s.recompute} · {m} micro-batches · "
             f"bubble {a.bubble:.1%} · memory {format_bytes(a.memory.per_device_bytes, binary=True)} a device "
             f"({'fits' if a.memory.fits else 'does not fit'}) · point area: share of the step's floor",
             fontsize=9, color="0.3", va="top", gid="subtitle")
    return fig


__all__ = ["PART_COLOUR", "PASS_COLOUR", "train_figure"]
