"""Tracing PyTorch programs onto the graph the analytic models produce.

    with roofline.trace(model) as t:      # the facade's name for roofline.tracing.trace
        model(x)
    t.analyze("h100")

recorder.py records the ATen ops a program runs (a TorchDispatchMode; capture.py is its hot path,
each call written down while the program runs, replayed into the graph when the block ends) and
turns each call into a shape-only `OpCall`; registry.py holds the one registry of FLOP formulas, keyed by ATen op name,
that counts it; analysis.py is the torch-free `Trace` and what is read off it; script.py runs a
script as `python script.py` would, under the recorder or (profile.py) torch.profiler; kineto.py and
ncu.py read profiler exports. Importing this package does not import torch. (The room is `tracing`, not `trace`,
so that `roofline.trace`, the function, and the room never share a name.)
"""

from roofline.tracing.analysis import Trace, bytes_by_kind, flop_by_kind
from roofline.tracing.recorder import trace, trace_call
from roofline.tracing.registry import FORMULAS, ArgShape, Formula, OpCall, Registry, generic, register, torch_dtype
from roofline.tracing.script import trace_script

__all__ = ["FORMULAS", "ArgShape", "Formula", "OpCall", "Registry", "Trace", "bytes_by_kind", "flop_by_kind",
           "generic", "register", "torch_dtype", "trace", "trace_call", "trace_script"]
