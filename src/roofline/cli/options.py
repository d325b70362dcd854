"""The options several commands share (model, sweep, compare, plan, serve): the step's phase, fusion
plan, dtypes and what-ifs, its length, the split and memory options, and writing text to a file or
stdout. Each parses and checks; the library does the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from roofline.cli.common import (
    DEFAULT_FUSION,
    DEFAULT_MEMORY_UTILIZATION,
    MODEL_FUSIONS,
    PLAN_HELP,
    POS,
    SHARE,
    TIME_TARGET,
    PositiveNumber,
    decimal_length_note,
    echo,
    warn,
    wrote,
)
from roofline.errors import RooflineError
from roofline.fileio import after_writes
from roofline.units import parse_positive_int

if TYPE_CHECKING:
    from roofline.parallel import Split

WEIGHTS_DEFAULT_HELP = ("default: what the checkpoint stores, from config.json's quantization_config "
                        "(deepseek-v3: fp8 with 128x128 block scales), else bf16")


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


# per phase: its length's flag, what the flag names, the word for it, the other phase and its flag
_LENGTHS = {"prefill": ("--prompt", "P (the prompt length)", "prompt", "decode", "--context"),
            "decode": ("--context", "L (the tokens attended to)", "context", "prefill", "--prompt")}


def length(phase: str, prompt: str | None, context: str | None,
           parse: Callable[[str, str], Any] = parse_positive_int) -> Any:
    """The prompt (prefill) or context (decode) length asked for; None: the library's default, the
    model's trained maximum at most. `parse`: one length (parse_positive_int) or a list (parse_int_list).
    The other phase's flag alone is refused; beside this phase's, it is ignored with a warning."""
    flag, names, word, other_phase, other = _LENGTHS[phase]
    mine, theirs = (prompt, context) if phase == "prefill" else (context, prompt)
    if theirs is not None and mine is None:
        raise RooflineError(f"{phase} takes {flag} {names}, not {other}; write {flag} {theirs}, or --phase "
                            f"{other_phase} {other} {theirs}")
    value = parse(mine, flag) if mine is not None else None  # a bad length is refused before any warning
    if mine is not None and value is not None:
        say_decimal_lengths(mine, flag, listed=isinstance(value, list))
    if theirs is not None:
        warn(f"{other} {theirs} ignored: a {phase} step's length is its {word} ({flag} {mine}); {other} is "
             f"{other_phase}'s")
    return value


def say_decimal_lengths(text: str, flag: str, listed: bool = False) -> None:
    """"32k" is 32,000: said once the command has ended well, where 32Ki was likelier (cli.common's
    decimal_length_note); in a list or a range (`1k:128k`), of its first such value."""
    notes = (decimal_length_note(part, whole, f"{flag} {text.strip()}:" if listed else flag)
             for part in (re.split(r"[,:]", text) if listed else [text]) if (whole := _k_count(part)))
    note = next((n for n in notes if n), "")
    if note:
        after_writes(lambda: warn(note))


def _k_count(part: str) -> int | None:
    """"128k" -> 128,000; None for anything else (the parse itself has refused what is not a count)."""
    text = part.strip()
    return int(text[:-1]) * 1000 if text[-1:] in ("k", "K") and text[:-1].isdigit() and text[:-1].isascii() else None


def parse_experts_hit(text: str | None) -> int | None:
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
        click.option("--memory-utilization", type=SHARE, default=DEFAULT_MEMORY_UTILIZATION, show_default=True,
                     help="Usable share of each device's memory (vLLM's gpu_memory_utilization). A fit that "
                          "leaves under 5% of the usable memory free is reported as tight, with its headroom."),
        click.option("--overlap", is_flag=True,
                     help="Assume communication runs under compute (the step takes the larger of the two)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def split_of(tp: int, pp: int, ep: int, dp: int, devices: int | None, machine: str) -> Split:
    """The split the options name: --tp/--pp/--ep/--dp, or --devices alone laid out by the library
    (roofline.parallel.split_for_devices: tensor parallel within a node, stages across nodes)."""
    from roofline.parallel import Split, split_for_devices
    from roofline.parallel.deployment import UnevenDevices

    if devices is not None and (tp, pp, dp) == (1, 1, 1):
        try:
            laid_out = split_for_devices(devices, machine)
        except UnevenDevices as exc:
            raise RooflineError(f"--devices {devices} is not a whole number of {exc.node}-device nodes; give --tp "
                                f"and --pp") from None
        tp, pp = laid_out.tp, laid_out.pp
    split = Split(tp=tp, pp=pp, ep=ep, dp=dp)
    if devices is not None and devices != split.devices:
        raise RooflineError(f"--devices {devices} but --tp × --pp × --dp = {split.devices}")
    return split


def expert_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Expert parallel as DeepSeek deploys it (roofline.models.experts); none is on by default."""
    options = [
        click.option("--dispatch-dtype", default=None,
                     help="MoE: the dtype dispatch sends tokens in (fp8: e4m3 values and one FP32 scale per 128 "
                          "channels, as DeepEP; combine stays in the activation dtype). Default: the activation "
                          "dtype."),
        click.option("--dispatch-per-node", is_flag=True,
                     help="MoE under --ep: each token crosses the network once per destination node and NVLink once "
                          "per destination GPU, as DeepEP dispatches (node-limited routing: at most topk_group "
                          "nodes, DeepSeek-V3's 4), not once per expert pick."),
        click.option("--redundant-experts", default=None, metavar="R",
                     help="MoE under --ep: R replicas of the busiest experts beside the E routed ones (EPLB; "
                          "DeepSeek-V3 serves with 32): (E + R)/EP experts a device, all in its memory."),
        click.option("--two-batch-overlap", is_flag=True,
                     help="MoE under --ep: two micro-batches, one's dispatch and combine all-to-all under the other's "
                          "compute (DeepSeek's deployment); the output shows the step with and without it."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def expert_config(model: Any, overrides: Any, dispatch_dtype: str | None, dispatch_per_node: bool,
                  redundant_experts: str | None, two_batch_overlap: bool) -> tuple[Any, Any]:
    """(model, overrides) with the expert options on the parsed config (None overrides: applied), or as
    given when none is asked for. A model without experts refuses them in one line."""
    asked = [name for name, on in (("--dispatch-dtype", dispatch_dtype is not None),
                                   ("--dispatch-per-node", dispatch_per_node),
                                   ("--redundant-experts", redundant_experts is not None),
                                   ("--two-batch-overlap", two_batch_overlap)) if on]
    if not asked:
        return model, overrides
    from dataclasses import replace

    from roofline.dtypes import get_dtype
    from roofline.models import load_config
    redundant = 0
    if redundant_experts is not None and redundant_experts.strip() != "0":
        redundant = parse_positive_int(redundant_experts, "--redundant-experts")
    config = load_config(model, overrides)
    if not config.is_moe:
        raise RooflineError(f"{asked[0]}: {config.name} is not a mixture of experts")
    return replace(config, dispatch_dtype=get_dtype(dispatch_dtype) if dispatch_dtype else None,
                   dispatch_per_node=dispatch_per_node, redundant_experts=redundant,
                   two_batch_overlap=two_batch_overlap), None


ALLREDUCE_CHOICES = ("auto", "ring", "tree", "nvls", "one-shot", "two-shot")


def allreduce_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """`--allreduce`: the algorithm a split's all-reduces run (roofline.parallel.algorithms)."""
    return click.option(
        "--allreduce", type=click.Choice(ALLREDUCE_CHOICES), default="auto", show_default=True,
        help="The algorithm a split's all-reduces run, each with its bytes per device: ring or tree 2(n−1)/n·S, "
             "nvls S (NVLink SHARP, NVSwitch systems only), one-shot (n−1)·S, two-shot 2(n−1)/n·S. auto: as "
             "engines pick (vLLM's custom all-reduce up to 8 MiB, one-shot below 256 KiB on 8 GPUs; then NVLS "
             "where the system has it, else the ring).")(f)


def allreduce_config(model: Any, overrides: Any, allreduce: str) -> tuple[Any, Any]:
    """(model, overrides) with `--allreduce` on the parsed config, or as given for auto."""
    if allreduce == "auto":
        return model, overrides
    from dataclasses import replace

    from roofline.models import load_config
    from roofline.parallel.algorithms import Algorithm
    return replace(load_config(model, overrides), allreduce=Algorithm(allreduce)), None


def allreduce_system(machine: Any, allreduce: str) -> None:
    """`--allreduce nvls` on a system without NVLink SHARP: refused in one line."""
    if allreduce != "nvls":
        return
    from roofline.hardware import get_system
    from roofline.parallel.algorithms import AllReduceRule
    try:
        system = get_system(machine)
    except RooflineError:
        system = None
    AllReduceRule.for_system("" if system is None or system.from_device else system.id, allreduce, str(machine))


def expert_split(config: Any, split: Split) -> None:
    """The expert options name the expert-parallel group: refused in one line without --ep > 1."""
    from roofline.models.split import require_expert_parallel
    from roofline.models.transformer import ModelConfig

    if isinstance(config, ModelConfig):
        require_expert_parallel(config, split)


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


ENGINE_HELP = "Engine whose measured kernels the expected times are fitted on (default: the one with most rows)."
CALIBRATION_HELP = ("Your own expected-time file (roofline calibrate --save) or bench calibration (roofline bench "
                    "--save-calibration), in place of the shipped fit.")


def calibration_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--engine and --calibration: which measured fit gives the expected band (roofline.calibration.choose)."""
    for option in reversed([
        click.option("--engine", type=click.Choice(["trtllm", "vllm", "sglang"]), default=None, help=ENGINE_HELP),
        click.option("--calibration", default=None, metavar="FILE", help=CALIBRATION_HELP),
    ]):
        f = option(f)
    return f


def target_options(when: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--ttft-slo, --itl-slo (each a time with its unit) and --price-per-device-hour, the serving targets
    `serve` and `plan --output` take; `when` opens each help line ("With --output: ")."""
    def add(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed([
            click.option("--ttft-slo", type=TIME_TARGET, default=None, metavar="TIME",
                         help=f"{when}time-to-first-token target with its unit (2s, 500ms); per request, no queueing."),
            click.option("--itl-slo", type=TIME_TARGET, default=None, metavar="TIME",
                         help=f"{when}inter-token latency target for the mean over the generation, with its unit "
                              "(50ms)."),
            click.option("--price-per-device-hour", type=PositiveNumber(1e6), default=None, metavar="PRICE",
                         help=f"{when}price of one device for an hour (2.5; at most 1e6): cost per million input "
                              "and output tokens."),
        ]):
            f = option(f)
        return f
    return add


def write_text(output: str | None, text: str) -> None:
    if output:
        from roofline.fileio import atomic_write

        atomic_write(output, text if text.endswith("\n") else text + "\n")
        wrote(output)
    else:
        echo(text)


__all__ = [
    "CALIBRATION_HELP",
    "ENGINE_HELP",
    "WEIGHTS_DEFAULT_HELP",
    "allreduce_config",
    "allreduce_option",
    "allreduce_system",
    "calibration_options",
    "expert_config",
    "expert_options",
    "expert_split",
    "length",
    "parse_experts_hit",
    "parse_overrides",
    "parse_str_list",
    "split_of",
    "split_options",
    "step_options",
    "target_options",
    "write_text",
]
