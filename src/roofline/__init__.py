"""roofline: is this kernel waiting on the arithmetic units or on memory, and how fast can it go?

The facade: the names most users need, from the rooms below (README "Architecture"). The analytic
core (vocab, units, dtypes, hardware, graph, kernels, placement) imports no torch, numpy or plotting
library. Placements and analyses draw themselves in a notebook through roofline.report.notebook, found
by the entry point the package declares (roofline.placement.Drawable).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from roofline.dtypes import DType, get_dtype
    from roofline.errors import RooflineError
    from roofline.graph import Cost, FusionPlan, Graph, Kernel, Op, Tensor
    from roofline.hardware import Machine, get_machine, load_machine_file
    from roofline.placement import (
        GraphAnalysis,
        Placement,
        analyze_graph,
        crossover,
        kernel_time,
        place,
        place_flop_bytes,
    )
    from roofline.tracing import Trace

# Each name of the facade and the room it comes from, imported on first use (PEP 562), so that
# `import roofline.cli` (the command's start) loads only what the command asks for.
_FACADE = {
    "DType": "dtypes", "get_dtype": "dtypes", "RooflineError": "errors",
    "Cost": "graph", "FusionPlan": "graph", "Graph": "graph", "Kernel": "graph", "Op": "graph", "Tensor": "graph",
    "Machine": "hardware", "get_machine": "hardware", "load_machine_file": "hardware",
    "GraphAnalysis": "placement", "Placement": "placement", "analyze_graph": "placement", "crossover": "placement",
    "kernel_time": "placement", "place": "placement", "place_flop_bytes": "placement",
}


def __getattr__(name: str) -> Any:
    if name in _FACADE:
        value = getattr(import_module(f"roofline.{_FACADE[name]}"), name)  # the facade stands above every room
        globals()[name] = value  # once: later lookups find it without this hook
        return value
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")


__version__ = "0.1.0"


def trace(module: Any = None, **options: Any) -> "AbstractContextManager[Trace]":
    """`with roofline.trace(model) as t: model(x)`: roofline.tracing.trace, loaded when first called."""
    from roofline.tracing import trace as _trace

    return _trace(module, **options)

__all__ = ["Cost", "DType", "FusionPlan", "Graph", "GraphAnalysis", "Kernel", "Machine", "Op", "Placement",
           "RooflineError", "Tensor", "analyze_graph", "crossover", "get_dtype", "get_machine", "kernel_time",
           "load_machine_file", "place", "place_flop_bytes", "trace"]
