"""Text for transformer steps, sweeps and comparisons: the step's table and totals, and row tables/CSV.

Layering: a report module; imports roofline.models, roofline.units and roofline.vocab; rich inside
the functions.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from typing import Any

from roofline.models.memory import gib
from roofline.report.text import placements_table, render
from roofline.units import format_bytes, format_count, format_flop, format_intensity, format_time
from roofline.vocab import Phase, Plan, Role

KERNEL_CSV_COLUMNS = ("name", "kind", "count", "flop", "bytes", "flop_per_byte", "bound", "bound_class", "time_s",
                      "total_time_s", "share", "compute_time_s", "memory_time_s", "attainable_flop_per_s",
                      "ridge_flop_per_byte", "machine", "dtype")


def rows_table(rows: list[dict[str, Any]], columns: Sequence[tuple[str, str, Callable[[Any], str]]], title: str) -> str:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for _, header, _fmt in columns:
        t.add_column(header, justify="left" if header in ("model", "machine", "bound", "dtypes") else "right")
    for r in rows:
        t.add_row(*[fmt(r.get(key)) for key, _h, fmt in columns])
    return render(t, width=220)


def rows_csv(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    return buf.getvalue()


def model_text(a: Any) -> str:
    from roofline.units import format_bytes, format_count, format_flop, format_intensity, format_time

    cfg, dt = a.config, a.model.dtypes
    what = "context" if a.phase == Phase.DECODE else "prompt"
    lines = [f"{cfg.name} ({cfg.architecture}) {a.phase}: batch {a.batch}, {what} {a.seq}, on {a.machine.name}",
             f"dtypes: compute {a.dtype.name}, weights {dt.weights.name}, KV cache {dt.kv_cache.name}, "
             f"activations {dt.activations.name}",
             f"params: {format_count(cfg.total_params)} total, {format_count(cfg.active_params)} active; "
             f"KV cache {a.kv_cache_bytes_per_token:,.0f} B "
             f"({format_bytes(a.kv_cache_bytes_per_token, 4, binary=True)}) per token"
             + (f"; {a.model.experts_hit} of {cfg.num_experts} experts hit per MoE layer" if cfg.is_moe else ""),
             ""]
    lines.append(placements_table(a.placements, title=f"kernels, plan {a.plan} (× = layers that run it)"))
    roles = a.bytes_by_role()
    lines.append("")
    lines.append(f"total: {format_flop(a.flop)}, {format_bytes(a.bytes)} (weights {format_bytes(roles[Role.WEIGHT])}, "
                 f"KV cache {format_bytes(roles[Role.KV_CACHE])}, activations {format_bytes(roles[Role.ACTIVATION])})")
    lines.append(f"       {format_intensity(a.flop_per_byte, 4)} vs ridge {format_intensity(a.ridge_flop_per_byte, 4)}"
                 f" → {a.bound_class}-bound; time floor {format_time(a.time_s)}, {a.tokens_per_s:,.0f} tokens/s; "
                 f"{a.memory_bound_share:.0%} of the time memory-bound")
    lines.append("")
    lines.append("fusion plans (same FLOPs, fewer bytes):")
    base = a.plans[Plan.NONE]
    for name, g in a.plans.items():
        lines.append(f"  {name:<6} {len(g.placements):>3} kernels  {format_bytes(g.bytes):>9}  "
                     f"{format_intensity(g.flop_per_byte):>12}  {format_time(g.time_s):>9}  "
                     f"({g.time_s / base.time_s:.2f}× the time of none)")
    if a.phase == Phase.DECODE:
        lim = a.decode_limit
        lines.append("")
        graph_limit = format_intensity(a.crossover.limit_flop_per_byte, 4)
        lines.append(f"decode limit as the batch grows: {format_intensity(lim.flop_per_byte, 4)} "
                     f"((2·P + attention FLOPs) / (L · KV bytes per token); graph totals tend to {graph_limit})")
    cross = a.crossover
    lines.append(f"crossover batch: {cross.reason}")
    mem = a.memory
    where = f"one {a.machine.id}" if a.split.trivial else f"each of {a.split.devices} {a.machine.id} ({a.split})"
    usable = (f"{gib(mem.usable_bytes)} usable = {mem.utilization:.0%} of {gib(mem.capacity_bytes or 0)}"
              if mem.usable_bytes is not None else "capacity unknown")
    if mem.fits:
        fit = f"fits on {where} ({usable})"
    elif mem.min_split is not None:
        fit = f"DOES NOT FIT on {where} ({usable}): the smallest valid split that fits is {mem.min_split}"
    else:
        fit = mem.warning
    lines.append(f"memory per device: weights {gib(mem.weights_bytes)} + KV cache {gib(mem.kv_cache_bytes)} + "
                 f"workspace {gib(mem.workspace_bytes)} = {gib(mem.total_bytes)}; {fit}")
    if mem.max_batch is not None and a.phase is Phase.DECODE:
        lines.append(f"the largest batch this split holds at {what} {a.seq}: {mem.max_batch:,} "
                     f"(the weights stay; KV cache and workspace grow with the sequences)")
    if not a.split.trivial:
        c = a.communication()
        kinds: dict[str, int] = {}
        for r in c["collectives"]:
            kinds[f"{r['kind']} ({r['link']})"] = kinds.get(f"{r['kind']} ({r['link']})", 0) + r["count"]
        lines.append(f"split {a.split} on {a.system or a.machine.id}: {sum(kinds.values())} collectives per step "
                     f"({', '.join(f'{n} {k}' for k, n in kinds.items())}), {format_time(c['time_s'])} = "
                     f"{c['time_s'] / a.time_s:.0%} of the step"
                     + (" (overlapped with compute at best)" if a.overlap else "")
                     + f"; {format_bytes(c['bytes_per_device'])} per device on the links")
        if a.split.pp > 1:
            lines.append(f"pipeline: the step time is the {a.split.pp} stages' in turn; tokens/s runs the batch as "
                         f"{a.split.pp} micro-batches, one in each stage (a stage: ⌈L/pp⌉ of the L layers)")
    return "\n".join(lines)


def _f(fmt: Callable[[float], str]) -> Callable[[Any], str]:
    return lambda v: "—" if v is None else fmt(v)


def sweep_text(rows: list[dict[str, Any]], seq_key: str) -> str:

    cols: list[tuple[str, str, Callable[[Any], str]]] = [
            ("machine", "machine", str), ("weights_dtype", "weights", str), ("kv_dtype", "KV", str),
            ("compute_dtype", "compute", str), ("batch", "batch", str), ("seq", seq_key, str),
            ("flop", "FLOPs", _f(format_flop)), ("bytes", "bytes", _f(format_bytes)),
            ("flop_per_byte", "FLOP/B", _f(format_intensity)), ("bound", "bound", str),
            ("time_s", "time floor", _f(format_time)), ("tokens_per_s", "tokens/s", _f(lambda v: f"{v:,.0f}")),
            ("memory_bytes", "weights+KV", _f(format_bytes)), ("devices", "devices", _f(lambda v: str(v)))]
    first = rows[0]
    return rows_table(rows, cols, f"{first['model']} {first['phase']} sweep, plan {first['plan']}")


def compare_text(rows: list[dict[str, Any]]) -> str:

    cols: list[tuple[str, str, Callable[[Any], str]]] = [("model", "model", str), ("machine", "machine", str),
            ("kv_dtype", "KV", str), ("params_total", "params", _f(format_count)),
            ("params_active", "active", _f(format_count)),
            ("kv_cache_bytes_per_token", "KV/token", _f(lambda v: format_bytes(v, binary=True))),
            ("flop_per_byte", "FLOP/B", _f(format_intensity)), ("ridge_flop_per_byte", "ridge", _f(format_intensity)),
            ("decode_limit_flop_per_byte", "limit", _f(format_intensity)),
            ("crossover_batch", "crossover", lambda v: "never" if v is None else str(v)),
            ("time_s", "time floor", _f(format_time)), ("tokens_per_s", "tokens/s", _f(lambda v: f"{v:,.0f}")),
            ("memory_bytes", "weights+KV", _f(format_bytes)), ("devices", "devices", _f(lambda v: str(v)))]
    first = rows[0]
    what = "prompt" if first["phase"] == "prefill" else "context"
    return rows_table(rows, cols,
                      f"{first['phase']}, batch {first['batch']}, {what} {first['seq']}, plan {first['plan']}")
