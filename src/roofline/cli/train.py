"""`roofline train`: one training step of a model on a system, as kernels on the roofline, with its
memory, communication, step time and MFU.

Parses its options, calls roofline.training and prints through roofline.report.text.train.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from roofline.cli.common import (
    DEFAULT_MEMORY_UTILIZATION,
    POS,
    SHARE,
    PositiveNumber,
    dump,
    one_of,
    outputs,
    warn,
    wrote,
)
from roofline.cli.options import allreduce_option, allreduce_system, parse_overrides, write_text
from roofline.errors import RooflineError
from roofline.hardware.catalog import DEFAULT_MACHINE
from roofline.units import parse_positive_int


def train_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The step and the training choices, shared by `train` and `plan --train`."""
    options = [
        click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True,
                     help="System (dgx-h100, gb200-nvl72, ...), a device (one node of 8), or a file."),
        click.option("--seq", default=None, help="Tokens a sequence (the training context), e.g. 8192 or 8Ki."),
        click.option("--global-batch", default=None, help="Sequences a step, over every data-parallel rank."),
        click.option("--tokens-per-batch", default=None, help="Tokens a step instead (= global batch × seq)."),
        click.option("--micro-batch", type=POS, default=1, show_default=True,
                     help="Sequences a micro-batch; each data-parallel rank runs B / (dp × micro-batch) of them."),
        click.option("--zero", type=click.Choice(["0", "1", "2", "3"]), default=None,
                     help="ZeRO stage over dp × cp: 1 shards the optimizer states, 2 the gradients too, 3 the "
                          "parameters (Rajbhandari et al. 2020). [default: 0]"),
        click.option("--fsdp", is_flag=True, help="PyTorch FSDP's full sharding: the same as --zero 3."),
        click.option("--recompute", type=click.Choice(["none", "selective", "full"]), default="none",
                     show_default=True,
                     help="Activation recompute (Korthikanti et al. 2022): selective reruns the attention core, "
                          "full the whole layer's forward."),
        click.option("--optimizer", type=click.Choice(["adamw", "sgd"]), default="adamw", show_default=True,
                     help="adamw: FP32 master + two moments (12 bytes a parameter); sgd: the master alone (4)."),
        click.option("--precision", type=click.Choice(["bf16", "fp8"]), default="bf16", show_default=True,
                     help="The matmuls' peak: BF16, or FP8 (Transformer Engine's recipe; tensors kept in BF16)."),
        click.option("--fusion", type=click.Choice(["none", "flash", "fused"]), default="flash", show_default=True,
                     help="The forward's fusion plan: none (naive attention, scores through memory), flash "
                          "(FlashAttention), fused (also norms and activations into matmuls)."),
        click.option("--no-sequence-parallel", is_flag=True,
                     help="Tensor parallel without sequence parallelism (all-reduces; activations not split by tp)."),
        click.option("--overlap", is_flag=True,
                     help="Communication at best hidden under compute: a micro-batch takes the larger of the two; "
                          "the data-parallel reduction hides under the last backward."),
        click.option("--memory-utilization", type=SHARE, default=DEFAULT_MEMORY_UTILIZATION, show_default=True,
                     help="Usable share of each device's memory (the rest: CUDA context, NCCL buffers, fragments)."),
        click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="What-if: override a config.json field."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def parse_setup(model: str, seq: str | None, global_batch: str | None, tokens_per_batch: str | None,
                micro_batch: int, zero: str | None, fsdp: bool, recompute: str, optimizer: str, precision: str,
                fusion: str, no_sequence_parallel: bool, overlap: bool, overrides: tuple[str, ...],
                split: Any = None, virtual_stages: int = 1, check: bool = True) -> Any:
    from roofline.training import describe_training

    if seq is None:
        raise RooflineError("give the sequence length: --seq S (tokens a sequence)")
    s = parse_positive_int(seq, "--seq")
    if fsdp and zero not in (None, "3"):
        raise RooflineError(f"--fsdp is ZeRO stage 3; it contradicts --zero {zero}")
    z = 3 if fsdp else int(zero or 0)
    gb = parse_positive_int(global_batch, "--global-batch") if global_batch is not None else None
    tpb = parse_positive_int(tokens_per_batch, "--tokens-per-batch") if tokens_per_batch is not None else None
    return describe_training(model, s, gb, micro_batch, split, z, recompute, optimizer, precision, overlap, tpb,
                             not no_sequence_parallel, fusion, parse_overrides(overrides), virtual_stages, check)


def _with_allreduce(setup: Any, machine: str, allreduce: str) -> Any:
    """The setup with `--allreduce` on its config (auto: as given); NVLS refused where the system has none."""
    if allreduce == "auto":
        return setup
    from dataclasses import replace

    from roofline.parallel.algorithms import Algorithm
    allreduce_system(machine, allreduce)
    return replace(setup, config=replace(setup.config, allreduce=Algorithm(allreduce)))


@click.command("train")
@click.argument("model")
@train_options
@click.option("--tp", type=POS, default=1, show_default=True, help="Tensor parallel (heads, MLP, vocabulary).")
@click.option("--pp", type=POS, default=1, show_default=True, help="Pipeline stages (1F1B).")
@click.option("--dp", type=POS, default=1, show_default=True, help="Data-parallel ranks.")
@click.option("--cp", type=POS, default=1, show_default=True, help="Context parallel: the sequence over CP ranks.")
@click.option("--ep", type=POS, default=1, show_default=True, help="Expert parallel (MoE), within tp × cp × dp.")
@click.option("--virtual-stages", type=POS, default=1, show_default=True,
              help="Interleaved 1F1B: model chunks a device holds; divides the bubble by it (Narayanan et al. 2021).")
@click.option("--tokens", default=None, help="Tokens to train (15T, 300G, 1e12): time and cost of the run.")
@click.option("--price-per-device-hour", type=PositiveNumber(1e6), default=None, metavar="USD",
              help="Price of one device for an hour: the run's cost.")
@click.option("--explain", is_flag=True, help="Derive every figure: FLOPs, bubble, MFU, memory, each kernel.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--csv", "csv_path", default=None, metavar="FILE", help="Write every kernel of the step as CSV.")
@click.option("--png", default=None, metavar="FILE",
              help="Write the chart: the step's kernels on the roofline by pass, and the step's breakdown.")
@click.option("--html", default=None, metavar="FILE", help="Write the page: the chart and the step's figures.")
@allreduce_option
def train_command(model: str, machine: str, seq: str | None, global_batch: str | None, tokens_per_batch: str | None,
                  micro_batch: int, zero: str | None, fsdp: bool, recompute: str, optimizer: str, precision: str,
                  fusion: str, no_sequence_parallel: bool, overlap: bool, memory_utilization: float,
                  overrides: tuple[str, ...], tp: int, pp: int, dp: int, cp: int, ep: int, virtual_stages: int,
                  tokens: str | None,
                  price_per_device_hour: float | None, explain: bool, as_json: bool, csv_path: str | None,
                  png: str | None, html: str | None, allreduce: str = "auto") -> None:
    """One training step of MODEL on a system: forward, backward, recompute and optimizer kernels per
    device, memory per device, collectives, the pipeline bubble, step time (floor and expected band),
    tokens/s, MFU and HFU (model FLOPs 6·N + 12·L·h·s a token, PaLM's convention).

    \b
    Examples:
      roofline train llama-3-70b --machine dgx-h100 --seq 8192 --global-batch 512 --tp 8 --pp 4 --dp 16
      roofline train llama-3.1-405b --machine dgx-h100 --seq 8192 --global-batch 2048 --tp 8 --pp 16 --dp 128 \\
          --zero 1 --tokens 15T --price-per-device-hour 2
      roofline train deepseek-v3 --machine dgx-h100 --seq 4096 --global-batch 1024 --pp 8 --dp 64 --ep 64 --json
    """
    from roofline.training import TrainSplit, analyze_training, parse_tokens

    outputs([("MODEL", model), ("--machine", machine)], csv=csv_path, png=png, html=html)
    one_of(as_json, explain)
    split = TrainSplit(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep)
    setup = parse_setup(model, seq, global_batch, tokens_per_batch, micro_batch, zero, fsdp, recompute, optimizer,
                        precision, fusion, no_sequence_parallel, overlap, overrides, split, virtual_stages)
    setup = _with_allreduce(setup, machine, allreduce)
    run = parse_tokens(tokens) if tokens is not None else None
    if price_per_device_hour is not None and run is None:
        warn("--price-per-device-hour without --tokens: no run to price (give --tokens 15T)")
    a = analyze_training(setup, machine, utilization=memory_utilization, tokens=run,
                         price_per_device_hour=price_per_device_hour)
    for w in a.warnings:
        warn(w)
    if csv_path:
        from roofline.report.text.model import rows_csv
        from roofline.report.text.train import TRAIN_CSV_COLUMNS, csv_rows

        write_text(csv_path, rows_csv(csv_rows(a), TRAIN_CSV_COLUMNS))
    if png or html:
        from roofline.report.outputs import write_train_outputs

        for path in write_train_outputs(a, png=png, html=html):
            wrote(path)
    if as_json:
        dump(a.to_dict())
    elif explain:
        from roofline.report.text.train import train_explain

        click.echo(train_explain(a))
    else:
        from roofline.report.text.train import train_text

        click.echo(train_text(a))


@click.command("plan")
@click.argument("model")
@train_options
@click.option("--devices", type=POS, default=None,
              help="Devices every split uses (default: all of the system's; a device: one node of 8).")
@click.option("--virtual-stages", type=POS, default=1, show_default=True,
              help="Interleaved 1F1B chunks a device, for every split with pipeline stages.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--csv", "csv_path", default=None, metavar="FILE", help="Write every candidate as CSV.")
@allreduce_option
def plan_train_command(model: str, machine: str, seq: str | None, global_batch: str | None,
                       tokens_per_batch: str | None, micro_batch: int, zero: str | None, fsdp: bool, recompute: str,
                       optimizer: str, precision: str, fusion: str, no_sequence_parallel: bool, overlap: bool,
                       memory_utilization: float, overrides: tuple[str, ...], devices: int | None,
                       virtual_stages: int, as_json: bool, csv_path: str | None, allreduce: str = "auto") -> None:
    """`roofline plan --train`: every valid (tp, cp, pp, dp, ep) split of MODEL's training step over the
    system's devices, ranked by expected step time, with memory, bubble and communication named for
    each loser.

    \b
    Examples:
      roofline plan --train llama-3.1-405b --machine dgx-h100 --seq 8192 --global-batch 2048 --zero 1
      roofline plan --train llama-3-70b --machine dgx-h100 --devices 512 --seq 8192 --global-batch 512 --json
    """
    from roofline.report.text.train import PLAN_CSV_COLUMNS, plan_rows, plan_text
    from roofline.training.search import search_training

    outputs([("MODEL", model), ("--machine", machine)], csv=csv_path)
    setup = parse_setup(model, seq, global_batch, tokens_per_batch, micro_batch, zero, fsdp, recompute, optimizer,
                        precision, fusion, no_sequence_parallel, overlap, overrides, None, virtual_stages, check=False)
    setup = _with_allreduce(setup, machine, allreduce)
    found = search_training(setup, machine, devices, memory_utilization)
    if found.winner is None:
        raise RooflineError(found.problem)
    if csv_path:
        from roofline.report.text.model import rows_csv

        write_text(csv_path, rows_csv(plan_rows(found), PLAN_CSV_COLUMNS))
    if as_json:
        dump(found.to_dict())
    else:
        click.echo(plan_text(found))


COMMANDS = (train_command,)
