"""`roofline model`, `roofline sweep` and `roofline compare`: transformers on the roofline.

Each command parses its options, calls roofline.models, and prints through roofline.report.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import click

from roofline.cli.common import (
    COUNT_HELP,
    DEFAULT_FUSION,
    DEFAULT_MEMORY_UTILIZATION,
    MODEL_FUSIONS,
    PLAN_HELP,
    POS,
    dump,
    one_of,
    outputs,
    warn,
    wrote,
)
from roofline.errors import RooflineError
from roofline.hardware.catalog import DEFAULT_MACHINE
from roofline.units import parse_int_list, parse_positive_int

MAX_SWEEP_ROWS = 100_000  # every axis together (a 100,000-row CSV takes seconds)
MAX_COMPARE_ROWS = 1_000  # each row is a whole step analysed (tens of ms): 1,000 rows take half a minute


WEIGHTS_DEFAULT_HELP = ("default: what the checkpoint stores, from config.json's quantization_config "
                        "(deepseek-v3: fp8 with 128x128 block scales), else bf16")


def parse_str_list(text: str | None) -> list[str | None]:
    if text is None:
        return [None]
    values = [p.strip() for p in text.split(",") if p.strip()]
    return list(values) or [None]


def _dtype_list(text: str | None, flag: str) -> list[str | None]:
    """--weights-dtype, --kv-dtype, --dtype of sweep and compare (',' alone names none: refused)."""
    values = parse_str_list(text)
    if text is not None and values == [None]:
        raise RooflineError(f"{flag} {text!r} names no dtype; give one or more, comma-separated, e.g. bf16,fp8")
    return values


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise RooflineError(f"--set takes KEY=VALUE (a config.json field), got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _length(phase: str, prompt: str | None, context: str | None,
            parse: Callable[[str, str], Any] = parse_positive_int) -> Any:
    """The prompt (prefill) or context (decode) length asked for; None: the library's default, the
    model's trained maximum at most. `parse`: one length (parse_positive_int) or a list (parse_int_list)."""
    if phase == "prefill":
        if context is not None and prompt is None:
            raise RooflineError(f"prefill takes --prompt P (the prompt length), not --context; "
                                f"write --prompt {context}, or --phase decode --context {context}")
        if context is not None:
            warn(f"--context {context} ignored: a prefill step's length is its prompt (--prompt {prompt}); "
                 "--context is decode's")
        return parse(prompt, "--prompt") if prompt is not None else None
    if prompt is not None and context is None:
        raise RooflineError(f"decode takes --context L (the tokens attended to), not --prompt; "
                            f"write --context {prompt}, or --phase prefill --prompt {prompt}")
    if prompt is not None:
        warn(f"--prompt {prompt} ignored: a decode step's length is its context (--context {context}); "
             "--prompt is prefill's")
    return parse(context, "--context") if context is not None else None


def _machines(text: str) -> list[str]:
    """--machine of sweep and compare: one or more, comma-separated (',' alone names none)."""
    machines = [m for m in parse_str_list(text) if m]
    if not machines:
        raise RooflineError(f"--machine {text!r} names no machine; give one or more, comma-separated, "
                            "e.g. h100,b200 (see `roofline machines`)")
    return machines


def _experts_hit(text: str | None) -> int | None:
    return parse_positive_int(text, "--experts-hit") if text is not None else None


def split_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """How the step is split over devices, and how memory is counted."""
    options = [
        click.option("--tp", type=POS, default=1, show_default=True,
                     help="Tensor parallel: heads, MLP columns/rows and vocabulary over TP devices (2 all-reduces "
                          "per layer)."),
        click.option("--pp", type=POS, default=1, show_default=True,
                     help="Pipeline parallel: the layers in PP stages; activations sent stage to stage."),
        click.option("--ep", type=POS, default=1, show_default=True,
                     help="Expert parallel (MoE): the experts over EP of the DP replicas; all-to-all dispatch "
                          "and combine."),
        click.option("--dp", type=POS, default=1, show_default=True,
                     help="Data parallel: DP replicas, each running batch/DP sequences."),
        click.option("--devices", type=POS, default=None,
                     help="Devices in all; alone, tensor parallel within a node and pipeline stages across nodes."),
        click.option("--memory-utilization", type=float, default=DEFAULT_MEMORY_UTILIZATION, show_default=True,
                     help="Usable share of each device's memory (vLLM's gpu_memory_utilization). A fit that "
                          "leaves under 5% of the usable memory free is reported as tight, with its headroom."),
        click.option("--overlap", is_flag=True,
                     help="Assume communication runs under compute (the step takes the larger of the two)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _split(tp: int, pp: int, ep: int, dp: int, devices: int | None, machine: str) -> Any:
    from roofline.hardware import get_system
    from roofline.parallel import Split

    if devices is not None and (tp, pp, dp) == (1, 1, 1):
        per_node = get_system(machine, devices=devices).devices_per_node
        tp = min(devices, per_node)
        if devices % tp:
            raise RooflineError(f"--devices {devices} is not a whole number of {tp}-device nodes; give --tp and --pp")
        pp = devices // tp
    split = Split(tp=tp, pp=pp, ep=ep, dp=dp)
    if devices is not None and devices != split.devices:
        raise RooflineError(f"--devices {devices} but --tp × --pp × --dp = {split.devices}")
    return split


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


def step_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """What every transformer command takes: the phase, the fusion plan, dtypes and what-ifs."""
    options = [
        click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="What-if: override a config.json field, e.g. --set num_key_value_heads=64."),
        click.option("--experts-hit", default=None,
                     help="MoE: distinct experts a layer reads per step (default: the expectation under uniform "
                          "routing, E·(1 − (1 − k/E)^tokens))."),
        click.option("--act-dtype", default="bf16", show_default=True, help="Activation dtype."),
        click.option("--fusion", type=click.Choice(list(MODEL_FUSIONS)), default=DEFAULT_FUSION,
                     show_default=True,
                     help="; ".join(f"{p}: {PLAN_HELP[p]}" for p in MODEL_FUSIONS) + "."),
        click.option("--phase", type=click.Choice(["prefill", "decode"]), default="decode", show_default=True),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _writer(output: str | None, text: str) -> None:
    if output:
        from roofline.fileio import atomic_write

        atomic_write(output, text if text.endswith("\n") else text + "\n")
        wrote(output)
    else:
        click.echo(text)


def _write_rows(rows: list[dict[str, Any]], columns: Sequence[str], fmt: str, output: str | None,
                csv_path: str | None, table_text: Callable[[], str]) -> None:
    """Rows as a table, CSV or JSON on stdout or to --output, and also as CSV to --csv."""
    from roofline.report.model_text import rows_csv

    if csv_path:
        _writer(csv_path, rows_csv(rows, columns))
    if fmt == "json":
        text = json.dumps(rows, indent=2, allow_nan=False)
    elif fmt == "csv":
        text = rows_csv(rows, columns)
    else:
        text = table_text()
    _writer(output, text)


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
@click.option("--explain", is_flag=True,
              help="Derive the KV cache size, the decode limit and every kernel step by step.")
@click.option("--engine", type=click.Choice(["trtllm", "vllm", "sglang"]), default=None,
              help="Engine whose measured kernels the expected bands are fitted on (default: most rows).")
@click.option("--calibration", default=None, metavar="FILE",
              help="Your own expected-time file (roofline calibrate --save) or bench calibration.")
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
                  explain: bool, engine: str | None, calibration: str | None, as_json: bool, csv_path: str | None,
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

    outputs(csv=csv_path, png=png, svg=svg, html=html, levels_png=levels_png)
    if levels_png is not None:
        from roofline.report.levels_chart import check_levels_png

        check_levels_png(levels_png)
    one_of(as_json, explain)
    config, changes = _run_options(model, overrides, logits, mla)
    a = analyze_model(config, machine, phase, parse_positive_int(batch, "--batch"), _length(phase, prompt, context),
                      fusion, model_dtypes(weights_dtype, act_dtype, kv_dtype, dtype),
                      _experts_hit(experts_hit), changes,
                      _split(tp, pp, ep, dp, devices, machine), memory_utilization, overlap)
    for w in a.warnings:
        warn(w)
    if a.memory.warning:
        warn(a.memory.warning)
    if csv_path:
        from roofline.report.model_text import KERNEL_CSV_COLUMNS, rows_csv

        _writer(csv_path, rows_csv(a.kernel_rows(), KERNEL_CSV_COLUMNS))
    if png or svg or html:
        from roofline.report.notebook import model_scenarios
        from roofline.report.outputs import write_model_outputs

        for path in write_model_outputs(model_scenarios(a), png=png, svg=svg, html=html, title=a.title):
            wrote(path)
    if levels_png is not None:
        from roofline.report.levels_chart import write_levels_png
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
        d["calibration"] = chosen.describe()
        dump(d)
    elif explain:
        from roofline.explain import explain_kernels, explain_model

        click.echo(explain_model(a))
        click.echo("\nkernels\n")
        click.echo(explain_kernels(a))
    else:
        from roofline.report.expected_text import expected_total_line
        from roofline.report.model_text import model_text

        click.echo(model_text(a))
        click.echo(expected_total_line(placed, bands, chosen.describe()))


def _run_options(model: str, overrides: tuple[str, ...], logits: str, mla: str | None) -> tuple[Any, Any]:
    """(model, overrides) for analyze_model: with --logits all or --mla, the parsed config carrying them."""
    if logits == "last" and mla is None:
        return model, parse_overrides(overrides)
    from dataclasses import replace

    from roofline.models import load_config

    config = load_config(model, parse_overrides(overrides))
    if mla is not None and not config.is_mla:  # as --experts-hit on a dense model: said, not silently dropped
        warn(f"--mla {mla} ignored: {config.name} has no multi-head latent attention (kv_lora_rank is 0)")
    return replace(config, logits=logits, mla=mla or ""), None


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
        click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
                     show_default=True),
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
                  ep_list: str, dp_list: str, fmt: str, output: str | None,
                  csv_path: str | None, png: str | None, svg: str | None) -> None:
    """Sweep MODEL over batch × length × dtype × machine × split: intensity, time floor, tokens/s, bound.

    \b
    Examples:
      roofline sweep llama-3-70b --batch 1:512 --context 8192,131072
      roofline sweep llama-3-70b --batch 64 --context 1024:131072 --kv-dtype bf16,fp8 --format csv
      roofline sweep mixtral-8x7b --machine h100,b200 --batch 1:256 --png sweep.png
      roofline sweep llama-3-70b --machine dgx-h100 --tp 1,2,4,8 --batch 8:64:8 --context 8192
    """
    from roofline.models import SWEEP_COLUMNS, sweep
    from roofline.report.model_text import sweep_text
    from roofline.report.plan_text import split_sweep_text

    outputs(output=output, csv=csv_path, png=png, svg=svg)
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
    batches = parse_int_list(batch, "--batch")
    machines = _machines(machine)
    splits = _splits(tp_list, pp_list, ep_list, dp_list)
    weights, kvs, computes = (_dtype_list(weights_dtype, "--weights-dtype"), _dtype_list(kv_dtype, "--kv-dtype"),
                              _dtype_list(dtype, "--dtype"))
    n_rows = len(batches) * len(lengths or [0]) * len(machines) * len(weights) * len(kvs) * len(computes) * len(splits)
    if n_rows > MAX_SWEEP_ROWS:
        raise RooflineError(f"the sweep has {n_rows:,} rows (batches × lengths × machines × dtypes × splits); "
                            f"at most {MAX_SWEEP_ROWS:,}: take larger steps or fewer values")
    rows = sweep(model, machines, phase, batches, lengths, fusion,
                 weights, kvs, act_dtype, computes, _experts_hit(experts_hit), parse_overrides(overrides),
                 per_kernel=bool(png or svg), splits=splits)
    split = any(not sp.trivial for sp in splits)
    if png or svg:
        _sweep_chart(rows, model, phase, batches, sorted({int(r["seq"]) for r in rows}), png, svg,
                     parse_overrides(overrides))
    seq_key = "prompt" if phase == "prefill" else "context"
    renamed = [{(seq_key if k == "seq" else k): v for k, v in r.items() if k != "kernels"} for r in rows]
    columns = [seq_key if c == "seq" else c for c in SWEEP_COLUMNS]
    _write_rows(renamed, columns, fmt, output, csv_path,
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
                    ep_list: str, dp_list: str, fmt: str, output: str | None, csv_path: str | None) -> None:
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
    from roofline.report.model_text import compare_text, grouped_warnings
    from roofline.report.plan_text import split_compare_text

    outputs(output=output, csv=csv_path)
    splits = _splits(tp_list, pp_list, ep_list, dp_list)
    machines, batches = _machines(machine), parse_int_list(batch, "--batch")
    lengths: list[int | None] = _length(phase, prompt, context, parse_int_list) or [None]
    weights, kvs, computes = (_dtype_list(weights_dtype, "--weights-dtype"), _dtype_list(kv_dtype, "--kv-dtype"),
                              _dtype_list(dtype, "--dtype"))
    n_rows = len(models) * len(machines) * len(splits) * len(batches) * len(lengths) * len(weights) * len(kvs) \
        * len(computes)
    if n_rows > MAX_COMPARE_ROWS:
        raise RooflineError(f"the comparison has {n_rows:,} rows (models × machines × splits × batches × lengths × "
                            f"dtypes), each a step analysed; at most {MAX_COMPARE_ROWS:,}: give fewer values, or "
                            "use `roofline sweep` for a long grid")
    # one table per batch and length, as sweep takes them: the same list syntax (units.parse_int_list)
    groups = [compare(list(models), machines, phase, b, seq, fusion, weights, kvs, act_dtype, computes,
                      _experts_hit(experts_hit), parse_overrides(overrides), splits)
              for b in batches for seq in lengths]
    rows = [r for group in groups for r in group]
    split = any(not sp.trivial for sp in splits)
    for line in grouped_warnings(rows):  # each warning once, with the rows it concerns
        warn(line)
    columns = [k for k in rows[0] if k != "warnings"]
    _write_rows(rows, columns, fmt, output, csv_path,
                lambda: "\n\n".join(split_compare_text(g) if split else compare_text(g) for g in groups))


def _sweep_chart(rows: list[dict[str, Any]], model: str, phase: str, batches: list[int], lengths: list[int],
                 png: str | None, svg: str | None, overrides: dict[str, str]) -> None:
    """Intensity against the axis that varies most, for every machine (a line set each) and the first
    dtype and split combination."""
    from roofline.models import decode_limit, load_config
    from roofline.parallel import Split
    from roofline.report.outputs import write_sweep_chart

    first = rows[0]
    series = ("weights_dtype", "kv_dtype", "compute_dtype", "tp", "pp", "ep", "dp")
    same = [r for r in rows if all(r.get(k) == first.get(k) for k in series)]
    x = "batch" if len(batches) >= len(lengths) else "seq"
    fixed = "seq" if x == "batch" else "batch"
    seq_key = "prompt" if phase == "prefill" else "context"
    picked = [{(seq_key if k == "seq" else k): v for k, v in r.items()} for r in same if r[fixed] == first[fixed]]
    limit = None
    if phase == "decode" and x == "batch":
        limit = decode_limit(load_config(model, overrides), int(first["seq"]), first["kv_dtype"]).flop_per_byte
    label = seq_key if fixed == "seq" else fixed
    machines = list(dict.fromkeys(r["machine"] for r in picked))
    title = f"{first['model']} {phase} on {', '.join(machines)}, {label} {first[fixed]}"
    if len(picked) < len(rows):  # the chart draws one series; say which, rather than drop the others silently
        kv = first["kv_dtype"]
        split = Split(tp=first.get("tp", 1), pp=first.get("pp", 1), ep=first.get("ep", 1), dp=first.get("dp", 1))
        where = "" if split.trivial else f", split {split}"
        warn(f"the chart shows {len(picked)} of the {len(rows)} rows: {', '.join(machines)}{where}, weights "
                      f"{first['weights_dtype']}, KV {kv}, compute {first['compute_dtype']}, {label} {first[fixed]} "
                      f"(the first combination); the table has every row")
        title += f", weights {first['weights_dtype']}, KV {kv}" + where
    by_machine: dict[str, Any] = {"series": "machine"} if len(machines) > 1 else {}  # a line set per machine
    for path in write_sweep_chart(picked, seq_key if x == "seq" else x, png=png, svg=svg,
                                  ridge=first["ridge_flop_per_byte"], limit=limit, title=title, **by_machine):
        wrote(path)


COMMANDS = (model_command, sweep_command, compare_command)
