"""`roofline model`, `roofline sweep` and `roofline compare`: transformers on the roofline.

Each command parses its options, calls roofline.models, and prints through roofline.report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from roofline.cli.common import COUNT_HELP, dump, echo, indented_json, listed, one_of, outputs, warn, wrote
from roofline.cli.options import (
    CALIBRATION_HELP,
    ENGINE_HELP,
    WEIGHTS_DEFAULT_HELP,
    allreduce_config,
    allreduce_option,
    allreduce_system,
    calibration_options,
    expert_config,
    expert_options,
    expert_split,
    length,
    parse_experts_hit,
    parse_overrides,
    parse_str_list,
    say_decimal_lengths,
    split_of,
    split_options,
    step_options,
    write_text,
)
from roofline.errors import RooflineError
from roofline.hardware.catalog import DEFAULT_MACHINE
from roofline.units import parse_int_list, parse_positive_int

MAX_SWEEP_ROWS = 100_000  # every axis together (a 100,000-row CSV takes seconds)
MAX_COMPARE_ROWS = 1_000  # each row is a whole step analysed (tens of ms): 1,000 rows take half a minute


def _dtype_list(text: str | None, flag: str) -> list[str | None]:
    """--weights-dtype, --kv-dtype, --dtype of sweep and compare (',' alone names none: refused)."""
    values = parse_str_list(text)
    if text is not None and values == [None]:
        raise RooflineError(f"{flag} {text!r} names no dtype; give one or more, comma-separated, e.g. bf16,fp8")
    return values


def _machines(text: str) -> list[str]:
    """--machine of sweep and compare: one or more, comma-separated (',' alone names none)."""
    machines = [m for m in parse_str_list(text) if m]
    if not machines:
        raise RooflineError(f"--machine {text!r} names no machine; give one or more, comma-separated, "
                            "e.g. h100,b200 (see `roofline machines`)")
    return machines


def split_list_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The split axes of sweep and compare, each a comma list (1,2,4,8); one row per combination."""
    options = [
        click.option("--tp", "tp_list", default="1", show_default=True,
                     help="Tensor parallel degrees, comma-separated: 1,2,4,8."),
        click.option("--pp", "pp_list", default="1", show_default=True, help="Pipeline stages, comma-separated."),
        click.option("--ep", "ep_list", default="1", show_default=True,
                     help="Expert parallel degrees (MoE; with --dp and --tp 1), comma-separated."),
        click.option("--dp", "dp_list", default="1", show_default=True,
                     help="Data-parallel replicas, comma-separated (each batch a multiple of each)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _splits(tp: str, pp: str, ep: str, dp: str) -> list[Any]:
    """Every combination of the split lists, as Splits (an invalid one is an error that names it)."""
    from roofline.parallel import Split

    axes = [parse_int_list(text, label) for text, label in ((tp, "--tp"), (pp, "--pp"), (ep, "--ep"), (dp, "--dp"))]
    return [Split(tp=t, pp=p, ep=e, dp=d) for t in axes[0] for p in axes[1] for e in axes[2] for d in axes[3]]


def _write_rows(rows: list[dict[str, Any]], columns: Sequence[str], fmt: str, as_json: bool, output: str | None,
                csv_path: str | None, table_text: Callable[[], str]) -> None:
    """Rows as a table, CSV or JSON on stdout or to --output, and also as CSV to --csv."""
    from roofline.report.text.model import rows_csv

    if as_json:
        if fmt not in ("table", "json"):
            raise RooflineError(f"--json and --format {fmt} ask for two formats: give one")
        fmt = "json"
    # CSV cells are flat: the expected band {low, high} becomes two columns beside the floor
    flat_columns = [c for k in columns for c in ((f"{k}.low", f"{k}.high") if k == "expected_time_s" else (k,))]
    flat_rows = [{**r, **{f"expected_time_s.{e}": v for e, v in (r.get("expected_time_s") or {}).items()}}
                 for r in rows]
    if csv_path:
        write_text(csv_path, rows_csv(flat_rows, flat_columns))
    if fmt == "json":
        text = indented_json(rows)
    elif fmt == "csv":
        text = rows_csv(flat_rows, flat_columns)
    else:
        text = table_text()
    write_text(output, text)


@click.command("model")
@click.argument("model")
@click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True, help="Machine id, alias or file.")
@click.option("--batch", "-b", default="1", show_default=True, help="Sequences in the step. " + COUNT_HELP)
@click.option("--prompt", "-p", default=None,
              help="Prompt length (prefill; default 2048, at most the model's maximum). Decode refuses it alone "
                   "and warns that it ignores it beside --context. " + COUNT_HELP)
@click.option("--context", "-c", default=None,
              help="Context length a new token attends to (decode; default 2048, at most the model's maximum). "
                   "Prefill refuses it alone and warns that it ignores it beside --prompt. " + COUNT_HELP)
@click.option("--weights-dtype", default=None,
              help=f"Weight storage dtype (int4, fp8, nvfp4, ...; {WEIGHTS_DEFAULT_HELP}).")
@click.option("--kv-dtype", default=None, help="KV cache dtype (default: the activation dtype).")
@click.option("--dtype", default=None, help="Compute dtype, choosing the peak (default: the activation dtype).")
@click.option("--logits", type=click.Choice(["last", "all"]), default="last", show_default=True,
              help="Prefill: the LM head projects the last position of each sequence (as serving engines do) "
                   "or all of them (as a plain forward() does: 2·(S−1)·h·V more FLOPs per sequence).")
@click.option("--mla", type=click.Choice(["absorbed", "expanded"]), default=None,
              help="MLA decode: attention over the compressed latent with W_UK/W_UV absorbed (default, as "
                   "DeepSeek runs it) or K and V decompressed and cached per head (as Hugging Face runs it).")
@step_options
@split_options
@expert_options
@allreduce_option
@click.option("--explain", is_flag=True,
              help="Derive the KV cache size, the decode limit and every kernel step by step.")
@calibration_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--csv", "csv_path", default=None, metavar="FILE", help="Write the per-kernel table as CSV.")
@click.option("--png", default=None, metavar="FILE", help="Write the roofline chart of every kernel (PNG).")
@click.option("--svg", default=None, metavar="FILE", help="Write the roofline chart of every kernel (SVG).")
@click.option("--html", default=None, metavar="FILE", help="Write the interactive page (all fusion plans).")
@click.option("--levels-png", default=None, metavar="FILE",
              help="Write the chip-level charts of every kernel (PNG): the hierarchical roofline (a point per "
                   "memory level, as Nsight Compute draws it) and the sub-roofs (matrix, vector, exp).")
def model_command(model: str, machine: str, batch: str, prompt: str | None, context: str | None,
                  weights_dtype: str | None, kv_dtype: str | None, dtype: str | None, logits: str, mla: str | None,
                  phase: str, fusion: str, act_dtype: str, experts_hit: str | None, overrides: tuple[str, ...],
                  tp: int, pp: int, ep: int, dp: int, devices: int | None, memory_utilization: float, overlap: bool,
                  dispatch_dtype: str | None, dispatch_per_node: bool, redundant_experts: str | None,
                  two_batch_overlap: bool, allreduce: str, explain: bool, engine: str | None, calibration: str | None,
                  as_json: bool, csv_path: str | None,
                  png: str | None, svg: str | None, html: str | None, levels_png: str | None) -> None:
    """Every kernel of one forward step of MODEL (a preset: `roofline models` lists them; or a config.json
    path) on a machine: FLOPs and bytes of one run, time of all its runs, and the step's total.

    \b
    Examples:
      roofline model llama-3-70b --machine h100 --phase decode --batch 64 --context 8192
      roofline model llama-3-70b --phase prefill --prompt 4096 --fusion none
      roofline model deepseek-v3 --machine b200 --batch 32 --context 32768 --kv-dtype fp8 --explain
      roofline model ./my-model/config.json --json
      roofline model llama-3-70b --machine dgx-h100 --tp 8 --batch 64 --context 8192
    """
    from roofline.models import analyze_model, model_dtypes

    outputs([("MODEL", model), ("--machine", machine), ("--calibration", calibration)],
            csv=csv_path, png=png, svg=svg, html=html, levels_png=levels_png)
    if levels_png is not None:
        from roofline.report.charts.levels import check_levels_png

        check_levels_png(levels_png)
    one_of(as_json, explain)
    config, changes = expert_config(*_run_options(model, overrides, logits, mla), dispatch_dtype, dispatch_per_node,
                                    redundant_experts, two_batch_overlap)
    config, changes = allreduce_config(config, changes, allreduce)
    allreduce_system(machine, allreduce)
    split = split_of(tp, pp, ep, dp, devices, machine)
    expert_split(config, split)
    a = analyze_model(config, machine, phase, parse_positive_int(batch, "--batch"), length(phase, prompt, context),
                      fusion, model_dtypes(weights_dtype, act_dtype, kv_dtype, dtype),
                      parse_experts_hit(experts_hit), changes, split, memory_utilization, overlap)
    for w in a.warnings:
        warn(w)
    if a.memory.warning:
        warn(a.memory.warning)
    if csv_path:
        from roofline.report.text.model import kernel_csv

        write_text(csv_path, kernel_csv(a.kernel_rows()))
    if png or svg or html:
        from roofline.report.notebook import model_scenarios
        from roofline.report.outputs import write_model_outputs

        for path in write_model_outputs(model_scenarios(a), png=png, svg=svg, html=html, title=a.title):
            wrote(path)
    if levels_png is not None:
        from roofline.report.charts.levels import write_levels_png
        from roofline.report.notebook import model_scenarios

        write_levels_png(model_scenarios(a)[0].analysis.placements, levels_png, title=a.title)
        wrote(levels_png)
    from roofline.calibration.choose import choose, total

    chosen = choose(a.machine.id, engine, calibration)
    placed = a.placements
    bands = [chosen.band(p) for p in placed]
    for text in dict.fromkeys(w for b in bands for w in b.warnings):
        warn(text)
    if as_json:
        d = a.to_dict()
        for row, band in zip(d["kernels"], bands, strict=True):
            row["expected_time_s"] = band.to_dict()
        d["totals"]["expected_time_s"] = total(placed, bands)
        if (hidden := a.overlap_summary()) is not None:  # the band with it; expected_time_s above is without
            from roofline.calibration.choose import total_overlapped

            key = "two_batch_overlap" if hidden["option"] == "--two-batch-overlap" else "overlap"
            d["totals"][f"expected_time_s_{key}"] = total_overlapped(placed, bands, a.overlap)
        d["calibration"] = chosen.describe()
        dump(d)
    elif explain:
        from roofline.explain import explain_kernels, explain_model

        echo(explain_model(a))
        echo("\nkernels\n")
        echo(explain_kernels(a))
    else:
        from roofline.report.text.expected import expected_total_line
        from roofline.report.text.model import model_text

        echo(model_text(a))
        echo(expected_total_line(placed, bands, chosen.describe()))
        if (hidden := a.overlap_summary()) is not None:
            from roofline.calibration.choose import total_overlapped
            from roofline.report.text.expected import expected_overlap_line

            echo(expected_overlap_line(hidden["option"], total_overlapped(placed, bands, a.overlap)))


def _run_options(model: str, overrides: tuple[str, ...], logits: str, mla: str | None) -> tuple[Any, Any]:
    """(model, overrides) for analyze_model: with --logits all or --mla, the parsed config carrying them."""
    if logits == "last" and mla is None:
        return model, parse_overrides(overrides)
    from dataclasses import replace

    from roofline.models import load_config

    config = load_config(model, parse_overrides(overrides))
    if mla is not None and not config.is_mla:  # as --experts-hit on a dense model: said, not silently dropped
        warn(f"--mla {mla} ignored: {config.name} has no multi-head latent attention (kv_lora_rank is 0)")
    from roofline.vocab import Logits, MlaForm

    return replace(config, logits=Logits(logits), mla=MlaForm(mla) if mla else None), None


def _grid_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Machines and dtypes as comma-separated lists, for sweep and compare."""
    options = [
        click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True,
                     help="Machine(s), comma-separated: h100,b200."),
        click.option("--weights-dtype", default=None,
                     help=f"Weight dtype(s), comma-separated ({WEIGHTS_DEFAULT_HELP})."),
        click.option("--kv-dtype", default=None, help="KV cache dtype(s), comma-separated: bf16,fp8,nvfp4."),
        click.option("--dtype", default=None, help="Compute dtype(s), comma-separated."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _table_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--engine", type=click.Choice(["trtllm", "vllm", "sglang"]), default=None, help=ENGINE_HELP),
        click.option("--calibration", default=None, metavar="FILE", help=CALIBRATION_HELP),
        click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
                     show_default=True),
        click.option("--json", "as_json", is_flag=True, help="Print JSON: the same as --format json."),
        click.option("--output", "-o", default=None, metavar="FILE", help="Write the table/CSV/JSON to FILE."),
        click.option("--csv", "csv_path", default=None, metavar="FILE", help="Also write the rows as CSV to FILE."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.command("sweep")
@click.argument("model")
@_grid_options
@click.option("--batch", "-b", default="1:256", show_default=True,
              help="Batch sizes: 1,8,64 or 1:256 (powers of two) or 1:256:x4 or 8:64:8. " + COUNT_HELP)
@click.option("--prompt", "-p", default=None, help="Prompt lengths (prefill), as --batch: 1k:128k.")
@click.option("--context", "-c", default=None, help="Context lengths (decode), as --batch: 1Ki:128Ki.")
@step_options
@split_list_options
@_table_options
@click.option("--png", default=None, metavar="FILE", help="Chart intensity against the swept axis (PNG).")
@click.option("--svg", default=None, metavar="FILE", help="Chart intensity against the swept axis (SVG).")
def sweep_command(model: str, machine: str, weights_dtype: str | None, kv_dtype: str | None, dtype: str | None,
                  batch: str, prompt: str | None, context: str | None, phase: str, fusion: str,
                  act_dtype: str, experts_hit: str | None, overrides: tuple[str, ...], tp_list: str, pp_list: str,
                  ep_list: str, dp_list: str, engine: str | None, calibration: str | None, fmt: str, as_json: bool,
                  output: str | None, csv_path: str | None, png: str | None, svg: str | None) -> None:
    """Sweep MODEL over batch × length × dtype × machine × split: intensity, time floor, tokens/s, bound.

    \b
    Examples:
      roofline sweep llama-3-70b --batch 1:512 --context 8192,131072
      roofline sweep llama-3-70b --batch 64 --context 1024:131072 --kv-dtype bf16,fp8 --format csv
      roofline sweep mixtral-8x7b --machine h100,b200 --batch 1:256 --png sweep.png
      roofline sweep llama-3-70b --machine dgx-h100 --tp 1,2,4,8 --batch 8:64:8 --context 8192
    """
    from roofline.models import SWEEP_COLUMNS, deployments, dtype_steps
    from roofline.models.sweep import sweep
    from roofline.report.text.model import sweep_text
    from roofline.report.text.split_search import split_sweep_text

    outputs([("MODEL", model), *listed("--machine", machine), ("--calibration", calibration)], output=output,
            csv=csv_path, png=png, svg=svg)
    if phase == "prefill" and context is not None and prompt is None:
        raise RooflineError("prefill sweeps take --prompt, not --context")
    if phase == "decode" and prompt is not None and context is None:
        raise RooflineError("decode sweeps take --context, not --prompt")
    if prompt is not None and context is not None:
        ignored = "--context" if phase == "prefill" else "--prompt"
        warn(f"{ignored} ignored: a {phase} sweep's lengths are its "
             f"{'--prompt' if phase == 'prefill' else '--context'} values")
    given = prompt if phase == "prefill" else context
    lengths = parse_int_list(given, "--prompt" if phase == "prefill" else "--context") if given else None
    if given:
        say_decimal_lengths(given, "--prompt" if phase == "prefill" else "--context", listed=True)
    batches = parse_int_list(batch, "--batch")
    machines = _machines(machine)
    splits = _splits(tp_list, pp_list, ep_list, dp_list)
    weights, kvs, computes = (_dtype_list(weights_dtype, "--weights-dtype"), _dtype_list(kv_dtype, "--kv-dtype"),
                              _dtype_list(dtype, "--dtype"))
    n_rows = len(batches) * len(lengths or [0]) * len(machines) * len(weights) * len(kvs) * len(computes) * len(splits)
    if n_rows > MAX_SWEEP_ROWS:
        raise RooflineError(f"the sweep has {n_rows:,} rows (batches × lengths × machines × dtypes × splits); "
                            f"at most {MAX_SWEEP_ROWS:,}: take larger steps or fewer values")
    steps = dtype_steps(model, phase, fusion, weights, kvs, act_dtype, computes, parse_experts_hit(experts_hit),
                        parse_overrides(overrides))
    expected = _Chooser(engine, calibration).expected
    deployed = deployments(machines, splits)
    rows = sweep(steps, deployed, batches, lengths, expected=expected)
    split = any(not sp.trivial for sp in splits)
    if png or svg:
        def drawn(c: Any) -> list[dict[str, Any]]:
            """The chart's series again, with each kernel's time (what its bars draw): only its rows, not
            the whole grid's (a 100,000-point sweep draws one line of at most ~1,000)."""
            first = rows[0]
            along_batch = c.x == "batch"
            return sweep(steps[:1], [d for d in deployed if d.split == c.split and d.machine.id in c.machines],
                         batches if along_batch else [first["batch"]], [first["seq"]] if along_batch else lengths,
                         per_kernel=True, expected=expected)

        _sweep_chart(rows, model, phase, batches, sorted({int(r["seq"]) for r in rows}), png, svg,
                     parse_overrides(overrides), drawn)
    seq_key = "prompt" if phase == "prefill" else "context"
    renamed = [{(seq_key if k == "seq" else k): v for k, v in r.items() if k != "kernels"} for r in rows]
    columns = [seq_key if c == "seq" else c for c in SWEEP_COLUMNS]
    _write_rows(renamed, columns, fmt, as_json, output, csv_path,
                lambda: split_sweep_text(rows, seq_key) if split else sweep_text(rows, seq_key))


@click.command("compare")
@click.argument("models", nargs=-1, required=True)
@_grid_options
@click.option("--batch", "-b", default="1", show_default=True,
              help="Batch sizes (sequences per step), as sweep takes them: 64, 1,8,64, 1:256 (powers of two) or "
                   "8:64:8; a table per batch and length. " + COUNT_HELP)
@click.option("--prompt", "-p", default=None,
              help="Prompt lengths (prefill; default 2048, at most each model's maximum), as --batch.")
@click.option("--context", "-c", default=None,
              help="Context lengths (decode; default 2048, at most each model's maximum), as --batch: 8k,128k.")
@step_options
@split_list_options
@_table_options
def compare_command(models: tuple[str, ...], machine: str, weights_dtype: str | None, kv_dtype: str | None,
                    dtype: str | None, batch: str, prompt: str | None, context: str | None, phase: str, fusion: str,
                    act_dtype: str, experts_hit: str | None, overrides: tuple[str, ...], tp_list: str, pp_list: str,
                    ep_list: str, dp_list: str, engine: str | None, calibration: str | None, fmt: str,
                    as_json: bool, output: str | None, csv_path: str | None) -> None:
    """Compare MODELS side by side (× machines × splits × dtypes): KV/token, intensity, decode limit, crossover, fit.

    \b
    Examples:
      roofline compare llama-3-70b qwen2.5-72b deepseek-v3 --batch 64 --context 32768
      roofline compare llama-3-70b --kv-dtype bf16,fp8,nvfp4 --context 131072 --batch 32
      roofline compare mistral-7b --machine h100,b200,mi300x --batch 8
      roofline compare llama-3-70b --machine dgx-h100 --tp 4,8 --batch 64 --context 8192
      roofline compare llama-3-8b mistral-7b --batch 1,8,64 --context 8k,32Ki
    """
    from roofline.models import compare
    from roofline.report.text.model import compare_text, grouped_warnings
    from roofline.report.text.split_search import split_compare_text

    outputs([*[("MODELS", m) for m in models], *listed("--machine", machine), ("--calibration", calibration)],
            output=output, csv=csv_path)
    splits = _splits(tp_list, pp_list, ep_list, dp_list)
    machines, batches = _machines(machine), parse_int_list(batch, "--batch")
    lengths: list[int | None] = length(phase, prompt, context, parse_int_list) or [None]
    weights, kvs, computes = (_dtype_list(weights_dtype, "--weights-dtype"), _dtype_list(kv_dtype, "--kv-dtype"),
                              _dtype_list(dtype, "--dtype"))
    n_rows = len(models) * len(machines) * len(splits) * len(batches) * len(lengths) * len(weights) * len(kvs) \
        * len(computes)
    if n_rows > MAX_COMPARE_ROWS:
        raise RooflineError(f"the comparison has {n_rows:,} rows (models × machines × splits × batches × lengths × "
                            f"dtypes), each a step analysed; at most {MAX_COMPARE_ROWS:,}: give fewer values, or "
                            "use `roofline sweep` for a long grid")
    # one table per batch and length, as sweep takes them: the same list syntax (units.parse_int_list)
    band = _Chooser(engine, calibration).band
    groups = [compare(list(models), machines, phase, b, seq, fusion, weights, kvs, act_dtype, computes,
                      parse_experts_hit(experts_hit), parse_overrides(overrides), splits, band=band)
              for b in batches for seq in lengths]
    rows = [r for group in groups for r in group]
    split = any(not sp.trivial for sp in splits)
    for line in grouped_warnings(rows):  # each warning once, with the rows it concerns
        warn(line)
    columns = [k for k in rows[0] if k != "warnings"]
    _write_rows(rows, columns, fmt, as_json, output, csv_path,
                lambda: "\n\n".join(split_compare_text(g) if split else compare_text(g) for g in groups))


class _Chooser:
    """The expected-time model of each device under --engine and --calibration (roofline.calibration.choose,
    as `roofline model` picks it), chosen once a device; its warnings printed once."""

    def __init__(self, engine: str | None, calibration: str | None) -> None:
        self.engine, self.calibration = engine, calibration
        self.chosen: dict[str, Any] = {}
        self.said: set[str] = set()

    def of(self, device: str) -> Any:
        if device not in self.chosen:
            from roofline.calibration.choose import choose

            self.chosen[device] = choose(device, self.engine, self.calibration)
        return self.chosen[device]

    def expected(self, device: str) -> Any:
        c = self.of(device)
        if c.times is not None:
            if self.calibration and c.times.machine != device and device not in self.said:
                self.said.add(device)
                warn(f"--calibration {self.calibration} was measured on {c.times.machine}, not {device}: its band "
                     "may not hold here")
            return c.times
        return c.bench.efficiency_ranges()

    def band(self, p: Any) -> tuple[float, float]:
        b = self.of(p.machine.id).band(p)
        for w in b.warnings:
            if w not in self.said:
                self.said.add(w)
                warn(w)
        return b.low_s, b.high_s


def _sweep_chart(rows: list[dict[str, Any]], model: str, phase: str, batches: list[int], lengths: list[int],
                 png: str | None, svg: str | None, overrides: dict[str, str],
                 drawn: Callable[[Any], list[dict[str, Any]]]) -> None:
    """The chart of the series roofline.models.sweep.chart_series picks, said when it is not every row;
    `drawn(series)`: that series' rows with their kernels (sweep(..., per_kernel=True) on them alone)."""
    from dataclasses import replace

    from roofline.models import load_config
    from roofline.models.sweep import chart_series
    from roofline.report.outputs import write_sweep_chart

    c = chart_series(rows, load_config(model, overrides), phase, batches, lengths)
    seq_key = "prompt" if phase == "prefill" else "context"
    kernels = {(r["machine"], r["batch"], r["seq"]): r["kernels"] for r in drawn(c)}
    c = replace(c, rows=tuple({**r, "kernels": kernels[r["machine"], r["batch"], r[seq_key]]} for r in c.rows))
    first = rows[0]
    title = f"{first['model']} {phase} on {', '.join(c.machines)}, {c.fixed_label} {first[c.fixed]}"
    if c.partial:  # the chart draws one series; say which, rather than drop the others silently
        kv = first["kv_dtype"]
        where = "" if c.split.trivial else f", split {c.split}"
        warn(f"the chart shows {len(c.rows)} of the {c.of_rows} rows: {', '.join(c.machines)}{where}, weights "
             f"{first['weights_dtype']}, KV {kv}, compute {first['compute_dtype']}, {c.fixed_label} {first[c.fixed]} "
             f"(the first combination); the table has every row")
        title += f", weights {first['weights_dtype']}, KV {kv}" + where
    by_machine: dict[str, Any] = {"series": "machine"} if len(c.machines) > 1 else {}  # a line set per machine
    for path in write_sweep_chart(list(c.rows), c.x, png=png, svg=svg, ridge=first["ridge_flop_per_byte"],
                                  limit=c.limit_flop_per_byte, title=title, **by_machine):
        wrote(path)


COMMANDS = (model_command, sweep_command, compare_command)
