"""`roofline kernel ...`: one kernel (or one attention layer) placed on a machine."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from roofline.cli.common import (
    COUNT_HELP,
    NUMBER,
    PLAN_HELP,
    POS,
    Quantity,
    dump,
    echo,
    fusion_option,
    one_of,
    outputs,
    wrote,
)
from roofline.hardware.catalog import DEFAULT_MACHINE


def _remember_output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Keep --png/--svg/--html in the command's context, so every kernel command shares one writer."""
    if value is not None:  # an empty name too: outputs() refuses it in one line
        ctx.meta.setdefault("roofline.outputs", {})[param.name] = value
    return value


def _remember_levels(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        ctx.meta["roofline.levels_png"] = value
    return value


def _remember_expectation(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        ctx.meta.setdefault("roofline.expectation", {})[param.name] = value
    return value


def kernel_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--calibration", metavar="FILE", default=None, expose_value=False,
                     callback=_remember_expectation,
                     help="Your own expected-time file (roofline calibrate --save) or bench calibration "
                          "(roofline bench --save-calibration) in place of the shipped fit.")(f)
    f = click.option("--engine", type=click.Choice(["trtllm", "vllm", "sglang"]), default=None, expose_value=False,
                     callback=_remember_expectation,
                     help="Engine whose measured kernels the expected band is fitted on (default: the one "
                          "with most rows for the machine).")(f)
    f = click.option("--levels-png", metavar="FILE", default=None, expose_value=False, callback=_remember_levels,
                     help="Write the chip-level charts as PNG to FILE: the hierarchical roofline (a point per "
                          "memory level, as Nsight Compute draws it) and the sub-roofs (matrix, vector, exp).")(f)
    for fmt, what in (("html", "the interactive page (self-contained HTML)"), ("svg", "the roofline chart as SVG"),
                      ("png", "the roofline chart as PNG")):
        f = click.option(f"--{fmt}", fmt, metavar="FILE", default=None, expose_value=False,
                         callback=_remember_output, help=f"Write {what} to FILE.")(f)
    f = click.option("--json", "as_json", is_flag=True, help="Print the placement as JSON.")(f)
    f = click.option("--explain", is_flag=True, help="Derive every number step by step.")(f)
    f = click.option("--storage-dtype", default=None,
                     help="Dtype the operands are stored in, if not the compute dtype (e.g. bf16 bytes, fp8 math).")(f)
    f = click.option("--dtype", default=None, help="Compute dtype, choosing the peak (default: bf16).")(f)
    f = click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True,
                     help="Machine id, alias, or machine file.")(f)
    return f


_KW: dict[str, Any] = {"context_settings": {"ignore_unknown_options": True}}


@click.group()
def kernel() -> None:
    """Place one kernel on a machine: intensity, ridge, attainable FLOP/s, time floor, bound."""


def _chart_paths() -> dict[str, str]:
    ctx = click.get_current_context(silent=True)
    return dict(ctx.meta.get("roofline.outputs", {})) if ctx is not None else {}


def _emit(plans: Mapping[Any, Sequence[Any]], headline: Any, name: str, explain: bool, as_json: bool) -> None:
    """Print (and draw) the placements of the headline plan; every plan goes on the charts."""
    from dataclasses import replace

    from roofline.placement import GraphAnalysis

    one_of(as_json, explain)
    paths = _chart_paths()
    ctx = click.get_current_context(silent=True)
    levels_png = ctx.meta.get("roofline.levels_png") if ctx is not None else None
    calibration = ctx.meta.get("roofline.expectation", {}).get("calibration") if ctx is not None else None
    machine = ctx.params.get("machine") if ctx is not None else None
    outputs([("--machine", machine), ("--calibration", calibration)], **paths, levels_png=levels_png)
    if levels_png is not None:
        from roofline.report.charts.levels import check_levels_png

        check_levels_png(levels_png)
    placements = list(plans[headline])
    if len(placements) == 1 and name:
        placements = [replace(placements[0], name=name)]
    first = placements[0]
    analyses = {plan: GraphAnalysis(tuple(placements if plan == headline else ps), plan, first.machine, first.dtype)
                for plan, ps in plans.items()}
    if paths:
        from roofline.report.outputs import Scenario, write_kernel_outputs

        order = [headline, *[p for p in plans if p != headline]]
        multi = len(order) > 1
        scenarios = [Scenario(str(p) if multi else "", analyses[p], plan=str(p) if multi else "") for p in order]
        title = name.replace(f" ({headline})", "") + (": " + " vs ".join(order) if multi else "")
        for path in write_kernel_outputs(scenarios, title=title, **paths):
            wrote(path)
    if levels_png is not None:
        from roofline.report.charts.levels import write_levels_png

        write_levels_png(placements, levels_png, title=name)
        wrote(levels_png)
    bands = _bands(placements)
    if len(placements) == 1:
        p, band = placements[0], bands[0]
        if as_json:
            dump({**p.to_dict(), "expected_time_s": band.to_dict(), "calibration": band.calibration})
        elif explain:
            from roofline.explain import explain_placement

            echo(explain_placement(p))
            echo("\n" + "\n".join(band.derivation))
        else:
            from roofline.report.text.expected import expected_line
            from roofline.report.text.tables import placement_text

            echo(placement_text(p))
            echo(expected_line(band))
        return
    a = analyses[headline]
    if as_json:
        d = a.to_dict()
        for k, band in zip(d.get("kernels", []), bands, strict=False):
            k["expected_time_s"] = band.to_dict()
        d.setdefault("totals", {})["expected_time_s"] = {"low": sum(b.low_s * p.count for b, p in zip(
            bands, placements, strict=True)), "high": sum(b.high_s * p.count for b, p in zip(bands, placements,
                                                                                            strict=True))}
        dump({"name": name, "flop": a.flop, "bytes": a.bytes, "flop_per_byte": d["totals"]["flop_per_byte"],
              "time_s": a.time_s, "ridge_flop_per_byte": a.ridge_flop_per_byte,
              "attainable_flop_per_s": a.attainable_flop_per_s, "bound": a.bound, "bound_class": a.bound_class,
              **d, "calibration": bands[0].calibration})
    elif explain:
        from roofline.explain.placement import Sources, explain_placement

        sources = Sources()  # each datasheet cited once, as [n], and listed at the end
        echo("\n\n".join(explain_placement(p, sources) for p in placements))
        echo(f"\ntotal time floor = sum of the kernels' floors = "
                   f"{' + '.join(f'{p.time_s:.4g}' for p in placements)} s = {a.time_s:.4g} s")
        echo("\n" + sources.text())
    else:
        from roofline.report.text.expected import expected_total_line
        from roofline.report.text.tables import analysis_text

        echo(analysis_text(a, title=f"{name} on {a.machine.name} ({a.dtype.name}), plan {a.plan}"))
        echo(expected_total_line(placements, bands, click.get_current_context().meta.get(
            "roofline.expectation.described", {})))


def _bands(placements: Sequence[Any]) -> list[Any]:
    """Each placement's expected band (the shipped fit, or --calibration FILE), warnings printed once."""
    from roofline.calibration.choose import choose
    from roofline.cli.common import warn

    ctx = click.get_current_context(silent=True)
    opts = dict(ctx.meta.get("roofline.expectation", {})) if ctx is not None else {}
    chosen = choose(placements[0].machine.id, opts.get("engine"), opts.get("calibration"))
    bands = [chosen.band(p) for p in placements]
    for text in dict.fromkeys(w for b in bands for w in b.warnings):
        warn(text)
    if ctx is not None:
        ctx.meta["roofline.expectation.described"] = chosen.describe()
    return bands


def _place_graph(graph: Any, machine: str, dtype: str | None, plans: Sequence[Any]) -> dict[Any, list[Any]]:
    from roofline.dtypes import get_dtype
    from roofline.hardware import get_machine
    from roofline.placement import place

    m = get_machine(machine)
    dt = get_dtype(dtype or m.default_dtype())
    return {plan.name: [place(k, m, dt) for k in graph.kernels(plan)] for plan in plans}


def _storage(dtype: str | None, storage: str | None) -> str:
    from roofline.dtypes import storage_dtype

    return storage or storage_dtype(dtype or "bf16").name


def _one_plan(graph: Any, machine: str, dtype: str | None, name: str, explain: bool, as_json: bool) -> None:
    from roofline.graph import UNFUSED

    _emit(_place_graph(graph, machine, dtype, [UNFUSED]), UNFUSED.name, name, explain, as_json)


@kernel.command("matmul", **_KW)
@click.argument("m", type=POS)
@click.argument("n", type=POS)
@click.argument("k", type=POS)
@click.option("--batch", type=POS, default=1, show_default=True, help="Batched matmul: this many independent products.")
@click.option("--tile", default=None, metavar="MxNxK",
              help="Thread-block tile for the shared-memory and L2 bytes (default 256x256x32).")
@kernel_options
def kernel_matmul(m: int, n: int, k: int, batch: int, tile: str | None, machine: str, dtype: str | None,
                  storage_dtype: str | None, explain: bool, as_json: bool) -> None:
    """C[M,N] = A[M,K] @ B[K,N]: 2·M·N·K FLOPs; A, B and C cross memory once each.

    M, N and K are whole numbers from 1 to 2**53, with k = 1000 or Ki = 1024: 4Ki is 4096."""
    from roofline.kernels import matmul_graph, parse_tile

    tiles = parse_tile(tile, 3) if tile else None
    g = matmul_graph(m, n, k, _storage(dtype, storage_dtype), batch=batch,
                     tile=(tiles[0], tiles[1], tiles[2]) if tiles else None)
    _one_plan(g, machine, dtype, f"matmul {m}×{n}×{k}" + (f" ×{batch}" if batch > 1 else ""), explain, as_json)


ROWS_COLS = (
    ("rmsnorm", "RMSNorm over ROWS×COLS: about 6 FLOPs per element; reads x and the gain, writes y."),
    ("layernorm", "LayerNorm over ROWS×COLS: about 9 FLOPs per element; reads x, gamma, beta, writes y."),
    ("softmax", "Softmax over rows of ROWS×COLS: 5 FLOPs per element; reads and writes every element."),
    ("swiglu", "SwiGLU silu(gate)·up over ROWS×COLS: 5 FLOPs per element; reads two tensors, writes one."),
    ("gelu", "GELU (tanh form) over ROWS×COLS: 9 FLOPs per element."),
    ("silu", "SiLU over ROWS×COLS: 4 FLOPs per element."),
)


def _rows_cols_command(kind: str, doc: str) -> click.Command:
    @click.command(kind, help=doc, **_KW)
    @click.argument("rows", type=POS)
    @click.argument("cols", type=POS)
    @kernel_options
    def command(rows: int, cols: int, machine: str, dtype: str | None, storage_dtype: str | None,
                explain: bool, as_json: bool) -> None:
        from roofline.kernels import elementwise_graph

        g = elementwise_graph(kind, rows, cols, _storage(dtype, storage_dtype))
        _one_plan(g, machine, dtype, f"{kind} {rows}×{cols}", explain, as_json)

    return command


for _kind, _doc in ROWS_COLS:
    kernel.add_command(_rows_cols_command(_kind, _doc))


@kernel.command("add", **_KW)
@click.argument("n", type=POS)
@kernel_options
def kernel_add(n: int, machine: str, dtype: str | None, storage_dtype: str | None, explain: bool,
               as_json: bool) -> None:
    """Residual add of N elements: 1 FLOP per element; reads two tensors, writes one."""
    from roofline.kernels import elementwise_graph

    g = elementwise_graph("add", 1, n, _storage(dtype, storage_dtype))
    _one_plan(g, machine, dtype, f"add {n}", explain, as_json)


@kernel.command("custom", **_KW)
@click.option("--flop", "flop", type=Quantity("flop"), required=True, help='FLOPs, e.g. 4.4e11 or "440 GFLOP".')
@click.option("--bytes", "bytes_", type=Quantity("bytes"), required=True, help='Bytes moved, e.g. "268 MB".')
@click.option("--name", default="custom", show_default=True)
@kernel_options
def kernel_custom(flop: float, bytes_: float, name: str, machine: str, dtype: str | None,
                  storage_dtype: str | None, explain: bool, as_json: bool) -> None:
    """A kernel known only by its FLOPs and bytes (all FLOPs on the matrix units, the textbook roofline)."""
    from roofline.placement import place_flop_bytes
    from roofline.vocab import Plan

    _emit({Plan.NONE: [place_flop_bytes(flop, bytes_, machine, dtype, name=name)]}, Plan.NONE, name, explain,
          as_json)


@kernel.command("attention", **_KW)
@click.option("--seq", type=POS, required=True, help="Query length N. " + COUNT_HELP)
@click.option("--head-dim", type=POS, required=True, help="Head width d.")
@click.option("--kv-seq", type=POS, default=None, help="Key/value length (default: --seq), as --seq.")
@click.option("--batch", type=POS, default=1, show_default=True)
@click.option("--heads", type=POS, default=1, show_default=True, help="Query heads H.")
@click.option("--kv-heads", type=POS, default=None, help="Key/value heads G (GQA; default: --heads).")
@click.option("--causal", is_flag=True, help="Causal mask: count only unmasked pairs.")
@click.option("--fusion", type=click.Choice(["none", "flash"]), default=None,
              help=f"none: {PLAN_HELP['none']}; flash (default): {PLAN_HELP['flash']}.")
@click.option("--impl", type=click.Choice(["naive", "fused"]), default=None, hidden=True,
              help="Old spelling of --fusion (naive = none, fused = flash).")
@click.option("--tile", default=None, metavar="BRxBC",
              help="Queries x keys per tile, for shared-memory bytes and rescales (default 128x128, FA3/FA4).")
@click.option("--exp-emulated", type=NUMBER, default=0.0, show_default=True,
              help="Share of exponentials computed by a degree-3 polynomial on the FMA lanes "
                   "(FlashAttention-4: 0.1-0.25).")
@click.option("--conditional-rescale", is_flag=True,
              help="FlashAttention-4's online softmax: rescale only when the max grows enough (10% of key tiles).")
@kernel_options
def kernel_attention(seq: int, head_dim: int, kv_seq: int | None, batch: int, heads: int, kv_heads: int | None,
                     causal: bool, fusion: str | None, impl: str | None, tile: str | None, exp_emulated: float,
                     conditional_rescale: bool, machine: str, dtype: str | None,
                     storage_dtype: str | None, explain: bool, as_json: bool) -> None:
    """Attention: 4·N²·d FLOPs per head; naive moves 8·N² bytes of scores, flash only Q, K, V, O."""
    from roofline.kernels import attention_graph, attention_plans
    from roofline.vocab import Plan

    plan = Plan(fusion_option(fusion, impl, {"naive": "none", "fused": "flash"}, "flash", "--impl"))
    from roofline.kernels import CONDITIONAL_RESCALE, parse_tile

    tiles = parse_tile(tile, 2) if tile else None
    g = attention_graph(seq, head_dim, _storage(dtype, storage_dtype), batch, heads, kv_heads, causal, kv_seq,
                        tile=(tiles[0], tiles[1]) if tiles else None, exp_emulated=exp_emulated,
                        rescale=CONDITIONAL_RESCALE if conditional_rescale else 1.0)
    placed = _place_graph(g, machine, dtype, list(attention_plans("attention").values()))
    _emit(placed, plan, f"attention ({plan}) N={seq} d={head_dim}", explain, as_json)


COMMANDS = (kernel,)
