"""Text for split searches (`roofline plan`) and for sweeps and comparisons over splits.

    split_search_text(search)      every candidate split, ranked, with why each loses to the winner
    split_sweep_text(rows, key)    a sweep's rows with the split columns (tp, pp, ep, dp, devices)
    split_compare_text(rows)       a comparison's rows with the split columns and the fit
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.models.memory import gib
from roofline.models.search import SplitRow, SplitSearch
from roofline.report.text.model import band_text, rows_table
from roofline.units import format_bytes, format_count, format_flop, format_intensity, format_time
from roofline.vocab import Phase

SPLIT_SEARCH_CSV_COLUMNS = ("rank", "split", "tp", "pp", "ep", "dp", "devices", "fits", "memory_bytes_per_device",
                    "weights_bytes", "kv_cache_bytes", "workspace_bytes", "usable_bytes_per_device", "time_s",
                    "expected_time_s", "tokens_per_s", "tokens_per_s_per_device", "expected_tokens_per_s_per_device",
                    "communication_time_s", "communication_share", "bound", "bound_class", "reason")


def _or_dash(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    return lambda v: "—" if v is None else fmt(v)


def _memory(r: SplitRow) -> str:
    # not built: the weights and KV cache alone, a lower bound on what the device would need
    return gib(r.memory_bytes) if r.analysed else f"≥ {gib(r.memory_bytes)}"


def _expected(r: SplitRow) -> str:
    if r.expected_time_s is None:
        return "—"
    return f"{format_time(r.expected_time_s[0])}–{format_time(r.expected_time_s[1])}"


def _fits(r: SplitRow) -> str:
    return {True: "yes", False: "no", None: "?"}[r.fits]


def split_search_text(s: SplitSearch) -> str:
    """The candidates as one table (winner first), then the winner in a sentence and how to read it."""
    from roofline.report.text.grid import Table

    what = "prompt" if s.phase == Phase.PREFILL else "context"
    goal = {"time": "the lowest expected step time", "throughput": "the most expected tokens/s per device",
            "latency": f"the most expected tokens/s per device within {format_time(s.latency_target_s or 0.0)} "
                       f"a step"}
    title = (f"{s.config.name} {s.phase}, batch {s.batch}, {what} {s.seq}, on {s.system_name}: "
             f"{len(s.rows)} valid splits of up to {s.devices} devices; objective {s.objective} ({goal[s.objective]})")
    t = Table(title=title, title_justify="left")
    for header, justify in (("#", "right"), ("split", "left"), ("devices", "right"), ("memory/device", "right"),
                            ("fits", "left"), ("step time", "right"), ("expected", "right"), ("tokens/s", "right"),
                            ("tokens/s/device", "right"), ("comm", "right"), ("bound", "left"),
                            ("why it loses", "left")):
        t.add_column(header, justify=justify)  # type: ignore[arg-type]
    for r in s.rows:
        t.add_row("" if r.rank is None else str(r.rank), str(r.split), str(r.devices), _memory(r), _fits(r),
                  _or_dash(format_time)(r.time_s), _expected(r), _or_dash(lambda v: f"{v:,.0f}")(r.tokens_per_s),
                  _or_dash(lambda v: f"{v:,.0f}")(r.tokens_per_s_per_device),
                  _or_dash(lambda v: f"{v:.0%}")(r.communication_share),
                  "—" if r.bound is None else str(r.bound), r.reason)
    from roofline.report.text.tables import render

    lines = [render(t, drop=("tokens/s", "devices", "comm", "tokens/s/device", "bound")), ""]
    w = s.winner
    if w is not None:
        flags = f" ({w.flags})" if w.flags else ""
        share = "" if w.communication_share is None else f", {w.communication_share:.0%} of it in collectives"
        lines.append(f"best: {w.split}{flags}: {format_time(w.time_s or 0.0)} a step (expected {_expected(w)}){share}; "
                     f"{w.tokens_per_s or 0:,.0f} tokens/s, {w.tokens_per_s_per_device or 0:,.0f} per device; "
                     f"{gib(w.memory_bytes)} of {gib(w.usable_bytes or 0.0)} usable per device")
        if s.config.source.startswith("preset"):
            argv = ["roofline model", s.config.name, "--machine", s.system, w.flags, "--phase", str(s.phase),
                    "--batch", str(s.batch), f"--{what}", str(s.seq)]
            lines.append("  its kernels: " + " ".join(a for a in argv if a))
    lines.append(f"{s.ranked_by}; step time is the floor, expected its band")
    lines.append(f"memory per device: weights + KV cache + activation workspace, against {s.utilization:.0%} of "
                 "the device's memory; ≥: weights and KV cache alone already exceed it, so the split is not built")
    lines.append("tokens/s: a pipeline keeps as many batches in flight as stages; data-parallel replicas add up"
                 + ("; communication overlapped with compute at best" if s.overlap else ""))
    return "\n".join(lines)


def serve_search_text(s: Any, step: Any, output: int) -> str:
    """plan --output (and serve without a split): every engine layout tried, the cheapest meeting the
    targets first (roofline.serving.splits)."""
    lines = [f"{step.config.name}: prompt {step.seq}, output {output}: the cheapest split meeting the targets, "
             f"of {len(s.candidates)} engine layouts up to {s.devices} devices (TP in a node, PP across nodes)"]
    for c in s.candidates:
        r = c.report
        what = "—" if r is None else (f"batch {r.batch}, {r.throughput.ceiling:,.0f} tokens/s (expected "
                                      f"{r.throughput.low:,.0f}–{r.throughput.high:,.0f}), "
                                      f"{(c.device_s_per_token or 0) * 1e3:.3g} device-ms a token")
        cost = "" if r is None or r.cost_output is None else f", {r.cost_output.floor:.3g} per 1M output tokens"
        lines.append(f"  {c.split!s:<14} {c.split.devices:>3} devices  {what}{cost}  {c.reason}")
    w = s.winner
    if w is not None:
        lines.append(f"best: {w.split} (`roofline serve` without a split answers the same); ranked by devices / "
                     f"expected tokens/s, the middle of the workload throughput's band, prefill counted")
    return "\n".join(lines)


SPLIT_HEADERS: list[tuple[str, str, Callable[[Any], str]]] = [
    ("tp", "TP", str), ("pp", "PP", str), ("ep", "EP", str), ("dp", "DP", str), ("split_devices", "devices", str)]


def split_sweep_text(rows: list[dict[str, Any]], seq_key: str) -> str:
    """A sweep over splits: one row per split × machine × dtype × batch × length, one device's step."""
    cols: list[tuple[str, str, Callable[[Any], str]]] = [
        ("machine", "machine", str), *SPLIT_HEADERS, ("weights_dtype", "weights", str), ("kv_dtype", "KV", str),
        ("batch", "batch", str), ("seq", seq_key, str), ("flop", "FLOPs/device", _or_dash(format_flop)),
        ("bytes", "bytes/device", _or_dash(format_bytes)), ("flop_per_byte", "FLOP/B", _or_dash(format_intensity)),
        ("bound", "bound", str), ("time_s", "step time", _or_dash(format_time)),
        ("expected_time_s", "expected", band_text), ("tokens_per_s", "tokens/s", _or_dash(lambda v: f"{v:,.0f}")),
        ("devices", "fewest devices", _or_dash(str))]
    first = rows[0]
    return rows_table(rows, cols, f"{first['model']} {first['phase']} sweep over splits, plan {first['plan']} "
                                  f"(FLOPs, bytes and time: one device's step)")


def split_compare_text(rows: list[dict[str, Any]]) -> str:
    """A comparison over splits: totals per device, the memory per device and whether it fits."""
    cols: list[tuple[str, str, Callable[[Any], str]]] = [
        ("model", "model", str), ("machine", "machine", str), *SPLIT_HEADERS, ("kv_dtype", "KV", str),
        ("params_total", "params", _or_dash(format_count)),
        ("flop_per_byte", "FLOP/B", _or_dash(format_intensity)), ("bound", "bound", str),
        ("time_s", "step time", _or_dash(format_time)), ("expected_time_s", "expected", band_text),
        ("tokens_per_s", "tokens/s", _or_dash(lambda v: f"{v:,.0f}")),
        ("memory_bytes", "memory/device", _or_dash(lambda v: gib(v))),
        ("fits", "fits", lambda v: {True: "yes", False: "no", None: "?"}[v]),
        ("devices", "fewest devices", _or_dash(str))]
    first = rows[0]
    what = "prompt" if first["phase"] == "prefill" else "context"
    return rows_table(rows, cols, f"{first['phase']}, batch {first['batch']}, {what} {first['seq']}, plan "
                                  f"{first['plan']} (one device's step)")
