"""The trace report: what a traced program ran, placed on a machine, with the roofs and conventions named.

    title      the script, ops and kernels, the machine (name and id), the plan
    table      every kernel as it ran (roofline.report.text.tables), or measured against its floor (--time)
    roofs      the dtypes whose roofs the FLOPs were placed on: each matmul on its own operands' dtype
               (roofline.tracing.own_roofs), fp32 without a matrix peak on the FP32 cores
    FLOPs      by op kind; the attention convention (roofline.tracing.registry.ATTENTION_CONVENTION)
    unknown    ATen ops without a FLOP formula (bytes only)
"""

from __future__ import annotations

from typing import Any

from roofline.placement import GraphAnalysis
from roofline.tracing.analysis import Trace, roof_dtypes
from roofline.tracing.registry import ATTENTION_CONVENTION
from roofline.units import format_flop, format_flop_per_s
from roofline.vocab import Unit


def roofs_line(analysis: GraphAnalysis, dtype_given: bool = False) -> str:
    """The dtypes whose roofs the FLOPs sit on, each with its FLOPs and its peak, and why there."""
    m = analysis.machine
    parts = []
    for name, flop in sorted(roof_dtypes(analysis).items(), key=lambda kv: -kv[1]):
        dt = name.split(" ")[0]
        vector = name.endswith("(vector cores)")
        peak = (m.peak_flop_per_s(dt, Unit.VECTOR) if vector or not m.has_peak(dt)
                else m.peak_flop_per_s(dt, Unit.MATRIX))
        parts.append(f"{name} {format_flop(flop)} at {format_flop_per_s(peak)}")
    how = (f"every matmul on the {analysis.dtype.name} roof (--dtype)" if dtype_given
           else "each matmul on its operands' dtype (roofline.tracing.own_roofs)")
    ridge = (f"each kernel's dtype, ridge and % of peak are its own roof's (the {analysis.dtype.name} matrix peak "
             "for the headline)" if not dtype_given else f"ridge and % of peak against the {analysis.dtype.name} "
             "matrix peak")
    return f"roofs on {m.name} ({m.id}): {', '.join(parts) or 'no matrix FLOPs'}; {how}; {ridge}"


def trace_title(script: str, t: Trace, analysis: GraphAnalysis) -> str:
    dtypes = ", ".join(roof_dtypes(analysis)) or analysis.dtype.name
    return (f"{script} traced: {len(t.ops)} ops, {len(analysis.placements)} kernels on {analysis.machine.name} "
            f"({analysis.machine.id}), {dtypes}, plan {analysis.plan}")


def trace_text(script: str, t: Trace, analysis: GraphAnalysis, timed: bool = False,
               dtype_given: bool = False) -> str:
    """The whole report as text; `dtype_given`: --dtype put every matmul on one roof."""
    from roofline.report.text.tables import analysis_text

    title = trace_title(script, t, analysis)
    lines: list[str] = []
    if timed:
        from roofline.measure.accuracy import Accuracy
        from roofline.report.text.accuracy import accuracy_table

        lines.append(accuracy_table(analysis.placements, title=title))
        lines += Accuracy.of(analysis.placements).lines()
        lines.append(analysis_text(analysis, title).splitlines()[-1])
    else:
        lines.append(analysis_text(analysis, title))
    lines.append(roofs_line(analysis, dtype_given))
    kinds = sorted(t.flop_by_kind().items(), key=lambda kv: -kv[1])
    lines.append("FLOPs by kind: " + ", ".join(f"{k} {format_flop(v)}" for k, v in kinds if v))
    if any(k.startswith("attention") for k, v in kinds if v):
        lines.append(ATTENTION_CONVENTION)
    if t.unknown:
        lines.append("no FLOP formula (bytes only): " + ", ".join(f"aten::{k} ×{n}" for k, n in t.unknown.items()))
    if t.initialisation:
        lines.append("left out, building the model's weights outside any forward (torch.nn.init's fills): "
                     + ", ".join(f"aten::{k} ×{n}" for k, n in t.initialisation.items()))
    return "\n".join(lines)


def trace_dict(script: str, t: Trace, analysis: GraphAnalysis) -> dict[str, Any]:
    """The report as JSON: the analysis, the machine's name, the roofs' dtypes, FLOPs by kind, conventions."""
    d = analysis.to_dict()
    d.update({"script": script, "machine_name": analysis.machine.name, "roof_dtypes": roof_dtypes(analysis),
              "flop_by_kind": t.flop_by_kind(), "unknown_ops": dict(t.unknown), "not_counted": dict(t.errors),
              "left_out_initialisation": dict(t.initialisation),
              "conventions": {"attention": ATTENTION_CONVENTION}})
    return d


__all__ = ["roofs_line", "trace_dict", "trace_text", "trace_title"]
