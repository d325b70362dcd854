"""Charts of `roofline validate`: measured time against our floor, one panel per kind family, log
axes, the line measured = floor drawn (a point below it is faster than the floor)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from roofline.calibration.validate import Group


def _families(groups: Sequence[Group]) -> dict[str, list[Group]]:
    out: dict[str, list[Group]] = {}
    for g in groups:
        out.setdefault(g.kind.split(".")[0], []).append(g)
    return out


def validate_png(groups: Sequence[Group]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = _families(groups)
    fig, axes = plt.subplots(1, len(fams), figsize=(5.5 * len(fams), 5), squeeze=False)
    for ax, (fam, gs) in zip(axes[0], fams.items(), strict=True):
        lo, hi = 1e30, 0.0
        for g in gs:
            xs = [p.floor_s for p in g.points]
            ys = [p.measured_s for p in g.points]
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
            ax.scatter(xs, ys, s=3, alpha=0.4, label=f"{g.machine} {g.engine} {g.kind.split('.', 1)[-1]}")
        ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="measured = floor")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("our floor (s)")
        ax.set_ylabel("measured (s)")
        ax.set_title(fam)
        ax.legend(fontsize=6, markerscale=3)
    fig.suptitle("Measured kernels (aiconfigurator-core tables) against the roofline floor")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def validate_html(groups: Sequence[Group]) -> str:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fams = _families(groups)
    fig = make_subplots(rows=1, cols=len(fams), subplot_titles=list(fams))
    for i, gs in enumerate(fams.values(), start=1):
        for g in gs:
            fig.add_trace(go.Scattergl(x=[p.floor_s for p in g.points], y=[p.measured_s for p in g.points],
                                       mode="markers", marker={"size": 3}, text=[p.name for p in g.points],
                                       name=f"{g.machine} {g.engine} {g.kind}"), row=1, col=i)
        fig.update_xaxes(type="log", title_text="our floor (s)", row=1, col=i)
        fig.update_yaxes(type="log", title_text="measured (s)", row=1, col=i)
    fig.update_layout(title="Measured kernels against the roofline floor (log axes)")
    return str(fig.to_html(include_plotlyjs=True, full_html=True))


__all__ = ["validate_html", "validate_png"]
