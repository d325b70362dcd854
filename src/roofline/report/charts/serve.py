"""The serving chart: throughput against inter-token latency over batch, one point per batch.

What it shows, from a `ServingReport` (roofline.serving):
    x = ITL (mean over the generation, s), log scale
    y = output tokens/s over every replica (system), log scale
Each batch of the curve (1, 2, 4, ... 1024 and on to the memory's largest batch, or multiples of the split's
batch unit) is one point at (ITL floor, throughput ceiling): the roofline. The line through them is that
floor; the shaded region
is the expected band, from (ITL low, tokens/s high) to (ITL high, tokens/s low) at each batch. The
knee (the batch past which a doubling gains < 10% of tokens/s) is ringed; the memory limit (the
largest batch that fits) is a dashed vertical line at its ITL, and the batches past it are hollow grey
points, "does not fit"; the ITL target is a vertical line with its value; the report's batch a star.

Artists carry gids ("floor", "band", "batch-<b>", "batch-label-<i>", "knee", "knee-label",
"memory-limit", "memory-limit-label", "does-not-fit", "itl-slo", "itl-slo-label", "chosen", "title",
"subtitle") so that tests and the SVG can find them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from roofline.errors import RooflineError
from roofline.report.charts.labels import literal_text, place_labels, text_box
from roofline.report.charts.roofline import log_axes, new_figure
from roofline.serving import KNEE_GAIN, ServingReport
from roofline.units import format_time

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FITS_COLOUR = "#1f77b4"
NO_FIT_COLOUR = "0.6"
BAND_COLOUR = "#1f77b4"
KNEE_COLOUR = "#d62728"
SLO_COLOUR = "#2ca02c"
MEMORY_COLOUR = "0.35"
CHOSEN_COLOUR = "#ff7f0e"


def memory_limit_itl(r: ServingReport) -> float | None:
    """The ITL floor (mean over the generation) at the largest batch that fits, or None when memory is
    unbounded (no capacity) or the limit lies past the curve's largest batch."""
    if r.max_batch_memory is None or not r.curve or r.max_batch_memory >= r.curve[-1].batch:
        return None
    if r.decoder is not None:
        return r.itl_at(r.max_batch_memory)[0].floor
    # without the step model: between the two curve batches around it, linear in log-log
    below = max((p for p in r.curve if p.batch <= r.max_batch_memory), key=lambda p: p.batch)
    above = min((p for p in r.curve if p.batch > r.max_batch_memory), key=lambda p: p.batch)
    f = math.log(r.max_batch_memory / below.batch) / math.log(above.batch / below.batch)
    return math.exp(math.log(below.itl.floor) + f * math.log(above.itl.floor / below.itl.floor))


def split_label(r: ServingReport) -> str:
    """'TP 8 of dgx-h100' or the machine's name for one device."""
    return r.machine.name if r.split.trivial else f"{r.split} of {r.system or r.machine.name}"


@literal_text
def serve_figure(r: ServingReport, *, title: str = "") -> Figure:
    """Throughput (tokens/s, system) against ITL over the report's batch curve, with the floor, the
    expected band, the knee, the memory limit and the ITL target."""
    if not r.curve:
        raise RooflineError("nothing to draw: the serving report has no batch curve")
    pts = list(r.curve)
    xs = [p.itl.floor for p in pts]
    ys = [p.throughput.ceiling for p in pts]
    mem_x = memory_limit_itl(r)

    fig = new_figure(11.0, 7.6)
    ax = fig.add_axes((0.08, 0.21, 0.88, 0.66), gid="serving")
    log_axes(ax, "inter-token latency, ITL (mean over the generation)",
             "throughput (output tokens/s, every replica)", x_unit="s")
    from matplotlib.ticker import FuncFormatter, LogLocator

    # ITL spans a decade or two: label 1, 2 and 5 of each decade, as times
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_time(v) if v > 0 else ""))
    x_all = [*xs, *(p.itl.high for p in pts), *(p.itl.low for p in pts)]
    x_all += [v for v in (r.itl_slo_s, mem_x, r.itl_mean.floor) if v is not None]
    y_all = [*ys, *(p.throughput.low for p in pts), r.throughput.ceiling]
    ax.set_xlim(min(x_all) / 1.6, max(x_all) * 1.6)
    ax.set_ylim(min(y_all) / 2.5, max(y_all) * 3.0)

    # the expected band: from (ITL low, tokens/s high) along the batches and back by (ITL high, tokens/s low)
    poly = [(p.itl.low, p.throughput.high) for p in pts] + [(p.itl.high, p.throughput.low) for p in reversed(pts)]
    eff = r.efficiency
    ax.fill([x for x, _ in poly], [y for _, y in poly], color=BAND_COLOUR, alpha=0.13, lw=0, gid="band", zorder=1,
            label=f"expected band ({eff.label})")
    ax.plot(xs, ys, color=FITS_COLOUR, lw=1.6, gid="floor", zorder=3,
            label="roofline: ITL floor, tokens/s ceiling")

    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    y_lo, y_hi = ax.get_ylim()
    obstacles = []
    if r.itl_slo_s is not None:
        ax.axvline(r.itl_slo_s, color=SLO_COLOUR, lw=1.6, gid="itl-slo", zorder=2)
        slo_text = f"ITL SLO {format_time(r.itl_slo_s)}"
        if r.max_batch_slo is not None:
            slo_text += f"\nlargest batch meeting it: {r.max_batch_slo}"
        t = ax.text(r.itl_slo_s * 1.06, y_hi / 1.15, slo_text, ha="left", va="top", fontsize=8.5, color=SLO_COLOUR,
                    fontweight="bold", gid="itl-slo-label", zorder=6,
                    bbox={"boxstyle": "square,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.9})
        obstacles.append(text_box(fig, t))
    if mem_x is not None:
        ax.axvline(mem_x, color=MEMORY_COLOUR, lw=1.3, ls="--", gid="memory-limit", zorder=2)
        t = ax.text(mem_x / 1.06, y_lo * 1.15, f"memory limit: batch {r.max_batch_memory}\n"
                    f"(ITL {format_time(mem_x)})", ha="right", va="bottom", fontsize=8.5, color=MEMORY_COLOUR,
                    gid="memory-limit-label", zorder=6,
                    bbox={"boxstyle": "square,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.9})
        obstacles.append(text_box(fig, t))

    # one point per batch: filled where it fits, hollow grey past the memory limit
    for p, x, y in zip(pts, xs, ys, strict=True):
        if p.fits is False:
            ax.plot([x], [y], marker="o", ms=8, mfc="white", mec=NO_FIT_COLOUR, mew=1.6, ls="none",
                    gid=f"batch-{p.batch}", zorder=5)
        else:
            ax.plot([x], [y], marker="o", ms=8, mfc=FITS_COLOUR, mec="white", mew=0.8, ls="none",
                    gid=f"batch-{p.batch}", zorder=5)
    no_fit = [(x, y) for p, x, y in zip(pts, xs, ys, strict=True) if p.fits is False]
    if no_fit:
        # legend entries for both kinds of point
        ax.plot([], [], marker="o", ms=8, mfc=FITS_COLOUR, mec="white", ls="none", label="a batch that fits")
        ax.plot([], [], marker="o", ms=8, mfc="white", mec=NO_FIT_COLOUR, mew=1.6, ls="none",
                label="does not fit in memory")
    if r.knee_batch is not None:
        k = next(i for i, p in enumerate(pts) if p.batch == r.knee_batch)
        ax.plot([xs[k]], [ys[k]], marker="o", ms=17, mfc="none", mec=KNEE_COLOUR, mew=2.0, ls="none", gid="knee",
                zorder=6, label=f"knee: batch {r.knee_batch} (doubling it gains < {KNEE_GAIN:.0%})")
    cx, cy = r.itl_mean.floor, r.throughput.ceiling  # the report's batch
    ax.plot([cx], [cy], marker="*", ms=15, mfc=CHOSEN_COLOUR, mec="white", mew=0.8, ls="none", gid="chosen",
            zorder=7, label=f"batch {r.batch} ({r.batch_chosen.split(' (')[0]}): {format_time(cx)}, "
                            f"{cy:,.0f} tokens/s")

    # the key under the plot: nothing in the axes hides behind it
    legend = ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.09), ncols=2, fontsize=8.5, frameon=False)
    legend.set_gid("legend")
    for line in ax.get_lines():
        if line.get_gid() in ("chosen", "knee"):
            obstacles.append(line.get_window_extent(renderer))
    place_labels(fig, ax, list(zip(xs, ys, strict=True)), [str(p.batch) for p in pts],
                 [NO_FIT_COLOUR if p.fits is False else FITS_COLOUR for p in pts], obstacles,
                 gid_prefix="batch-label")
    if no_fit:
        fx, fy = no_fit[0]
        ax.annotate("does not fit", xy=(fx, fy), xytext=(14, -22), textcoords="offset points", ha="left", va="top",
                    fontsize=8.5, color="0.4", fontstyle="italic", gid="does-not-fit", zorder=6,
                    arrowprops={"arrowstyle": "-", "lw": 0.6, "color": "0.5"})

    head = title or f"{r.config.name} serving on {split_label(r)}: throughput against inter-token latency"
    fig.text(0.08, 0.975, head, fontsize=13, fontweight="bold", va="top", gid="title")
    b0, b1 = pts[0].batch, pts[-1].batch
    sub = (f"prompt {r.prompt}, output {r.output} tokens · {r.dtype.name} · plan {r.plan} · one point per batch "
           f"{b0}–{b1} · the line is the roofline (ITL floor, tokens/s ceiling); the shaded band is the expected "
           f"range")
    if r.max_batch_memory is not None and mem_x is None:
        sub += f" · every batch fits (memory allows {r.max_batch_memory})"
    fig.text(0.08, 0.94, sub, fontsize=9, color="0.3", va="top", wrap=True, gid="subtitle")
    return fig


__all__ = ["memory_limit_itl", "serve_figure", "split_label"]
