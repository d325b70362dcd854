"""The `roofline` command. No arithmetic of its own: it parses, calls the library, and prints.

Heavy modules (rich, matplotlib, numpy, torch) are imported inside the commands that need them,
so that `roofline --help` and a kernel query start fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from roofline.errors import RooflineError

DEFAULT_MACHINE = "h100"


def fail(message: str) -> NoReturn:
    raise RooflineError(message)


class PositiveInt(click.ParamType):
    """A positive integer; "-5", "0" and "abc" fail with one line that names the argument."""

    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if param is None:
            label = "value"
        elif param.param_type_name == "argument":
            label = param.human_readable_name.upper()
        else:
            label = param.opts[0]
        from roofline.units import UnitError, parse_positive_int

        try:
            return parse_positive_int(value, label)
        except UnitError as exc:
            self.fail(str(exc), param, ctx)


class Quantity(click.ParamType):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = kind

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from roofline.units import UnitError, parse_quantity

        try:
            number = parse_quantity(value, self.kind)  # type: ignore[arg-type]
        except UnitError as exc:
            self.fail(f"{param.opts[0] if param else 'value'}: {exc}", param, ctx)
        if not number > 0:
            self.fail(f"{param.opts[0] if param else 'value'} must be positive, got {value}", param, ctx)
        return number


POS = PositiveInt()


def _dump(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, allow_nan=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="roofline")
def cli() -> None:
    """Roofline analysis: is a kernel waiting on arithmetic or on memory, and how fast can it go?

    \b
    Examples:
      roofline machines
      roofline kernel matmul 4096 4096 4096 --machine h100 --explain
      roofline kernel attention --seq 8192 --head-dim 128 --impl naive
    """


# --- machines ---------------------------------------------------------------------------------

def machine_dict(m: Any) -> dict[str, Any]:
    return {
        "name": m.id,
        "full_name": m.name,
        "aliases": list(m.aliases),
        "vendor": m.vendor,
        "kind": m.kind,
        "peak_flop_per_s": dict(m.matrix_flop_per_s),
        "vector_flop_per_s": dict(m.vector_flop_per_s),
        "sparse_flop_per_s": dict(m.sparse_flop_per_s),
        "memory_bytes_per_s": m.memory_bytes_per_s,
        "memory_capacity_bytes": m.memory_capacity_bytes,
        "interconnect_bytes_per_s": m.interconnect_bytes_per_s,
        "ridge_flop_per_byte": {d: m.ridge_flop_per_byte(d) for d in m.matrix_flop_per_s},
        "sources": dict(m.sources),
        "measured": m.measured,
    }


@cli.command()
@click.argument("names", nargs=-1)
@click.option("--dtype", default=None, help="Dtype(s) of the roofs, comma-separated: bf16,fp8,fp4 (default: bf16).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: a list of machines.")
@click.option("--png", default=None, metavar="FILE", help="Draw the listed machines' roofs on one chart (PNG).")
@click.option("--svg", default=None, metavar="FILE", help="The same chart as SVG.")
def machines(names: tuple[str, ...], dtype: str | None, as_json: bool, png: str | None, svg: str | None) -> None:
    """List the machine catalog (or only NAMES): dense peaks, DRAM bandwidth, ridge points.

    \b
    With --png/--svg, draw their roofs on one chart, one roof per machine and dtype:
      roofline machines a100 h100 b200 --png roofs.png             # the roof rose 7x, the ridge moved 2x
      roofline machines b200 --dtype bf16,fp8,fp4 --png b200.png    # each halving of precision doubles the ridge
    """
    from roofline.hardware import catalog, get_machine

    ms = [get_machine(n) for n in names] if names else sorted(catalog().values(),
                                                             key=lambda m: (m.vendor, m.year or 0, m.id))
    dtypes = [d.strip() for d in (dtype or "bf16").split(",") if d.strip()]
    if png or svg:
        from roofline.fileio import check_outputs
        from roofline.report.outputs import write_roofs_chart

        check_outputs({"--png": png, "--svg": svg})

        if not names:
            raise RooflineError("name the machines to draw, e.g. `roofline machines a100 h100 b200 --png roofs.png`")
        roofs = [(m.id, d) for m in ms for d in dtypes]
        for m, d in roofs:
            get_machine(m).peak_flop_per_s(d)  # a dtype the machine lacks fails here, with what it has
        title = "Roofs compared: " + ", ".join(f"{m} {d}" for m, d in roofs)
        for path in write_roofs_chart(roofs, png=png, svg=svg, title=title):
            click.echo(f"wrote {path}", err=True)
    if as_json:
        _dump([machine_dict(m) for m in ms])
        return
    from roofline.report.text import machines_table

    click.echo(machines_table(ms))


@cli.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--explain", is_flag=True, help="Derive each ridge point from its two ceilings.")
def machine(name: str, as_json: bool, explain: bool) -> None:
    """Show one machine's ceilings and where each figure comes from (NAME: id, alias or .toml path)."""
    _one_of(as_json, explain)
    from roofline.hardware import get_machine

    m = get_machine(name)
    if as_json:
        _dump(machine_dict(m))
        return
    if explain:
        from roofline.explain import explain_machine

        click.echo(explain_machine(m))
        return
    from roofline.report.text import machine_text

    click.echo(machine_text(m))


def fusion_option(fusion: str | None, old: str | None, old_to_new: dict[str, str], default: str,
                  old_flag: str = "--impl") -> str:
    """The one spelling of the fusion idea, `--fusion`; an old flag still works and says what replaces it."""
    if old is not None:
        new = old_to_new[old]
        if fusion is not None and fusion != new:
            raise RooflineError(f"{old_flag} {old} contradicts --fusion {fusion}; give --fusion only")
        click.echo(f"roofline: warning: {old_flag} {old} is now spelled --fusion {new}", err=True)
        return new
    return fusion or default


def _one_of(as_json: bool, explain: bool) -> None:
    """--json and --explain each replace the table; given both, one would be dropped without a word."""
    if as_json and explain:
        raise RooflineError("--json and --explain each print the whole result; give one of them")


# --- kernel -----------------------------------------------------------------------------------

def _remember_output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Keep --png/--svg/--html in the command's context, so the kernel commands' signatures stay as they are."""
    if value:
        ctx.meta.setdefault("roofline.outputs", {})[param.name] = value
    return value


def kernel_options(f: Callable[..., Any]) -> Callable[..., Any]:
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


_KW = {"context_settings": {"ignore_unknown_options": True}}


@cli.group()
def kernel() -> None:
    """Place one kernel on a machine: intensity, ridge, attainable FLOP/s, time floor, bound."""


def _write_charts(graph: Any, m: Any, dt: str, plans: list[Any], name: str) -> None:
    """--png/--svg/--html of a kernel command: one scenario per plan (naive and fused attention side by side)."""
    ctx = click.get_current_context(silent=True)
    outputs = ctx.meta.get("roofline.outputs", {}) if ctx is not None else {}
    if not outputs:
        return
    from dataclasses import replace

    from roofline.dtypes import get_dtype
    from roofline.fileio import check_outputs
    from roofline.placement import GraphAnalysis, place
    from roofline.report.outputs import Scenario, write_kernel_outputs

    check_outputs({f"--{fmt}": path for fmt, path in outputs.items()})

    scenarios = []
    for pl in plans:
        ps = [place(k, m, dt) for k in graph.kernels(pl)]
        if len(ps) == 1 and name and len(plans) == 1:
            ps = [replace(ps[0], name=name)]
        label = pl.name if len(plans) > 1 else ""
        scenarios.append(Scenario(label, GraphAnalysis(tuple(ps), pl.name, m, get_dtype(dt)), plan=label))
    title = name.replace(f" ({plans[0].name})", "") + (": " + " vs ".join(p.name for p in plans) if len(plans) > 1
                                                      else "")
    for path in write_kernel_outputs(scenarios, title=title, **outputs):
        click.echo(f"wrote {path}", err=True)


def _emit(graph: Any, machine: str, dtype: str | None, explain: bool, as_json: bool,
          plan: Any = None, name: str = "", alternatives: Any = ()) -> None:
    from roofline.graph import UNFUSED
    from roofline.hardware import get_machine
    from roofline.placement import place

    _one_of(as_json, explain)
    m = get_machine(machine)
    dt = dtype or m.default_dtype()
    kernels = graph.kernels(plan or UNFUSED)
    placements = [place(k, m, dt) for k in kernels]
    _write_charts(graph, m, dt, [plan or UNFUSED, *(a for a in alternatives if a is not plan)], name)
    if len(placements) == 1:
        p = placements[0]
        if name:
            from dataclasses import replace

            p = replace(p, name=name)
        if as_json:
            _dump(p.to_dict())
        elif explain:
            from roofline.explain import explain_placement

            click.echo(explain_placement(p))
        else:
            from roofline.report.text import placement_text

            click.echo(placement_text(p))
        return
    from roofline.dtypes import get_dtype
    from roofline.placement import GraphAnalysis

    analysis = GraphAnalysis(tuple(placements), (plan or UNFUSED).name, m, get_dtype(dt))
    if as_json:
        d = analysis.to_dict()
        totals = d["totals"]
        top = {"name": name, "flop": totals["flop"], "bytes": totals["bytes"],
               "flop_per_byte": totals["flop_per_byte"], "time_s": totals["time_s"],
               "ridge_flop_per_byte": m.ridge_flop_per_byte(dt),
               "attainable_flop_per_s": totals["flop"] / totals["time_s"],
               "bound": analysis.bound, "bound_class": analysis.bound_class}
        _dump({**top, **d})
        return
    from roofline.report.text import placements_table

    if explain:
        from roofline.explain import explain_placement

        click.echo("\n\n".join(explain_placement(p) for p in placements))
        click.echo(f"\ntotal time floor = sum of the kernels' floors = "
                   f"{' + '.join(f'{p.time_s:.4g}' for p in placements)} s = {analysis.time_s:.4g} s")
        return
    click.echo(placements_table(placements, title=f"{name} on {m.name} ({dt}), plan {analysis.plan}"))
    from roofline.units import format_bytes, format_flop, format_intensity, format_time

    click.echo(f"total: {format_flop(analysis.flop)}, {format_bytes(analysis.bytes)}, "
               f"{format_intensity(analysis.flop_per_byte)}, time floor {format_time(analysis.time_s)}")


def _storage(dtype: str | None, storage: str | None) -> str:
    from roofline.dtypes import storage_dtype

    return storage or storage_dtype(dtype or "bf16").name


@kernel.command("matmul", **_KW)
@click.argument("m", type=POS)
@click.argument("n", type=POS)
@click.argument("k", type=POS)
@click.option("--batch", type=POS, default=1, show_default=True, help="Batched matmul: this many independent products.")
@kernel_options
def kernel_matmul(m: int, n: int, k: int, batch: int, machine: str, dtype: str | None, storage_dtype: str | None,
                  explain: bool, as_json: bool) -> None:
    """C[M,N] = A[M,K] @ B[K,N]: 2·M·N·K FLOPs; A, B and C cross memory once each."""
    from roofline.kernels import matmul_graph

    g = matmul_graph(m, n, k, _storage(dtype, storage_dtype), batch=batch)
    _emit(g, machine, dtype, explain, as_json, name=f"matmul {m}×{n}×{k}" + (f" ×{batch}" if batch > 1 else ""))


def _rows_cols_command(kind: str, doc: str) -> None:
    @kernel.command(kind, help=doc, **_KW)
    @click.argument("rows", type=POS)
    @click.argument("cols", type=POS)
    @kernel_options
    def command(rows: int, cols: int, machine: str, dtype: str | None, storage_dtype: str | None,
                explain: bool, as_json: bool) -> None:
        from roofline.kernels import elementwise_graph

        g = elementwise_graph(kind, rows, cols, _storage(dtype, storage_dtype))
        _emit(g, machine, dtype, explain, as_json, name=f"{kind} {rows}×{cols}")


for _kind, _doc in (
    ("rmsnorm", "RMSNorm over ROWS×COLS: about 6 FLOPs per element; reads x and the gain, writes y."),
    ("layernorm", "LayerNorm over ROWS×COLS: about 9 FLOPs per element; reads x, gamma, beta, writes y."),
    ("softmax", "Softmax over rows of ROWS×COLS: 5 FLOPs per element; reads and writes every element."),
    ("swiglu", "SwiGLU silu(gate)·up over ROWS×COLS: 5 FLOPs per element; reads two tensors, writes one."),
    ("gelu", "GELU (tanh form) over ROWS×COLS: 9 FLOPs per element."),
    ("silu", "SiLU over ROWS×COLS: 4 FLOPs per element."),
):
    _rows_cols_command(_kind, _doc)


@kernel.command("add", **_KW)
@click.argument("n", type=POS)
@kernel_options
def kernel_add(n: int, machine: str, dtype: str | None, storage_dtype: str | None, explain: bool,
               as_json: bool) -> None:
    """Residual add of N elements: 1 FLOP per element; reads two tensors, writes one."""
    from roofline.kernels import elementwise_graph

    g = elementwise_graph("add", 1, n, _storage(dtype, storage_dtype))
    _emit(g, machine, dtype, explain, as_json, name=f"add {n}")


@kernel.command("custom", **_KW)
@click.option("--flop", "flop", type=Quantity("flop"), required=True, help='FLOPs, e.g. 4.4e11 or "440 GFLOP".')
@click.option("--bytes", "bytes_", type=Quantity("bytes"), required=True, help='Bytes moved, e.g. "268 MB".')
@click.option("--name", default="custom", show_default=True)
@kernel_options
def kernel_custom(flop: float, bytes_: float, name: str, machine: str, dtype: str | None,
                  storage_dtype: str | None, explain: bool, as_json: bool) -> None:
    """A kernel known only by its FLOPs and bytes (all FLOPs on the matrix units, as in the seed)."""
    from roofline.graph import Cost
    from roofline.vocab import Level, Unit

    class _One:  # a one-kernel "graph" for _emit
        def kernels(self, plan: Any) -> list[Any]:
            from roofline.graph import Kernel

            return [Kernel(name, (), 1, (), (), Cost({Unit.MATRIX: flop}, {Level.DRAM: bytes_}))]

    _emit(_One(), machine, dtype, explain, as_json, name=name)


@kernel.command("attention", **_KW)
@click.option("--seq", type=POS, required=True, help="Query length N.")
@click.option("--head-dim", type=POS, required=True, help="Head width d.")
@click.option("--kv-seq", type=POS, default=None, help="Key/value length (default: --seq).")
@click.option("--batch", type=POS, default=1, show_default=True)
@click.option("--heads", type=POS, default=1, show_default=True, help="Query heads H.")
@click.option("--kv-heads", type=POS, default=None, help="Key/value heads G (GQA; default: --heads).")
@click.option("--causal", is_flag=True, help="Causal mask: count only unmasked pairs.")
@click.option("--fusion", type=click.Choice(["none", "flash"]), default=None,
              help="none: naive attention, scores written to memory and read back; flash (default): one fused "
                   "kernel, scores stay on chip.")
@click.option("--impl", type=click.Choice(["naive", "fused"]), default=None, hidden=True,
              help="Old spelling of --fusion (naive = none, fused = flash).")
@kernel_options
def kernel_attention(seq: int, head_dim: int, kv_seq: int | None, batch: int, heads: int, kv_heads: int | None,
                     causal: bool, fusion: str | None, impl: str | None, machine: str, dtype: str | None,
                     storage_dtype: str | None, explain: bool, as_json: bool) -> None:
    """Attention: 4·N²·d FLOPs per head; naive moves 8·N² bytes of scores, fused only Q, K, V, O."""
    from roofline.kernels import attention_graph, attention_plans

    plan = fusion_option(fusion, impl, {"naive": "none", "fused": "flash"}, default="flash")
    g = attention_graph(seq, head_dim, _storage(dtype, storage_dtype), batch, heads, kv_heads, causal, kv_seq)
    plans = attention_plans("attention")
    _emit(g, machine, dtype, explain, as_json, plan=plans[plan], name=f"attention ({plan}) N={seq} d={head_dim}",
          alternatives=plans.values())


def _register_commands() -> None:
    import importlib
    import pkgutil

    import roofline.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"roofline.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(cli)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error a user can cause ends in one line on stderr and exit code 2."""
    try:
        cli.main(args=argv, prog_name="roofline", standalone_mode=False)
    except click.MissingParameter as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        click.echo(f"roofline: error: {exc.format_message()}{hint}", err=True)
        return 2
    except click.BadParameter as exc:
        # our parameter types name the parameter themselves; click's "Invalid value for ..." repeats it
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        click.echo(f"roofline: error: {exc.message}{hint}", err=True)
        return 2
    except click.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            click.echo(exc.ctx.get_help())  # a bare group: show its help, as --help would
            return 0
        hint = ""
        if exc.ctx is not None:
            hint = f" (see `{exc.ctx.command_path} --help`)"
        click.echo(f"roofline: error: {exc.format_message()}{hint}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"roofline: error: {exc.format_message()}", err=True)
        return exc.exit_code if exc.exit_code else 2
    except RooflineError as exc:
        click.echo(f"roofline: error: {exc}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("roofline: aborted", err=True)
        return 130
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
