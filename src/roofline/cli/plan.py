"""`roofline plan`: search every valid split of a step over a system's devices and rank them.

Parses its options, calls roofline.models.search.search_splits and prints through roofline.report.text.split_search.
"""

from __future__ import annotations

from typing import Any

import click

from roofline.cli.common import DEFAULT_MEMORY_UTILIZATION, NUMBER, POS, TIME_TARGET, dump, outputs, warn
from roofline.cli.options import (
    WEIGHTS_DEFAULT_HELP,
    expert_config,
    expert_options,
    length,
    parse_experts_hit,
    parse_overrides,
    step_options,
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
@click.option("--batch", "-b", default="1", show_default=True, help="Sequences in the step (over every replica).")
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
@click.option("--memory-utilization", type=NUMBER, default=DEFAULT_MEMORY_UTILIZATION, show_default=True,
              help="Usable share of each device's memory (vLLM's gpu_memory_utilization).")
@click.option("--overlap", is_flag=True,
              help="Assume communication runs under compute (the step takes the larger of the two).")
@expert_options
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
                 two_batch_overlap: bool, as_json: bool, csv_path: str | None, train: bool = False) -> None:
    """Search every valid (tp, pp, ep, dp) split of MODEL's step over a system and rank them.

    \b
    Each candidate: memory per device (does it fit?), step time, tokens/s, tokens/s per device, the
    share of the step spent in collectives, the bound, and why it loses to the winner.

    \b
    Examples:
      roofline plan llama-3-70b --machine dgx-h100 --batch 64 --context 8192
      roofline plan deepseek-v3 --machine gb200-nvl72 --batch 256 --context 8192 --objective throughput
      roofline plan llama-3-70b --machine dgx-h100 --batch 64 --context 8192 --latency-target 20ms
      roofline plan llama-3.1-405b --machine dgx-h100 --devices 16 --phase prefill --prompt 8192 --json
    """
    from roofline.models import model_dtypes
    from roofline.models.search import search_splits
    from roofline.report.text.split_search import SPLIT_SEARCH_CSV_COLUMNS, split_search_text

    outputs([("MODEL", model), ("--machine", machine)], csv=csv_path)
    if objective is None:
        objective = "latency" if latency_target is not None else "time"
    config, changes = expert_config(model, parse_overrides(overrides), dispatch_dtype, dispatch_per_node,
                                    redundant_experts, two_batch_overlap)
    if two_batch_overlap:
        warn("--two-batch-overlap: every expert-parallel candidate's step takes one micro-batch's MoE all-to-all "
             "under the other's compute (not a default); the others are unchanged")
    s = search_splits(config, machine, phase, parse_positive_int(batch, "--batch"), length(phase, prompt, context),
                      model_dtypes(weights_dtype, act_dtype, kv_dtype, dtype), objective, latency_target,
                      memory_utilization, overlap, fusion, devices, parse_experts_hit(experts_hit), changes)
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


COMMANDS = (plan_command,)
