"""`roofline plan`: search every valid split of a step over a system's devices and rank them.

Parses its options, calls roofline.models.search.search_splits and prints through roofline.report.text.split_search.
"""

from __future__ import annotations

from typing import Any

import click

from roofline.cli.common import (
    DEFAULT_MEMORY_UTILIZATION,
    POS,
    SHARE,
    TIME_TARGET,
    dump,
    outputs,
    warn,
)
from roofline.cli.options import (
    WEIGHTS_DEFAULT_HELP,
    allreduce_config,
    allreduce_option,
    allreduce_system,
    calibration_options,
    expert_config,
    expert_options,
    length,
    parse_experts_hit,
    parse_overrides,
    step_options,
    target_options,
    write_text,
)
from roofline.errors import RooflineError
from roofline.hardware.catalog import DEFAULT_MACHINE
from roofline.units import parse_positive_int


class _PlanCommand(click.Command):
    """`plan --train ...` is the training split search (roofline.cli.train.plan_train_command): its options
    are a training step's, so the arguments go to that command whole."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        if "--train" in args:
            from roofline.cli.train import plan_train_command

            rest = [a for a in args if a != "--train"]
            return plan_train_command.make_context(info_name, rest, parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        if ctx.command is not self:
            return ctx.command.invoke(ctx)
        return super().invoke(ctx)


@click.command("plan", cls=_PlanCommand)
@click.argument("model")
@click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True,
              help="System (dgx-h100, gb200-nvl72, ...), a device (one node of 8), or a file.")
@click.option("--batch", "-b", default=None,
              help="Sequences in the step (over every replica; default 1). With --output: the batch served "
                   "(default: the largest meeting --itl-slo).")
@click.option("--prompt", "-p", default=None,
              help="Prompt length (prefill; default 2048, at most the model's maximum).")
@click.option("--context", "-c", default=None,
              help="Context length a new token attends to (decode; default 2048, at most the model's maximum).")
@click.option("--weights-dtype", default=None,
              help=f"Weight storage dtype (int4, fp8, ...; {WEIGHTS_DEFAULT_HELP}).")
@click.option("--kv-dtype", default=None, help="KV cache dtype (default: the activation dtype).")
@click.option("--dtype", default=None, help="Compute dtype, choosing the peak (default: the activation dtype).")
@step_options
@click.option("--objective", type=click.Choice(["time", "throughput", "latency"]), default=None,
              help="time: the lowest step time; throughput: the most tokens/s per device; latency: the most "
                   "tokens/s per device within --latency-target. [default: latency with a target, else time]")
@click.option("--latency-target", type=TIME_TARGET, default=None, metavar="TIME",
              help="The longest step allowed (2s, 50ms, 800us); implies --objective latency.")
@click.option("--devices", type=POS, default=None,
              help="The most devices a split may use (default: one node of the system; a device: 8).")
@click.option("--memory-utilization", type=SHARE, default=DEFAULT_MEMORY_UTILIZATION, show_default=True,
              help="Usable share of each device's memory (vLLM's gpu_memory_utilization).")
@click.option("--overlap", is_flag=True,
              help="Assume communication runs under compute (the step takes the larger of the two).")
@expert_options
@allreduce_option
@click.option("--output", "output_tokens", type=POS, default=None,
              help="Serve a workload (--prompt P, --output O): the cheapest split meeting --itl-slo and --ttft-slo, "
                   "the question `roofline serve` without a split answers, with the same answer.")
@target_options("With --output: the ")
@calibration_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--csv", "csv_path", default=None, metavar="FILE", help="Write every candidate as CSV.")
@click.option("--train", is_flag=True,
              help="Plan a training step instead: every split of the system ranked by expected step time "
                   "(`roofline plan --train --help`).")
def plan_command(model: str, machine: str, batch: str, prompt: str | None, context: str | None,
                 weights_dtype: str | None, kv_dtype: str | None, dtype: str | None, phase: str, fusion: str,
                 act_dtype: str, experts_hit: str | None, overrides: tuple[str, ...], objective: str | None,
                 latency_target: float | None, devices: int | None, memory_utilization: float, overlap: bool,
                 dispatch_dtype: str | None, dispatch_per_node: bool, redundant_experts: str | None,
                 two_batch_overlap: bool, allreduce: str, output_tokens: int | None, itl_slo: float | None,
                 ttft_slo: float | None,
                 price_per_device_hour: float | None, engine: str | None, calibration: str | None, as_json: bool,
                 csv_path: str | None, train: bool = False) -> None:
    """Search every valid (tp, pp, ep, dp) split of MODEL's step over a system and rank them.

    \b
    Each candidate: memory per device (does it fit?), step time (the floor) and its expected band (each
    kernel's calibrated band, as `roofline model` gives it), tokens/s, tokens/s per device, the share of
    the step spent in collectives, the bound, and why it loses to the winner; ranked by expected time.

    \b
    Examples:
      roofline plan llama-3-70b --machine dgx-h100 --batch 64 --context 8192
      roofline plan deepseek-v3 --machine gb200-nvl72 --batch 256 --context 8192 --objective throughput
      roofline plan llama-3-70b --machine dgx-h100 --batch 64 --context 8192 --latency-target 20ms
      roofline plan llama-3.1-405b --machine dgx-h100 --devices 16 --phase prefill --prompt 8192 --json
      roofline plan llama-3-70b --machine dgx-h100 --prompt 2048 --output 256 --itl-slo 30ms
    """
    from roofline.models import model_dtypes
    from roofline.models.search import search_splits
    from roofline.report.text.split_search import SPLIT_SEARCH_CSV_COLUMNS, split_search_text

    outputs([("MODEL", model), ("--machine", machine), ("--calibration", calibration)], csv=csv_path)
    if output_tokens is not None:
        _serving_question(model, machine, batch, prompt, output_tokens, itl_slo, ttft_slo, price_per_device_hour,
                          weights_dtype, act_dtype, kv_dtype, dtype, fusion, experts_hit, overrides, devices,
                          memory_utilization, overlap, engine, calibration, as_json, csv_path, allreduce)
        return
    if any(v is not None for v in (itl_slo, ttft_slo, price_per_device_hour)):
        raise RooflineError("--itl-slo, --ttft-slo and --price-per-device-hour ask a serving question: give --output "
                            "(and --prompt) too")
    batch = batch or "1"
    if objective is None:
        objective = "latency" if latency_target is not None else "time"
    config, changes = expert_config(model, parse_overrides(overrides), dispatch_dtype, dispatch_per_node,
                                    redundant_experts, two_batch_overlap)
    config, changes = allreduce_config(config, changes, allreduce)
    allreduce_system(machine, allreduce)
    if two_batch_overlap:
        warn("--two-batch-overlap: every expert-parallel candidate's step takes one micro-batch's MoE all-to-all "
             "under the other's compute (not a default); the others are unchanged")
    band, described = expected_band(machine, engine, calibration)
    s = search_splits(config, machine, phase, parse_positive_int(batch, "--batch"), length(phase, prompt, context),
                      model_dtypes(weights_dtype, act_dtype, kv_dtype, dtype), objective, latency_target,
                      memory_utilization, overlap, fusion, devices, parse_experts_hit(experts_hit), changes,
                      band=band, calibration=described)
    if s.winner is None:
        raise RooflineError(s.problem)
    for w in s.warnings:
        warn(w)
    if csv_path:
        from roofline.report.text.model import rows_csv

        write_text(csv_path, rows_csv([r.to_dict() for r in s.rows], SPLIT_SEARCH_CSV_COLUMNS))
    if as_json:
        dump(s.to_dict())
    else:
        click.echo(split_search_text(s))


def _serving_question(model: str, machine: str, batch: str | None, prompt: str | None, output: int,
                      itl_slo: float | None, ttft_slo: float | None, price: float | None, weights_dtype: str | None,
                      act_dtype: str, kv_dtype: str | None, dtype: str | None, fusion: str, experts_hit: str | None,
                      overrides: tuple[str, ...], devices: int | None, utilization: float, overlap: bool,
                      engine: str | None, calibration: str | None, as_json: bool, csv_path: str | None,
                      allreduce: str = "auto") -> None:
    """plan --output: the cheapest split serving the workload within the targets (roofline.serving.splits,
    the function `serve` without a split calls: one question, one answer)."""
    from roofline.models import describe_step, model_dtypes
    from roofline.report.text.split_search import serve_search_text
    from roofline.serving import Efficiency
    from roofline.serving.serve import _checked_inputs
    from roofline.serving.splits import no_split_meets, serve_search
    from roofline.vocab import Phase

    p = 2048 if prompt is None else parse_positive_int(prompt, "--prompt")  # serve's --prompt is required; 2048 here
    b = None if batch is None else parse_positive_int(batch, "--batch")
    _checked_inputs(p, output, price, ttft_slo, itl_slo, utilization)
    config, changes = allreduce_config(model, parse_overrides(overrides), allreduce)
    allreduce_system(machine, allreduce)
    step = describe_step(config, Phase.PREFILL, 1, p, model_dtypes(weights_dtype, act_dtype, kv_dtype, dtype), fusion,
                         parse_experts_hit(experts_hit), changes)
    s = serve_search(step, machine, output=output, batch=b, ttft_slo_s=ttft_slo, itl_slo_s=itl_slo,
                     price_per_device_hour=price, utilization=utilization, overlap=overlap,
                     efficiency=Efficiency(engine, calibration), devices=devices)
    if s.winner is None:
        raise RooflineError(no_split_meets(s))
    if csv_path:
        from roofline.report.text.model import rows_csv

        rows = [c.to_dict() for c in s.candidates]
        write_text(csv_path, rows_csv(rows, ["split", "tp", "pp", "ep", "dp", "devices", "meets_targets", "batch",
                                             "device_s_per_output_token", "reason"]))
    if as_json:
        dump(s.to_dict())
    else:
        click.echo(serve_search_text(s, step, output))


def expected_band(machine: str, engine: str | None, calibration: str | None) -> tuple[Any, dict[str, Any]]:
    """A placed kernel's (low, high) expected time under the device's chosen model (roofline.calibration.choose,
    as `roofline model` takes --engine and --calibration), and that model's description."""
    from roofline.calibration.choose import choose
    from roofline.hardware import get_system

    device = get_system(machine).device.id
    chosen = choose(device, engine, calibration)
    seen: set[str] = set()

    def band(p: Any) -> tuple[float, float]:
        b = chosen.band(p)
        for w in b.warnings:
            if w not in seen:
                seen.add(w)
                warn(w)
        return b.low_s, b.high_s

    return band, chosen.describe()


COMMANDS = (plan_command,)
