"""`roofline serve`: TTFT, ITL, end-to-end latency, throughput, the batches memory and an ITL target
allow, goodput and cost, each a roofline floor and an expected band; and the throughput-latency curve.

Parses its options, calls roofline.serving.serve and prints through roofline.report.text.serve (or
roofline.explain.serve with --explain).
"""

from __future__ import annotations

from typing import Any

import click

from roofline.cli.common import (
    COUNT_HELP,
    DEFAULT_FUSION,
    MODEL_FUSIONS,
    NUMBER,
    PLAN_HELP,
    POS,
    one_of,
    outputs,
    show,
    warn,
    wrote,
)
from roofline.cli.options import (
    WEIGHTS_DEFAULT_HELP,
    allreduce_config,
    allreduce_option,
    allreduce_system,
    calibration_options,
    expert_config,
    expert_options,
    expert_split,
    parse_experts_hit,
    parse_overrides,
    split_of,
    split_options,
    target_options,
    write_text,
)
from roofline.errors import RooflineError
from roofline.hardware.catalog import DEFAULT_MACHINE
from roofline.units import UnitError, parse_quantity


def _share_band(text: str | None, label: str) -> tuple[float, float] | None:
    """"0.7:0.8" (low:high) or "0.75" (both); shares of the roofline in (0, 1]."""
    if text is None:
        return None
    parts = text.split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise RooflineError(f"{label}: cannot read {text!r}; write LOW:HIGH shares of the roofline, like 0.7:0.8"
                            ) from None
    if len(values) not in (1, 2):
        raise RooflineError(f"{label}: write LOW:HIGH, like 0.7:0.8; got {text!r}")
    from roofline.serving.efficiency import check_share

    return check_share(label, (values[0], values[-1]))


def _time_band(text: str | None, label: str) -> tuple[float, float] | None:
    """"20us:50us" (low:high) or "30us" (both)."""
    if text is None:
        return None
    parts = text.split(":")
    if len(parts) not in (1, 2):
        raise RooflineError(f"{label}: write LOW:HIGH times, like 20us:50us; got {text!r}")
    try:
        values = [parse_quantity(p.strip(), "time_s") for p in parts]
    except UnitError as exc:
        raise RooflineError(f"{label}: {exc}") from None
    lo, hi = values[0], values[-1]
    if lo < 0 or hi < 0:
        raise RooflineError(f"{label}: a time is not negative, got {text!r}")
    if lo > hi:
        raise RooflineError(f"{label}: low {parts[0]} is above high {parts[-1]}; write LOW:HIGH")
    return lo, hi


@click.command("serve")
@click.argument("model")
@click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True,
              help="System (dgx-h100, gb200-nvl72, ...), a device (one node of 8), or a file.")
@click.option("--prompt", "-p", type=POS, required=True, help="Prompt tokens per request. " + COUNT_HELP)
@click.option("--output", type=POS, required=True, help="Output tokens generated per request, as --prompt.")
@click.option("--batch", "-b", type=POS, default=None,
              help="Sequences decoded together (default: the largest meeting --itl-slo, else 1).")
@target_options("The ")
@click.option("--weights-dtype", default=None,
              help=f"Weight storage dtype (int4, fp8, ...; {WEIGHTS_DEFAULT_HELP}).")
@click.option("--kv-dtype", default=None, help="KV cache dtype (default: the activation dtype).")
@click.option("--dtype", default=None, help="Compute dtype, choosing the peak (default: the activation dtype).")
@click.option("--act-dtype", default="bf16", show_default=True, help="Activation dtype.")
@click.option("--fusion", type=click.Choice(list(MODEL_FUSIONS)), default=DEFAULT_FUSION, show_default=True,
              help="; ".join(f"{p}: {PLAN_HELP[p]}" for p in MODEL_FUSIONS) + ".")
@click.option("--experts-hit", default=None, help="MoE: distinct experts a layer reads per step.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="What-if: override a config.json field.")
@split_options
@expert_options
@allreduce_option
@calibration_options
@click.option("--efficiency-comm", default=None, metavar="LOW:HIGH",
              help="--disaggregate's KV transfer: the share of the link it reaches (no measured table applies). "
                   "[default: 0.8:0.9]")
@click.option("--step-overhead", default=None, metavar="LOW:HIGH",
              help="Fixed time per step: launches and the scheduler (an assumption: no measured table applies). "
                   "[default: 20us:50us]")
@click.option("--chunk", type=POS, default=None, metavar="C",
              help="What-if: chunked prefill, C prompt tokens a step interleaved with decode steps (vLLM, SGLang).")
@click.option("--disaggregate", "disaggregate", default=None, metavar="P:D",
              help="What-if: prefill on P devices (TP P), decode on D (TP D), the KV cache sent over the link.")
@click.option("--draft", default=None, metavar="MODEL",
              help="What-if: speculative decoding with this draft model (same split); needs --acceptance.")
@click.option("--draft-tokens", type=POS, default=None, metavar="K",
              help="Tokens the draft proposes a step (speculative decoding). [default: 4]")
@click.option("--acceptance", type=NUMBER, default=None, metavar="A",
              help="Chance a drafted token is accepted, in (0, 1] (speculative decoding).")
@click.option("--mtp", type=POS, default=None, metavar="K",
              help="What-if: speculative decoding with the model's own multi-token-prediction layer as the "
                   "draft, run K times a step (DeepSeek-V3 reports 0.85-0.9 acceptance); needs --acceptance.")
@click.option("--explain", is_flag=True, help="Derive every number with the numbers put in.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--csv", "csv_path", default=None, metavar="FILE", help="Write the throughput-latency curve as CSV.")
@click.option("--png", default=None, metavar="FILE", help="Chart throughput against latency over batch (PNG).")
@click.option("--svg", default=None, metavar="FILE", help="The same chart as SVG.")
@click.option("--html", "html_path", default=None, metavar="FILE",
              help="The interactive page: the curve, the limits and every number (self-contained HTML).")
def serve_command(model: str, machine: str, prompt: int, output: int, batch: int | None, ttft_slo: float | None,
                  itl_slo: float | None, price_per_device_hour: float | None, weights_dtype: str | None,
                  kv_dtype: str | None, dtype: str | None, act_dtype: str, fusion: str, experts_hit: str | None,
                  overrides: tuple[str, ...], tp: int, pp: int, ep: int, dp: int, devices: int | None,
                  memory_utilization: float, overlap: bool, dispatch_dtype: str | None, dispatch_per_node: bool,
                  redundant_experts: str | None, two_batch_overlap: bool, allreduce: str, engine: str | None,
                  efficiency_comm: str | None, step_overhead: str | None,
                  chunk: int | None, disaggregate: str | None, draft: str | None, draft_tokens: int | None,
                  acceptance: float | None, mtp: int | None, explain: bool, as_json: bool, csv_path: str | None,
                  png: str | None, svg: str | None, html_path: str | None, calibration: str | None) -> None:
    """Serve MODEL: TTFT, ITL (mean and last), end-to-end latency, throughput, the largest batch memory
    and --itl-slo allow, goodput and cost per million tokens, and throughput against latency over batch.

    \b
    Every time is the roofline floor and an expected band: each kernel's band fitted on measured
    kernels (as `roofline model` gives it; --engine, --calibration), plus 20-50 us a step (a constant).

    \b
    Examples:
      roofline serve llama-3-70b --machine dgx-h100 --tp 8 --prompt 2048 --output 256
      roofline serve llama-3-70b --machine dgx-h100 --tp 8 --prompt 2048 --output 256 --itl-slo 30ms \\
          --ttft-slo 500ms --price-per-device-hour 2.5
      roofline serve llama-3-8b --machine h100 --prompt 1024 --output 512 --batch 64 --explain
      roofline serve llama-3-70b --machine dgx-h100 --tp 8 --prompt 2048 --output 256 --chunk 512 \\
          --disaggregate 4:4 --draft llama-3-8b --draft-tokens 4 --acceptance 0.8
    """
    from roofline.models import model_dtypes
    from roofline.serving import Efficiency, serve_model

    outputs([("MODEL", model), ("--machine", machine), ("--draft", draft), ("--calibration", calibration)],
            csv=csv_path, png=png, svg=svg, html=html_path)
    one_of(as_json, explain)
    base = Efficiency()
    eff = Efficiency(engine, calibration, _share_band(efficiency_comm, "--efficiency-comm") or base.communication,
                     _time_band(step_overhead, "--step-overhead"))
    config, changes = expert_config(model, parse_overrides(overrides), dispatch_dtype, dispatch_per_node,
                                    redundant_experts, two_batch_overlap)
    config, changes = allreduce_config(config, changes, allreduce)
    allreduce_system(machine, allreduce)
    if two_batch_overlap:
        warn("--two-batch-overlap: decode steps (ITL) and the prefill step (floor and band) take one micro-batch's "
             "MoE all-to-all (dispatch and combine) under the other's compute (not a default)")
    options: dict[str, Any] = dict(
        batch=batch, ttft_slo_s=ttft_slo, itl_slo_s=itl_slo, price_per_device_hour=price_per_device_hour,
        dtypes=model_dtypes(weights_dtype, act_dtype, kv_dtype, dtype), plan=fusion, utilization=memory_utilization,
        overlap=overlap, efficiency=eff, experts_hit=parse_experts_hit(experts_hit), overrides=changes)
    what_ifs: dict[str, Any] = dict(chunk=chunk, disaggregate_devices=disaggregate, draft=draft,
                                    draft_tokens=draft_tokens, acceptance=acceptance, mtp=mtp)
    if (tp, pp, ep, dp) == (1, 1, 1, 1) and devices is None:  # no split given: the cheapest that meets the targets
        r = searched(config, machine, prompt, output, options, what_ifs)
    else:
        split = split_of(tp, pp, ep, dp, devices, machine)
        expert_split(config, split)
        r = serve_model(config, machine, split, prompt=prompt, output=output, **options, **what_ifs)
    for w in r.warnings:  # a --calibration measured on another device among them (issue 20)
        warn(w)
    if csv_path:
        from roofline.report.text.serve import serve_csv

        write_text(csv_path, serve_csv(r))
    if png or svg or html_path:
        from roofline.report.outputs import write_serve_outputs

        for path in write_serve_outputs(r, png=png, svg=svg, html=html_path):
            wrote(path)
    from roofline.explain.serve import explain_serve
    from roofline.report.text.serve import serve_text

    show(r, as_json, explain, explain_serve, serve_text)


def searched(model: Any, machine: str, prompt: int, output: int, options: dict[str, Any],
             what_ifs: dict[str, Any]) -> Any:
    """serve without a split: the cheapest engine layout meeting the targets (roofline.serving.splits),
    the what-ifs then run on it; one device as before on a machine with no link to split over."""
    from dataclasses import replace

    from roofline.hardware.system_file import NoLinkError
    from roofline.models import describe_step
    from roofline.serving import serve_model
    from roofline.serving.serve import _checked_inputs, check_what_ifs
    from roofline.serving.splits import no_split_meets, serve_search
    from roofline.vocab import Phase

    _checked_inputs(prompt, output, options["price_per_device_hour"], options["ttft_slo_s"], options["itl_slo_s"],
                    options["utilization"])
    step = describe_step(model, Phase.PREFILL, 1, prompt, options["dtypes"], options["plan"], options["experts_hit"],
                         options["overrides"])
    # the what-ifs checked before the search (the draft's split is checked again on the winner's)
    check_what_ifs(step.config, machine, prompt, output, None, **what_ifs)
    try:
        s = serve_search(step, machine, output=output, **{k: v for k, v in options.items()
                                                          if k not in ("dtypes", "plan", "experts_hit", "overrides")})
    except NoLinkError:
        return serve_model(model, machine, None, prompt=prompt, output=output, **options, **what_ifs)
    if s.winner is None:
        raise RooflineError(no_split_meets(s))
    assert s.winner.report is not None  # a winner was quoted
    r = s.winner.report.report()  # its whole report, from the quote's prefill and step model
    if any(v is not None for v in what_ifs.values()):
        r = serve_model(model, machine, s.winner.split, prompt=prompt, output=output, **options, **what_ifs)
    return replace(r, split_search=s)


COMMANDS = (serve_command,)
