"""Notebook methods: `.plot()` (a matplotlib Figure) and `_repr_html_` (the interactive page in an
iframe) on placements, graph analyses and model analyses.

The analyses live below the report layer and must not import it, so the methods are attached here,
once, when `roofline` is imported (`install()`, called by the package's __init__), as pandas
registers its accessors: the arrow points from the report down to the analyses. Drawing imports
matplotlib or plotly only when a method is called.

Layering: a report module; imports roofline.placement, roofline.vocab and roofline.models.analysis
(types only at import time) and roofline.report.outputs and points inside the methods.
"""

from __future__ import annotations

from typing import Any

from roofline.models.analysis import ModelAnalysis
from roofline.placement import GraphAnalysis, Placement
from roofline.vocab import Bound, Plan, bound_class


def model_scenarios(a: ModelAnalysis) -> list[Any]:
    """One chart scenario per fusion plan of a model step, the headline plan first; a step split over
    devices carries one device's share of each (`DeviceShare`, for the page's per-device panel)."""
    from roofline.report.outputs import Scenario

    order = [a.plan, *[p for p in a.plans if p != a.plan]]
    return [Scenario(f"{a.phase} · {p}", a.plans[p], a.phase, p, device=device_share(a, p)) for p in order]


def device_share(a: ModelAnalysis, plan: Plan | None = None) -> Any:
    """One device's share of a split step under `plan` (default: the headline plan): its time by
    bound class and the memory it holds; None for a step on one device."""
    from roofline.report.points import DeviceShare

    if a.split.trivial:
        return None
    g = a.plans[plan or a.plan]
    by_class = dict.fromkeys(tuple(Bound), 0.0)
    for resource, seconds in g.bound_times_s.items():
        by_class[bound_class(resource)] += seconds
    m = a.memory
    return DeviceShare(
        split=str(a.split), system=a.system or a.machine.id, devices=a.split.devices, step_time_s=a.step_time_s(g),
        compute_time_s=by_class[Bound.COMPUTE], memory_time_s=by_class[Bound.MEMORY],
        communication_time_s=by_class[Bound.COMMUNICATION], weights_bytes=m.weights_bytes,
        kv_cache_bytes=m.kv_cache_bytes, workspace_bytes=m.workspace_bytes, usable_bytes=m.usable_bytes,
        stages=a.split.pp, overlap=a.overlap)


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
