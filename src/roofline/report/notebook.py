"""Notebook methods: `.plot()` (a matplotlib Figure) and `_repr_html_` (the interactive page in an
iframe) on placements, graph analyses and model analyses.

The methods are `roofline.placement.Drawable`'s, the base of Placement, GraphAnalysis and ModelAnalysis;
the analyses live below the report room and never import it, so they find this module as pandas finds
its plotting backend: by the entry point the package declares (pyproject.toml, group
`roofline.notebook`, name `draw`), when a method is first called. This module's `plot` and `html`
are what they call. Drawing imports matplotlib or plotly only then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roofline.placement import Drawable, GraphAnalysis, Placement
from roofline.vocab import Bound, Plan, bound_class

if TYPE_CHECKING:
    from roofline.models.analysis import ModelAnalysis


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


def _scenarios(obj: Drawable) -> tuple[list[Any], str]:
    """What to draw for a placement, a graph analysis or a model step, and its title."""
    from roofline.models.analysis import ModelAnalysis  # only when drawing: the models stay unloaded

    if isinstance(obj, ModelAnalysis):
        return model_scenarios(obj), obj.title
    if isinstance(obj, Placement):
        return _graph_scenarios(_alone(obj)), ""
    if isinstance(obj, GraphAnalysis):
        return _graph_scenarios(obj), ""
    raise TypeError(f"nothing to draw for a {type(obj).__name__}")


def plot(obj: Drawable) -> Any:
    """The roofline chart of a placement, a graph analysis or a model step (a matplotlib Figure)."""
    from roofline.report.outputs import model_figure

    scenarios, title = _scenarios(obj)
    return model_figure(scenarios, title=title)


def html(obj: Drawable) -> str:
    """The interactive page of a placement, a graph analysis or a model step in an iframe, for a notebook."""
    from roofline.report.outputs import notebook_html

    scenarios, title = _scenarios(obj)
    return notebook_html(scenarios, title=title)
