"""What a training step is: the model, the batch, the split over devices and the training choices,
checked once into one frozen value (`describe_training`).

    global batch B sequences of S tokens   (or --tokens-per-batch = B·S)
    micro-batch b sequences                 each data-parallel rank runs m = B / (dp · b) micro-batches a step
    split tp × cp × pp × dp (ep inside)     devices = tp · cp · pp · dp; expert parallel spreads the experts
                                            over ep of the tp · cp · dp devices of a stage (Megatron-Core)

Devices are laid out as Megatron-LM orders its groups (tp-cp-ep-dp-pp: tensor parallel innermost,
then context, then data parallel, pipeline stages outermost), so a tp group shares a node's link, and
a group spans nodes when its stride times its size passes the node's devices (`group_level`).

Refused with one line each (roofline.errors.RooflineError): a tp that does not divide the heads, a pp
above the layers, a global batch not divisible by dp × micro-batch, fewer micro-batches than stages
(1F1B needs m ≥ p), ZeRO or FSDP with dp 1, a cp that does not divide the sequence. A pp that does
not divide the layers is run with ⌈L/pp⌉ layers on the fullest stage, and a warning says so (Llama 3
405B trained 126 layers over 16 stages, its first and last stages a layer short).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from enum import IntEnum, StrEnum

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.models.config import load_config
from roofline.models.split import check_split
from roofline.models.transformer import ModelConfig
from roofline.parallel import Split
from roofline.units import require_positive_int
from roofline.vocab import Level, Logits, Plan


class Recompute(StrEnum):
    """Activation recomputation (Korthikanti et al. 2022, arXiv 2205.05198).

    NONE       every activation kept for the backward
    SELECTIVE  the attention core (scores, softmax, its dropout) recomputed in the backward
    FULL       only each layer's input kept; the whole layer's forward rerun before its backward
    """

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class Optimizer(StrEnum):
    """ADAMW: mixed-precision AdamW, an FP32 master copy and two FP32 moments (12 bytes a parameter);
    SGD: plain SGD over an FP32 master copy (4 bytes a parameter)."""

    ADAMW = "adamw"
    SGD = "sgd"


class Precision(StrEnum):
    """BF16: matmuls at the BF16 peak; FP8: matmuls at the FP8 peak (Transformer Engine's recipe),
    weights, gradients and activations kept in BF16."""

    BF16 = "bf16"
    FP8 = "fp8"


class Zero(IntEnum):
    """ZeRO stages (Rajbhandari et al. 2020, arXiv 1910.02054): what is sharded over the data-parallel
    ranks. 3 is PyTorch FSDP's full sharding (Zhao et al. 2023, arXiv 2304.11277)."""

    NONE = 0  # plain data parallel: gradients all-reduced
    OPTIMIZER = 1  # optimizer states sharded
    GRADIENTS = 2  # ... and gradients
    PARAMETERS = 3  # ... and parameters (FSDP)


# optimizer state bytes per parameter (ZeRO's K): FP32 master + momentum + variance; SGD: the master
OPTIMIZER_BYTES = {Optimizer.ADAMW: 12.0, Optimizer.SGD: 4.0}
WEIGHT_BYTES = 2.0  # BF16 working weights (ZeRO's 2Ψ)
GRADIENT_BYTES = 2.0  # BF16 gradients (ZeRO's 2Ψ)


@frozen
class TrainSplit:
    """Degrees of a training split. `ep` reuses the devices of a stage (it divides tp · cp · dp)."""

    tp: int = 1
    cp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for label in ("tp", "cp", "pp", "dp", "ep"):
            require_positive_int(getattr(self, label), f"--{label}")
        if (self.tp * self.cp * self.dp) % self.ep:
            raise RooflineError(f"--ep {self.ep} must divide tp × cp × dp = {self.tp * self.cp * self.dp} (the "
                                "experts are spread over the devices of a pipeline stage)")

    @property
    def devices(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def data_ranks(self) -> int:
        """The ranks a parameter is replicated on, and ZeRO shards over: dp · cp (Megatron's
        distributed optimizer shards over the data-and-context-parallel group)."""
        return self.dp * self.cp

    def inference_split(self) -> Split:
        """The same devices as the inference room's Split: cp folded into dp (each of its ranks holds a
        slice of the tokens, as a data-parallel rank holds a slice of the batch)."""
        return Split(tp=self.tp, pp=self.pp, ep=self.ep, dp=self.dp * self.cp)

    def to_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "cp": self.cp, "pp": self.pp, "dp": self.dp, "ep": self.ep, "devices": self.devices}

    def __str__(self) -> str:
        parts = [f"{k.upper()} {v}" for k, v in self.to_dict().items() if k != "devices" and v > 1]
        return " × ".join(parts) or "one device"

    @property
    def flags(self) -> str:
        return " ".join(f"--{k} {v}" for k, v in self.to_dict().items() if k != "devices" and v > 1)


def group_level(stride: int, size: int, devices_per_node: int) -> Level:
    """The roof of a group of `size` devices `stride` apart (tp: stride 1; cp: stride tp; dp: stride
    tp·cp): the node's link when the whole span stride·size sits in one node, else the network."""
    span = stride * size
    return Level.LINK if span <= devices_per_node and devices_per_node % span == 0 else Level.NETWORK


@frozen
class TrainSetup:
    """One training step, checked: the model (logits over every position, as training needs), the
    sequences, the split and the choices."""

    config: ModelConfig
    seq: int
    global_batch: int
    micro_batch: int
    split: TrainSplit
    zero: Zero = Zero.NONE
    recompute: Recompute = Recompute.NONE
    optimizer: Optimizer = Optimizer.ADAMW
    precision: Precision = Precision.BF16
    overlap: bool = False
    sequence_parallel: bool = True  # Megatron's --sequence-parallel with tp > 1 (Korthikanti et al.)
    plan: Plan = Plan.FLASH  # the forward's fusion plan (FlashAttention, as training runs attention)
    virtual_stages: int = 1  # Megatron-LM's interleaved 1F1B: model chunks a device holds (Narayanan et al. 2021)
    warnings: tuple[str, ...] = ()

    @property
    def micro_batches(self) -> int:
        """m = B / (dp · b): the micro-batches each data-parallel rank runs in one step."""
        return self.global_batch // (self.split.dp * self.micro_batch)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq

    @property
    def sp(self) -> bool:
        """Sequence parallel in effect (it needs tp > 1)."""
        return self.sequence_parallel and self.split.tp > 1

    def with_split(self, split: TrainSplit) -> TrainSetup:
        return replace(self, split=split)


def check_setup(cfg: ModelConfig, seq: int, global_batch: int, micro_batch: int, split: TrainSplit,
                zero: Zero) -> list[str]:
    """The one-line refusals of the module docstring (the model's own split checks first); the
    warnings of a split the model runs unevenly."""
    warnings = check_split(cfg, split.inference_split(), split.dp * split.cp)
    if seq % split.cp:
        raise RooflineError(f"--cp {split.cp} does not divide the sequence of {seq} tokens (each context-parallel "
                            f"rank holds S/cp of them)")
    if split.cp > 1 and (seq // split.cp) % 2:
        raise RooflineError(f"--cp {split.cp}: S/cp = {seq // split.cp} must be even (the causal load balance gives "
                            "each rank two halves of its chunk)")
    unit = split.dp * micro_batch
    if global_batch % unit:
        lower, upper = global_batch // unit * unit, -(-global_batch // unit) * unit
        near = ", ".join(str(x) for x in (lower, upper) if x > 0)
        raise RooflineError(f"--global-batch {global_batch} is not divisible by dp × micro-batch = {split.dp} × "
                            f"{micro_batch} = {unit}; try {near}")
    m = global_batch // unit
    if m < split.pp:
        raise RooflineError(f"{m} micro-batches (global batch {global_batch} / (dp {split.dp} × micro-batch "
                            f"{micro_batch})) are fewer than the {split.pp} pipeline stages: 1F1B needs at least one "
                            f"micro-batch a stage; raise --global-batch to {unit * split.pp} or lower --pp")
    if zero is not Zero.NONE and split.data_ranks == 1:
        raise RooflineError(f"ZeRO stage {int(zero)} shards over the data-parallel ranks, and there is one (dp × cp = "
                            "1); give --dp above 1 or --zero 0")
    return warnings


_TOKENS = re.compile(r"(\d+(?:\.\d+)?(?:e\d+)?)\s*([kKMGTP]?)", re.ASCII)
_SCALE = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def parse_tokens(text: str, label: str = "--tokens") -> float:
    """A token count like 15T (15e12), 2.5T, 300G, 1e12: positive and finite."""
    m = _TOKENS.fullmatch(str(text).strip())
    value = float(m.group(1)) * _SCALE[m.group(2)] if m else math.nan
    if not (value >= 1 and math.isfinite(value)):
        raise RooflineError(f"{label} must be a token count like 15T (15e12), 300G or 1e12; got {str(text)[:40]!r}")
    return value


def describe_training(model: str | ModelConfig, seq: int, global_batch: int | None = None, micro_batch: int = 1,
                      split: TrainSplit | None = None, zero: Zero | int = Zero.NONE,
                      recompute: Recompute | str = Recompute.NONE, optimizer: Optimizer | str = Optimizer.ADAMW,
                      precision: Precision | str = Precision.BF16, overlap: bool = False,
                      tokens_per_batch: int | None = None, sequence_parallel: bool = True,
                      plan: Plan | str = Plan.FLASH, overrides: dict[str, str] | None = None,
                      virtual_stages: int = 1, check: bool = True) -> TrainSetup:
    """The training step as asked: `global_batch` sequences of `seq` tokens, or `tokens_per_batch`
    (a whole number of sequences), checked by `check_setup` (unless not `check`: a split search
    checks each candidate instead)."""
    cfg = replace(load_config(model, overrides), logits=Logits.ALL)  # the loss reads every position's logits
    require_positive_int(seq, "--seq")
    require_positive_int(micro_batch, "--micro-batch")
    if (global_batch is None) == (tokens_per_batch is None):
        raise RooflineError("give the batch once: --global-batch B (sequences) or --tokens-per-batch (B × S)")
    if tokens_per_batch is not None:
        require_positive_int(tokens_per_batch, "--tokens-per-batch")
        if tokens_per_batch % seq:
            raise RooflineError(f"--tokens-per-batch {tokens_per_batch} is not a whole number of {seq}-token "
                                "sequences")
        global_batch = tokens_per_batch // seq
    assert global_batch is not None
    require_positive_int(global_batch, "--global-batch")
    sp = split or TrainSplit()
    for enum, value, what in ((Recompute, recompute, "recompute mode"), (Optimizer, optimizer, "optimizer"),
                              (Precision, precision, "precision")):
        if value not in tuple(enum):
            raise RooflineError(f"unknown {what} {value!r}; choose one of {', '.join(enum)}")
    if plan not in (Plan.NONE, Plan.FLASH, Plan.FUSED):
        raise RooflineError(f"unknown fusion plan {plan!r}; plans: none, flash, fused")
    if zero not in tuple(Zero):
        raise RooflineError(f"ZeRO stage {zero!r}: choose 0, 1, 2 or 3")
    z = Zero(zero)
    warnings = check_setup(cfg, seq, global_batch, micro_batch, sp, z) if check else []
    require_positive_int(virtual_stages, "--virtual-stages")
    if virtual_stages > 1 and check:
        m = global_batch // (sp.dp * micro_batch)
        if sp.pp == 1:
            raise RooflineError("--virtual-stages interleaves pipeline stages: give --pp above 1")
        if sp.pp * virtual_stages > cfg.num_layers:
            raise RooflineError(f"--pp {sp.pp} × --virtual-stages {virtual_stages} = {sp.pp * virtual_stages} model "
                                f"chunks is more than {cfg.name}'s {cfg.num_layers} layers")
        if m % sp.pp:
            raise RooflineError(f"the interleaved schedule needs the micro-batches ({m}) to be a multiple of --pp "
                                f"{sp.pp} (Megatron-LM's rule)")
    return TrainSetup(cfg, seq, global_batch, micro_batch, sp, z, Recompute(recompute), Optimizer(optimizer),
                      Precision(precision), overlap, sequence_parallel, Plan(plan), virtual_stages,
                      tuple(warnings))


__all__ = ["GRADIENT_BYTES", "OPTIMIZER_BYTES", "WEIGHT_BYTES", "Optimizer", "Precision", "Recompute", "TrainSetup",
           "TrainSplit", "Zero", "check_setup", "describe_training", "group_level", "parse_tokens"]
