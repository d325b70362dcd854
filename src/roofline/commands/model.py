"""`roofline model`, `roofline sweep` and `roofline compare`: transformers on the roofline.

No arithmetic here: options are parsed, roofline.models does the work, roofline.report draws.
Heavy imports (the models package, rich, numpy) happen inside the commands.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import click

from roofline.errors import RooflineError
from roofline.units import parse_positive_int

DEFAULT_MACHINE = "h100"
DEFAULT_LENGTH = 2048
MAX_LIST_VALUES = 10_000  # one axis of a sweep; 1:100000000:1 would otherwise be built, exhausting memory
MAX_SWEEP_ROWS = 100_000  # every axis together (a 100,000-row CSV takes seconds)
KERNEL_CSV_COLUMNS = ("name", "kind", "count", "flop", "bytes", "flop_per_byte", "bound", "limiter", "time_s",
                      "total_time_s", "share", "compute_time_s", "memory_time_s", "attainable_flop_per_s",
                      "ridge_flop_per_byte", "machine", "dtype")


def _echo_warning(text: str) -> None:
    click.echo(f"roofline: warning: {text}", err=True)


def parse_int_list(text: str, label: str) -> list[int]:
    """"1,8,64"; "1:1024" (powers of two from 1 to 1024); "1:1024:x4" (×4 steps); "128:1024:128" (+128 steps)."""
    out: list[int] = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        try:
            if ":" in part:
                bits = part.split(":")
                if len(bits) not in (2, 3):
                    raise ValueError
                lo, hi = int(bits[0]), int(bits[1])
                step = bits[2] if len(bits) == 3 else "x2"
                if lo < 1 or hi < lo:
                    raise RooflineError(f"{label}: range {part!r} must go from a positive start up to its end")
                if step.startswith("x"):
                    factor = int(step[1:])
                    if factor < 2:
                        raise ValueError
                    count = math.floor(math.log(hi / lo, factor) + 1e-9) + 1
                else:
                    count = (hi - lo) // int(step) + 1 if int(step) >= 1 else 0
                if len(out) + count > MAX_LIST_VALUES:
                    raise RooflineError(f"{label}: {part!r} is {count:,} values; at most {MAX_LIST_VALUES:,} "
                                        f"(take a larger step, e.g. {lo}:{hi}:x2)")
                if step.startswith("x"):
                    factor = int(step[1:])
                    v = lo
                    while v <= hi:
                        out.append(v)
                        v *= factor
                else:
                    inc = int(step)
                    if inc < 1:
                        raise ValueError
                    out.extend(range(lo, hi + 1, inc))
            else:
                out.append(int(part))
        except RooflineError:
            raise
        except ValueError:
            raise RooflineError(f"{label}: cannot read {part!r}; write a list like 1,8,64 or a range like "
                                f"1:1024 (powers of two), 1:1024:x4 or 128:1024:128") from None
    if not out:
        raise RooflineError(f"{label}: no values given")
    for v in out:
        if v < 1:
            raise RooflineError(f"{label} must be a positive integer, got {v}")
    return out


def parse_str_list(text: str | None) -> list[str | None]:
    if text is None:
        return [None]
    values = [p.strip() for p in text.split(",") if p.strip()]
    return list(values) or [None]


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise RooflineError(f"--set takes KEY=VALUE (a config.json field), got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _length(phase: str, prompt: int | None, context: int | None) -> int:
    if phase == "prefill":
        if context is not None and prompt is None:
            raise RooflineError("prefill takes --prompt P (the prompt length), not --context")
        return prompt or DEFAULT_LENGTH
    if prompt is not None and context is None:
        raise RooflineError("decode takes --context L (the tokens attended to), not --prompt")
    return context or DEFAULT_LENGTH


def _common_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="What-if: override a config.json field, e.g. --set num_key_value_heads=64."),
        click.option("--experts-hit", default=None,
                     help="MoE: distinct experts a layer reads per step (default: the expectation under uniform "
                          "routing, E·(1 − (1 − k/E)^tokens))."),
        click.option("--act-dtype", default="bf16", show_default=True, help="Activation dtype."),
        click.option("--fusion", type=click.Choice(["none", "flash", "fused"]), default="flash", show_default=True,
                     help="none: every op its own kernel, naive attention; flash: fused attention; fused: also norms "
                          "into matmuls, activations and residual adds into epilogues."),
        click.option("--phase", type=click.Choice(["prefill", "decode"]), default="decode", show_default=True),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _writer(output: str | None, text: str) -> None:
    if output:
        from roofline.fileio import atomic_write

        atomic_write(output, text if text.endswith("\n") else text + "\n")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text)


def _write_rows(rows: list[dict[str, Any]], columns: Sequence[str], fmt: str, output: str | None,
                csv_path: str | None, table_text: Callable[[], str]) -> None:
    """Rows as a table, CSV or JSON on stdout or to --output, and also as CSV to --csv."""
    if csv_path:
        _writer(csv_path, _csv(rows, columns))
    if fmt == "json":
        text = json.dumps(rows, indent=2, allow_nan=False)
    elif fmt == "csv":
        text = _csv(rows, columns)
    else:
        text = table_text()
    _writer(output, text)


def _table(rows: list[dict[str, Any]], columns: Sequence[tuple[str, str, Callable[[Any], str]]], title: str) -> str:
    from rich.table import Table

    from roofline.report.text import render

    t = Table(title=title, title_justify="left")
    for _, header, _fmt in columns:
        t.add_column(header, justify="left" if header in ("model", "machine", "bound", "dtypes") else "right")
    for r in rows:
        t.add_row(*[fmt(r.get(key)) for key, _h, fmt in columns])
    return render(t, width=220)


def _csv(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    return buf.getvalue()


def register(cli: click.Group) -> None:
    @cli.command("model")
    @click.argument("model")
    @click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True, help="Machine id, alias or file.")
    @click.option("--batch", "-b", default="1", show_default=True, help="Sequences in the step.")
    @click.option("--prompt", "-p", default=None, help=f"Prompt length (prefill; default {DEFAULT_LENGTH}).")
    @click.option("--context", "-c", default=None,
                  help=f"Context length a new token attends to (decode; default {DEFAULT_LENGTH}).")
    @click.option("--weights-dtype", default="bf16", show_default=True,
                  help="Weight storage dtype (int4, fp8, nvfp4, ...).")
    @click.option("--kv-dtype", default=None, help="KV cache dtype (default: the activation dtype).")
    @click.option("--dtype", default=None, help="Compute dtype, choosing the peak (default: the activation dtype).")
    @_common_options
    @click.option("--explain", is_flag=True,
                  help="Derive the KV cache size, the decode limit and every kernel step by step.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @click.option("--csv", "csv_path", default=None, metavar="FILE", help="Write the per-kernel table as CSV.")
    @click.option("--png", default=None, metavar="FILE", help="Write the roofline chart of every kernel (PNG).")
    @click.option("--svg", default=None, metavar="FILE", help="Write the roofline chart of every kernel (SVG).")
    @click.option("--html", default=None, metavar="FILE", help="Write the interactive page (all fusion plans).")
    def model_command(model: str, machine: str, batch: str, prompt: str | None, context: str | None,
                      weights_dtype: str, kv_dtype: str | None, dtype: str | None, phase: str, fusion: str,
                      act_dtype: str, experts_hit: str | None, overrides: tuple[str, ...], explain: bool,
                      as_json: bool, csv_path: str | None, png: str | None, svg: str | None,
                      html: str | None) -> None:
        """Every kernel of one forward step of MODEL (a preset or a config.json path) on a machine.

        \b
        Examples:
          roofline model llama-3-70b --machine h100 --phase decode --batch 64 --context 8192
          roofline model llama-3-70b --phase prefill --prompt 4096 --fusion none
          roofline model deepseek-v3 --machine b200 --batch 32 --context 32768 --kv-dtype fp8 --explain
          roofline model ./my-model/config.json --json
        """
        from roofline.fileio import check_outputs
        from roofline.models.analysis import analyze_model
        from roofline.models.build import model_dtypes

        check_outputs({"--csv": csv_path, "--png": png, "--svg": svg, "--html": html})
        if as_json and explain:
            raise RooflineError("--json and --explain each print the whole result; give one of them")
        b = parse_positive_int(batch, "--batch")
        seq = _length(phase, parse_positive_int(prompt, "--prompt") if prompt is not None else None,
                      parse_positive_int(context, "--context") if context is not None else None)
        if prompt is None and context is None:  # the default length, within what the model was trained for
            from roofline.models.config import load_config

            seq = min(seq, load_config(model, parse_overrides(overrides)).max_position_embeddings)
        hit = parse_positive_int(experts_hit, "--experts-hit") if experts_hit is not None else None
        dt = model_dtypes(weights_dtype, act_dtype, kv_dtype, dtype)
        a = analyze_model(model, machine, phase, b, seq, fusion, dt, hit, parse_overrides(overrides))
        for w in a.warnings:
            _echo_warning(w)
        if a.memory.warning:
            _echo_warning(a.memory.warning)
        if csv_path:
            from roofline.fileio import atomic_write

            atomic_write(csv_path, _csv(a.kernel_rows(), KERNEL_CSV_COLUMNS))
            click.echo(f"wrote {csv_path}", err=True)
        if png or svg or html:
            from roofline.report.notebook import model_scenarios
            from roofline.report.outputs import write_model_outputs

            for path in write_model_outputs(model_scenarios(a), png=png, svg=svg, html=html, title=a.title):
                click.echo(f"wrote {path}", err=True)
        if as_json:
            click.echo(json.dumps(a.to_dict(), indent=2, allow_nan=False))
            return
        if explain:
            from roofline.models.explain import explain_kernels, explain_model

            click.echo(explain_model(a))
            click.echo("\nkernels\n")
            click.echo(explain_kernels(a))
            return
        click.echo(model_text(a))

    @cli.command("sweep")
    @click.argument("model")
    @click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True,
                  help="Machine(s), comma-separated: h100,b200.")
    @click.option("--batch", "-b", default="1:256", show_default=True,
                  help="Batch sizes: 1,8,64 or 1:256 (powers of two) or 1:256:x4 or 8:64:8.")
    @click.option("--prompt", "-p", default=None, help="Prompt lengths (prefill), as --batch.")
    @click.option("--context", "-c", default=None, help="Context lengths (decode), as --batch.")
    @click.option("--weights-dtype", default="bf16", show_default=True, help="Weight dtype(s), comma-separated.")
    @click.option("--kv-dtype", default=None, help="KV cache dtype(s), comma-separated: bf16,fp8,nvfp4.")
    @click.option("--dtype", default=None, help="Compute dtype(s), comma-separated.")
    @_common_options
    @click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
    @click.option("--output", "-o", default=None, metavar="FILE", help="Write the table/CSV/JSON to FILE.")
    @click.option("--csv", "csv_path", default=None, metavar="FILE", help="Also write the rows as CSV to FILE.")
    @click.option("--png", default=None, metavar="FILE", help="Chart intensity against the swept axis (PNG).")
    @click.option("--svg", default=None, metavar="FILE", help="Chart intensity against the swept axis (SVG).")
    def sweep_command(model: str, machine: str, batch: str, prompt: str | None, context: str | None,
                      weights_dtype: str, kv_dtype: str | None, dtype: str | None, phase: str, fusion: str,
                      act_dtype: str, experts_hit: str | None, overrides: tuple[str, ...], fmt: str,
                      output: str | None, csv_path: str | None, png: str | None, svg: str | None) -> None:
        """Sweep MODEL over batch × length × dtype × machine: intensity, time floor, tokens/s, bound.

        \b
        Examples:
          roofline sweep llama-3-70b --batch 1:512 --context 8192,131072
          roofline sweep llama-3-70b --batch 64 --context 1024:131072 --kv-dtype bf16,fp8 --format csv
          roofline sweep mixtral-8x7b --machine h100,b200 --batch 1:256 --png sweep.png
        """
        from roofline.fileio import check_outputs
        from roofline.models.analysis import SWEEP_COLUMNS, sweep

        check_outputs({"--output": output, "--csv": csv_path, "--png": png, "--svg": svg})
        if phase == "prefill" and context is not None and prompt is None:
            raise RooflineError("prefill sweeps take --prompt, not --context")
        if phase == "decode" and prompt is not None and context is None:
            raise RooflineError("decode sweeps take --context, not --prompt")
        lengths = parse_int_list((prompt if phase == "prefill" else context) or str(DEFAULT_LENGTH),
                                 "--prompt" if phase == "prefill" else "--context")
        batches = parse_int_list(batch, "--batch")
        machines = [m for m in parse_str_list(machine) if m]
        n_rows = (len(batches) * len(lengths) * len(machines) * len(parse_str_list(weights_dtype))
                  * len(parse_str_list(kv_dtype)) * len(parse_str_list(dtype)))
        if n_rows > MAX_SWEEP_ROWS:
            raise RooflineError(f"the sweep has {n_rows:,} rows (batches × lengths × machines × dtypes); "
                                f"at most {MAX_SWEEP_ROWS:,}: take larger steps or fewer values")
        hit = parse_positive_int(experts_hit, "--experts-hit") if experts_hit is not None else None
        rows = sweep(model, machines, phase, batches, lengths, fusion,
                     [w or "bf16" for w in parse_str_list(weights_dtype)], parse_str_list(kv_dtype), act_dtype,
                     parse_str_list(dtype), hit, parse_overrides(overrides), per_kernel=bool(png or svg))
        if png or svg:
            _sweep_chart(rows, model, phase, batches, lengths, png, svg, parse_overrides(overrides))
        seq_key = "prompt" if phase == "prefill" else "context"
        renamed = [{(seq_key if k == "seq" else k): v for k, v in r.items() if k != "kernels"} for r in rows]
        columns = [seq_key if c == "seq" else c for c in SWEEP_COLUMNS]
        _write_rows(renamed, columns, fmt, output, csv_path, lambda: sweep_text(rows, seq_key))

    @cli.command("compare")
    @click.argument("models", nargs=-1, required=True)
    @click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True,
                  help="Machine(s), comma-separated: h100,h200,b200.")
    @click.option("--batch", "-b", default="1", show_default=True, help="Batch size (sequences per step).")
    @click.option("--prompt", "-p", default=None, help=f"Prompt length (prefill; default {DEFAULT_LENGTH}).")
    @click.option("--context", "-c", default=None, help=f"Context length (decode; default {DEFAULT_LENGTH}).")
    @click.option("--weights-dtype", default="bf16", show_default=True, help="Weight dtype(s), comma-separated.")
    @click.option("--kv-dtype", default=None, help="KV cache dtype(s), comma-separated: bf16,fp8,nvfp4.")
    @click.option("--dtype", default=None, help="Compute dtype(s), comma-separated.")
    @_common_options
    @click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
    @click.option("--output", "-o", default=None, metavar="FILE", help="Write the table/CSV/JSON to FILE.")
    @click.option("--csv", "csv_path", default=None, metavar="FILE", help="Also write the rows as CSV to FILE.")
    def compare_command(models: tuple[str, ...], machine: str, batch: str, prompt: str | None, context: str | None,
                        weights_dtype: str, kv_dtype: str | None, dtype: str | None, phase: str, fusion: str,
                        act_dtype: str, experts_hit: str | None, overrides: tuple[str, ...], fmt: str,
                        output: str | None, csv_path: str | None) -> None:
        """Compare MODELS side by side (× machines × dtypes): KV per token, intensity, decode limit, crossover, fit.

        \b
        Examples:
          roofline compare llama-3-70b qwen2.5-72b deepseek-v3 --batch 64 --context 32768
          roofline compare llama-3-70b --kv-dtype bf16,fp8,nvfp4 --context 131072 --batch 32
          roofline compare mistral-7b --machine h100,b200,mi300x --batch 8
        """
        from roofline.fileio import check_outputs
        from roofline.models.analysis import compare

        check_outputs({"--output": output, "--csv": csv_path})
        b = parse_positive_int(batch, "--batch")
        seq = _length(phase, parse_positive_int(prompt, "--prompt") if prompt is not None else None,
                      parse_positive_int(context, "--context") if context is not None else None)
        hit = parse_positive_int(experts_hit, "--experts-hit") if experts_hit is not None else None
        rows = compare(list(models), [m for m in parse_str_list(machine) if m], phase, b, seq, fusion,
                       [w or "bf16" for w in parse_str_list(weights_dtype)], parse_str_list(kv_dtype), act_dtype,
                       parse_str_list(dtype), hit, parse_overrides(overrides))
        seen: set[str] = set()
        for r in rows:
            for w in r["warnings"]:
                if w not in seen:
                    seen.add(w)
                    _echo_warning(f"{r['model']} on {r['machine']}: {w}")
        columns = [k for k in rows[0] if k != "warnings"]
        _write_rows(rows, columns, fmt, output, csv_path, lambda: compare_text(rows))


def _sweep_chart(rows: list[dict[str, Any]], model: str, phase: str, batches: list[int], lengths: list[int],
                 png: str | None, svg: str | None, overrides: dict[str, str]) -> None:
    """Intensity against the axis that varies most, for the first machine and dtype combination."""
    from roofline.models.analysis import decode_limit
    from roofline.models.config import load_config
    from roofline.report.outputs import write_sweep_chart

    first = rows[0]
    same = [r for r in rows if (r["machine"], r["weights_dtype"], r["kv_dtype"], r["compute_dtype"])
            == (first["machine"], first["weights_dtype"], first["kv_dtype"], first["compute_dtype"])]
    x = "batch" if len(batches) >= len(lengths) else "seq"
    fixed = "seq" if x == "batch" else "batch"
    seq_key = "prompt" if phase == "prefill" else "context"
    picked = [{(seq_key if k == "seq" else k): v for k, v in r.items()} for r in same if r[fixed] == first[fixed]]
    limit = None
    if phase == "decode" and x == "batch":
        limit = decode_limit(load_config(model, overrides), int(first["seq"]), first["kv_dtype"]).flop_per_byte
    label = seq_key if fixed == "seq" else fixed
    title = f"{first['model']} {phase} on {first['machine']}, {label} {first[fixed]}"
    if len(picked) < len(rows):  # the chart draws one series; say which, rather than drop the others silently
        kv = first["kv_dtype"]
        _echo_warning(f"the chart shows {len(picked)} of the {len(rows)} rows: {first['machine']}, weights "
                      f"{first['weights_dtype']}, KV {kv}, compute {first['compute_dtype']}, {label} {first[fixed]} "
                      f"(the first combination); the table has every row")
        title += f", weights {first['weights_dtype']}, KV {kv}"
    for path in write_sweep_chart(picked, seq_key if x == "seq" else x, png=png, svg=svg,
                                  ridge=first["ridge_flop_per_byte"], limit=limit, title=title):
        click.echo(f"wrote {path}", err=True)


# --- text ----------------------------------------------------------------------------------------------

def model_text(a: Any) -> str:
    from roofline.report.text import placements_table
    from roofline.units import format_bytes, format_count, format_flop, format_intensity, format_time
    from roofline.vocab import Phase

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
    lines.append(f"total: {format_flop(a.flop)}, {format_bytes(a.bytes)} (weights {format_bytes(roles['weight'])}, "
                 f"KV cache {format_bytes(roles['kv_cache'])}, activations {format_bytes(roles['activation'])})")
    lines.append(f"       {format_intensity(a.flop_per_byte, 4)} vs ridge {format_intensity(a.ridge_flop_per_byte, 4)}"
                 f" → {a.bound}-bound; time floor {format_time(a.time_s)}, {a.tokens_per_s:,.0f} tokens/s; "
                 f"{a.memory_bound_share:.0%} of the time memory-bound")
    lines.append("")
    lines.append("fusion plans (same FLOPs, fewer bytes):")
    base = a.plans["none"]
    for name, g in a.plans.items():
        lines.append(f"  {name:<6} {len(g.placements):>3} kernels  {format_bytes(g.bytes):>9}  "
                     f"{format_intensity(g.flop_per_byte):>12}  {format_time(g.time_s):>9}  "
                     f"({g.time_s / base.time_s:.2f}× the time of none)")
    if a.phase == Phase.DECODE:
        lim = a.decode_limit
        lines.append("")
        graph_limit = format_intensity(a.crossover.limit_flop_per_byte, 4)
        lines.append(f"decode limit as the batch grows: {format_intensity(lim.flop_per_byte, 4)} "
                     f"(the seed's formula; graph totals tend to {graph_limit})")
    cross = a.crossover
    lines.append(f"crossover batch: {cross.reason}")
    mem = a.memory
    if mem.fits:
        fit = f"fits on one {a.machine.id} ({format_bytes(mem.capacity_bytes or 0, binary=True)})"
    elif mem.devices is not None:
        fit = (f"DOES NOT FIT on one {a.machine.id} ({format_bytes(mem.capacity_bytes or 0, binary=True)}): "
               f"needs {mem.devices} devices")
    else:
        fit = mem.warning
    lines.append(f"memory: weights {format_bytes(mem.weights_bytes, binary=True)} + KV cache "
                 f"{format_bytes(mem.kv_cache_bytes, binary=True)} = "
                 f"{format_bytes(mem.total_bytes, binary=True)}; {fit}")
    return "\n".join(lines)


def _f(fmt: Callable[[float], str]) -> Callable[[Any], str]:
    return lambda v: "—" if v is None else fmt(v)


def sweep_text(rows: list[dict[str, Any]], seq_key: str) -> str:
    from roofline.units import format_bytes, format_flop, format_intensity, format_time

    cols: list[tuple[str, str, Callable[[Any], str]]] = [
            ("machine", "machine", str), ("weights_dtype", "weights", str), ("kv_dtype", "KV", str),
            ("compute_dtype", "compute", str), ("batch", "batch", str), ("seq", seq_key, str),
            ("flop", "FLOPs", _f(format_flop)), ("bytes", "bytes", _f(format_bytes)),
            ("flop_per_byte", "FLOP/B", _f(format_intensity)), ("bound", "bound", str),
            ("time_s", "time floor", _f(format_time)), ("tokens_per_s", "tokens/s", _f(lambda v: f"{v:,.0f}")),
            ("memory_bytes", "weights+KV", _f(format_bytes)), ("devices", "devices", _f(lambda v: str(v)))]
    first = rows[0]
    return _table(rows, cols, f"{first['model']} {first['phase']} sweep, plan {first['plan']}")


def compare_text(rows: list[dict[str, Any]]) -> str:
    from roofline.units import format_bytes, format_count, format_intensity, format_time

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
    return _table(rows, cols, f"{first['phase']}, batch {first['batch']}, {what} {first['seq']}, plan {first['plan']}")
