"""Notebook methods: `.plot()` (a matplotlib Figure) and `_repr_html_` (the interactive page in an
iframe) on placements, graph analyses and model analyses.

The analyses live below the report layer and must not import it, so the methods are attached here,
once, when `roofline` is imported (`install()`, called by the package's __init__), as pandas
registers its accessors: the arrow points from the report down to the analyses. Drawing imports
matplotlib or plotly only when a method is called.

Layering: a report module; imports roofline.placement and roofline.models.analysis (types only at
import time) and roofline.report.outputs inside the methods.
"""

from __future__ import annotations

from typing import Any

from roofline.models.analysis import ModelAnalysis
from roofline.placement import GraphAnalysis, Placement
from roofline.vocab import Plan


def model_scenarios(a: ModelAnalysis) -> list[Any]:
    """One chart scenario per fusion plan of a model step, the headline plan first."""
    from roofline.report.outputs import Scenario

    order = [a.plan, *[p for p in a.plans if p != a.plan]]
    return [Scenario(f"{a.phase} · {p}", a.plans[p], a.phase, p) for p in order]


def _graph_scenarios(g: GraphAnalysis) -> list[Any]:
    from roofline.report.outputs import Scenario

    return [Scenario(g.plan, g, plan=g.plan)]


def _alone(p: Placement) -> GraphAnalysis:
    return GraphAnalysis((p,), Plan.NONE, p.machine, p.dtype)


def _graph_plot(self: GraphAnalysis) -> Any:
    """The roofline chart of these kernels (a matplotlib Figure)."""
    from roofline.report.outputs import model_figure

    return model_figure(_graph_scenarios(self))


def _graph_html(self: GraphAnalysis) -> str:
    from roofline.report.outputs import notebook_html

    return notebook_html(_graph_scenarios(self))


def _placement_plot(self: Placement) -> Any:
    """This kernel on its machine's roofline (a matplotlib Figure)."""
    return _graph_plot(_alone(self))


def _placement_html(self: Placement) -> str:
    return _graph_html(_alone(self))


def _model_plot(self: ModelAnalysis) -> Any:
    """The roofline chart of every kernel of the step (a matplotlib Figure)."""
    from roofline.report.outputs import model_figure

    return model_figure(model_scenarios(self), title=self.title)


def _model_html(self: ModelAnalysis) -> str:
    from roofline.report.outputs import notebook_html

    return notebook_html(model_scenarios(self), title=self.title)


def install() -> None:
    """Attach the methods (idempotent)."""
    methods: tuple[tuple[type, Any, Any], ...] = (
        (Placement, _placement_plot, _placement_html), (GraphAnalysis, _graph_plot, _graph_html),
        (ModelAnalysis, _model_plot, _model_html))
    for cls, plot, html in methods:
        setattr(cls, "plot", plot)  # noqa: B010 (attached from above, see the module docstring)
        setattr(cls, "_repr_html_", html)  # noqa: B010
