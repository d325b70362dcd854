"""Text for a training step (`roofline train`): the kernels by pass, the step, MFU, memory, collectives;
and the derivation (--explain) of every figure with its formula and source.
"""

from __future__ import annotations

from typing import Any

from roofline.training.analysis import CONVENTIONS, TrainAnalysis
from roofline.training.memory import zero_bytes_per_param
from roofline.training.setup import OPTIMIZER_BYTES
from roofline.units import format_bytes, format_flop, format_time

TRAIN_CSV_COLUMNS = ("name", "pass", "scope", "kind", "count", "runs_per_micro_batch", "runs_per_step", "flop",
                     "bytes", "flop_per_byte", "time_s", "bound", "expected_low_s", "expected_high_s")


def _gib(x: float) -> str:
    return format_bytes(x, binary=True)


def csv_rows(a: TrainAnalysis) -> list[dict[str, Any]]:
    return [{**r, "expected_low_s": r["expected_time_s"]["low"], "expected_high_s": r["expected_time_s"]["high"]}
            for r in a.kernel_rows()]


def _pct(x: float) -> str:
    return f"{x:.1%}"


def train_text(a: TrainAnalysis) -> str:
    """The kernels grouped by pass (one row each, their time a step), then the step and its figures."""
    from roofline.report.text.grid import Table
    from roofline.report.text.tables import render

    s, m = a.setup, a.setup.micro_batches
    t = Table(title=a.title, title_justify="left")
    for header, justify in (("pass", "left"), ("kernel", "left"), ("runs/step", "right"), ("FLOPs", "right"),
                            ("bytes", "right"), ("time/step", "right"), ("bound", "left")):
        t.add_column(header, justify=justify)  # type: ignore[arg-type]
    for x in a.placed:
        runs = x.runs_per_micro_batch * m + x.runs_per_step
        t.add_row(str(x.kernel.pass_), x.kernel.name, f"{runs:,.4g}", format_flop(x.placement.flop),
                  format_bytes(x.placement.bytes), format_time(x.floor_s * runs), str(x.placement.bound))
    fl, lo, hi = a.floor, a.low, a.high
    lines = [render(t, drop=("bytes", "FLOPs")), ""]
    lines.append(f"split {s.split} ({s.split.devices} devices{', sequence parallel' if s.sp else ''}), "
                 f"{m} micro-batches of {s.micro_batch} × {s.seq} tokens per data-parallel rank, ZeRO {int(s.zero)}, "
                 f"recompute {s.recompute}, {s.optimizer}, {s.precision}{', overlap' if s.overlap else ''}")
    lines.append(f"step time: floor {format_time(fl.step_s)}, expected {format_time(lo.step_s)}–"
                 f"{format_time(hi.step_s)} ({a.times.origin})")
    lines.append(f"  compute {format_time(fl.compute_s)} + exposed communication {format_time(fl.exposed_comm_s)} + "
                 f"pipeline bubble {format_time(fl.bubble_s)} ((p − 1)/(m + p − 1) = {a.bubble:.1%}) + optimizer "
                 f"{format_time(fl.optimizer_s)}")
    lines.append(f"tokens/s: {a.tokens_per_s:,.0f} (floor), {s.tokens_per_step / hi.step_s:,.0f}–"
                 f"{s.tokens_per_step / lo.step_s:,.0f} expected")
    lines.append(f"MFU: {_pct(a.mfu(fl.step_s))} at the floor, {_pct(a.mfu(hi.step_s))}–{_pct(a.mfu(lo.step_s))} "
                 f"expected; HFU {_pct(a.hfu(fl.step_s))} at the floor")
    lines.append(f"  model FLOPs a token {format_flop(a.model_flop_per_token)} ({CONVENTIONS['mfu']}); hardware "
                 f"{format_flop(a.hardware_flop_per_token)} a token; peak {format_flop(a.peak_flop_per_s)}/s "
                 f"{a.dtype.name} a device")
    lines.append(f"memory per device: {a.memory.summary()}")
    if a.memory.scores_note:
        lines.append(f"  {a.memory.scores_note}")
    run = a.training_run()
    if run is not None:
        days = run["time_s"]["floor"] / 86400
        low, high = run["time_s"]["expected"]["low"] / 86400, run["time_s"]["expected"]["high"] / 86400
        text = (f"to train {run['tokens']:.3g} tokens ({run['model_flop']:.3g} model FLOPs): {days:,.1f} days at the "
                f"floor, {low:,.1f}–{high:,.1f} expected")
        if "cost" in run:
            c = run["cost"]
            text += (f"; ${c['floor']:,.0f} at the floor, ${c['expected']['low']:,.0f}–${c['expected']['high']:,.0f} "
                     f"expected at ${c['price_per_device_hour']:g} a device-hour")
        lines.append(text)
    return "\n".join(lines)


def train_explain(a: TrainAnalysis) -> str:
    """Every figure of the step derived, with the numbers put in and the source named."""
    s, cfg = a.setup, a.setup.config
    sp, m, p = s.split, s.micro_batches, s.split.pp
    fl = a.floor
    n = cfg.matmul_params
    att = a.model_flop_per_token - 6.0 * n
    mem = a.memory
    per = zero_bytes_per_param(s.zero, sp.data_ranks, OPTIMIZER_BYTES[s.optimizer])
    out = [a.title, ""]
    out.append("model FLOPs a token (PaLM, Chowdhery et al. 2022, Appendix B): 6·N + 12·L·h·s")
    out.append(f"  N = {n:,} parameters a token multiplies (no input embedding); 6·N = {6.0 * n:.4g}")
    out.append(f"  attention 3 · 2·H·(d_qk + d_v) · Σ_layers T_attended = {att:.4g} (12·L·h·s = "
               f"12·{cfg.num_layers}·{cfg.hidden_size}·{s.seq} = {12.0 * cfg.num_layers * cfg.hidden_size * s.seq:.4g} "
               "for a Llama-shaped model)")
    out.append(f"  = {a.model_flop_per_token:.4g} FLOPs a token")
    out.append("")
    out.append(f"micro-batches m = B / (dp · b) = {s.global_batch} / ({sp.dp} · {s.micro_batch}) = {m}")
    if s.virtual_stages > 1:
        out.append(f"bubble (interleaved 1F1B, Narayanan et al. 2021) (p − 1)/(v·m + p − 1) = ({p} − 1)/"
                   f"({s.virtual_stages}·{m} + {p} − 1) = {a.bubble:.4f}")
    else:
        out.append(f"bubble (1F1B, Narayanan et al. 2021) (p − 1)/(m + p − 1) = ({p} − 1)/({m} + {p} − 1) = "
                   f"{a.bubble:.4f}")
    out.append(f"one micro-batch on the fullest stage: {format_time(fl.micro_batch_s)} "
               f"({'max' if s.overlap else 'sum'} of compute and its collectives)")
    v = s.virtual_stages
    bubble = f"({p} − 1)/{v}" if v > 1 else f"({p} − 1)"
    out.append(f"step = m·t_mb + (p − 1)/v·t_mb + exposed data-parallel communication + optimizer = {m}·"
               f"{format_time(fl.micro_batch_s)} + {bubble}·{format_time(fl.micro_batch_s)} + "
               f"{format_time(fl.exposed_dp_s)} + {format_time(fl.optimizer_s)} = {format_time(fl.step_s)}")
    out.append(f"MFU = {a.model_flop_per_token:.4g} · {s.tokens_per_step:,} tokens / ({format_time(fl.step_s)} · "
               f"{sp.devices} devices · {a.peak_flop_per_s:.4g} FLOP/s) = {a.mfu(fl.step_s):.2%}")
    out.append(f"HFU = {a.hardware_flop_per_step:.4g} FLOPs a step / (step · devices · peak) = {a.hfu(fl.step_s):.2%}")
    out.append("")
    out.append("memory per device (ZeRO, Rajbhandari et al. 2020: 2 + 2 + K bytes a parameter; K = "
               f"{OPTIMIZER_BYTES[s.optimizer]:g} for {s.optimizer}; stage {int(s.zero)} over dp·cp = {sp.data_ranks})")
    out.append(f"  Ψ = {mem.params:,.0f} parameters on this device; weights {per['weights']:.4g} B/param = "
               f"{_gib(mem.weights_bytes)}, gradients {per['gradients']:.4g} = {_gib(mem.gradients_bytes)}, "
               f"optimizer {per['optimizer']:.4g} = {_gib(mem.optimizer_bytes)}")
    out.append(f"  activations (Korthikanti et al. 2022, {s.recompute}{', sequence parallel' if s.sp else ''}): "
               f"{_gib(mem.activation_layer_bytes)} a layer and micro-batch × ⌈L/pp⌉ layers × {mem.in_flight} in "
               f"flight (+ the last stage's FP32 logits {_gib(mem.logits_bytes)}) = {_gib(mem.activations_bytes)}")
    if mem.scores_note:
        out.append(f"  {mem.scores_note}")
    out.append(f"  {mem.summary()}")
    out.append("")
    out.append("conventions:")
    out += [f"  {k}: {v}" for k, v in CONVENTIONS.items()]
    out.append("")
    out.append("kernels (per run; runs a step = runs a micro-batch × m, or once a step):")
    for x in a.placed:
        k = x.kernel.kernel
        formula = k.formula or "; ".join(op.kind for op in k.ops)
        out.append(f"  [{x.kernel.pass_}] {k.name}: {format_flop(x.placement.flop)}, {format_bytes(x.placement.bytes)}"
                   f" → {format_time(x.floor_s)} ({x.placement.bound}); {formula}")
    return "\n".join(out)


PLAN_CSV_COLUMNS = ("rank", "split", "tp", "cp", "pp", "dp", "ep", "devices", "fits", "memory_bytes_per_device",
                    "micro_batches", "floor_s", "expected_low_s", "expected_high_s", "mfu_floor", "pipeline_bubble",
                    "exposed_communication_s", "reason")


def plan_rows(found: Any) -> list[dict[str, Any]]:
    """The search's rows flattened for CSV."""
    out = []
    for r in found.rows:
        d = r.to_dict()
        st = d.pop("step_time_s", None)
        mfu = d.pop("mfu", None)
        if st is not None:
            d.update({"floor_s": st["floor"], "expected_low_s": st["expected"]["low"],
                      "expected_high_s": st["expected"]["high"], "mfu_floor": mfu["floor"] if mfu else None})
        out.append(d)
    return out


def plan_text(found: Any) -> str:
    """The candidates ranked (winner first), then the winner and its `roofline train` line."""
    from roofline.report.text.grid import Table
    from roofline.report.text.tables import render

    s = found.setup
    t = Table(title=(f"{s.config.name} training, {s.global_batch} × {s.seq} tokens a step, on {found.devices} devices "
                     f"of {found.system}: {len(found.rows)} valid splits, ranked by expected step time"),
              title_justify="left")
    for header, justify in (("#", "right"), ("split", "left"), ("memory/device", "right"), ("fits", "left"),
                            ("expected step", "right"), ("MFU (floor)", "right"), ("bubble", "right"),
                            ("why it loses", "left")):
        t.add_column(header, justify=justify)  # type: ignore[arg-type]
    for r in found.rows:
        a = r.analysis
        exp = "—" if a is None else f"{format_time(a.low.step_s)}–{format_time(a.high.step_s)}"
        t.add_row("" if r.rank is None else str(r.rank), str(r.split), _gib(r.memory.per_device_bytes),
                  {True: "yes", False: "no", None: "?"}[r.memory.fits], exp,
                  "—" if a is None else f"{a.mfu(a.floor.step_s):.1%}", "—" if a is None else f"{a.bubble:.1%}",
                  r.reason)
    lines = [render(t, drop=("MFU (floor)", "bubble")), ""]
    w = found.winner
    if w is not None and w.analysis is not None:
        a = w.analysis
        lines.append(f"best: {w.split} ({w.split.flags}): {format_time(a.low.step_s)}–{format_time(a.high.step_s)} a "
                     f"step expected (floor {format_time(a.floor.step_s)}), MFU {a.mfu(a.high.step_s):.1%}–"
                     f"{a.mfu(a.low.step_s):.1%} expected, {_gib(w.memory.per_device_bytes)} a device")
        lines.append(f"  its kernels: roofline train {s.config.name} --machine {found.system} --seq {s.seq} "
                     f"--global-batch {s.global_batch} {w.split.flags}" + (f" --zero {int(s.zero)}" if s.zero else ""))
    lines.append("memory a device: model states (ZeRO) + activations (Korthikanti et al. 2022) + workspace; a split "
                 "whose memory alone exceeds the usable share is not built")
    return "\n".join(lines)


__all__ = ["PLAN_CSV_COLUMNS", "TRAIN_CSV_COLUMNS", "csv_rows", "plan_rows", "plan_text", "train_explain",
           "train_text"]
