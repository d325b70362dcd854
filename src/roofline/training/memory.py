"""Memory per device in training: weights, gradients, optimizer states, activations.

Model states (ZeRO, Rajbhandari et al. 2020, arXiv 1910.02054, section 3.1): mixed-precision Adam keeps
BF16 weights (2 bytes a parameter), BF16 gradients (2) and K = 12 bytes of optimizer state (the FP32
master copy, momentum and variance): 16 bytes a parameter. ZeRO shards them over the Nd data-parallel
ranks stage by stage:

    stage 0   (2 + 2 + K)·Ψ                  stage 2   2Ψ + (2 + K)·Ψ / Nd
    stage 1   (2 + 2)·Ψ + K·Ψ / Nd           stage 3   (2 + 2 + K)·Ψ / Nd       (FSDP's full sharding)

Ψ here is one device's parameters: its share under tensor and expert parallelism on one pipeline
stage (roofline.models.memory.device_weights_bytes at 2 bytes a parameter); Nd = dp · cp.

Activations per layer and micro-batch (Korthikanti et al. 2022, arXiv 2205.05198, section 4, the GPT
layer in 16-bit with 1-byte dropout masks; s the tokens a rank holds, b the micro-batch, h the hidden
size, a the heads, t the tensor-parallel degree):

    none, with sequence parallel      s·b·h·(34 + 5·a·s/h) / t
    none, tensor parallel only        s·b·h·(10 + 24/t + 5·a·s/(h·t))
    selective                         34·s·b·h / t           (with SP; 10 + 24/t without)
    full                              2·s·b·h / t            (the layer's input alone; with SP, /t)

The 5·a·s/h term is the attention scores, softmax and its dropout (s×s per head). FlashAttention never
stores them (it keeps a log-sum-exp per row and recomputes the scores in its backward), so under the
flash and fused plans `none` counts as `selective` and the report says so. Full recompute also holds
one layer's activations while that layer is recomputed (34·s·b·h/t once). The count is GPT's layer
(a 4h MLP, as many key/value heads as query heads); a gated MLP or GQA changes the 34 (stated, not
modelled).

In flight (1F1B, Narayanan et al. 2021): the first stage holds the activations of min(p, m)
micro-batches at once, the last one; the last stage also keeps one micro-batch's logits in FP32 for
the cross-entropy (4·s·b·V/t bytes). The device reported is the fuller of the two.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from roofline.frozen import frozen
from roofline.models.dtypes import model_dtypes
from roofline.models.memory import DeviceMemory, device_weights_bytes
from roofline.models.split import stage_layers
from roofline.models.transformer import ModelConfig
from roofline.parallel import Split
from roofline.training.setup import GRADIENT_BYTES, OPTIMIZER_BYTES, WEIGHT_BYTES, Recompute, TrainSetup, Zero
from roofline.units import format_bytes


def zero_bytes_per_param(zero: Zero, data_ranks: int, optimizer_bytes: float = 12.0) -> dict[str, float]:
    """Bytes a parameter of model states costs one device under ZeRO `zero` over `data_ranks` ranks:
    weights, gradients and optimizer states (ZeRO section 3.1; 16 at stage 0 with Adam)."""
    nd = data_ranks
    return {"weights": WEIGHT_BYTES / (nd if zero >= Zero.PARAMETERS else 1),
            "gradients": GRADIENT_BYTES / (nd if zero >= Zero.GRADIENTS else 1),
            "optimizer": optimizer_bytes / (nd if zero >= Zero.OPTIMIZER else 1)}


def korthikanti_layer_bytes(s: int, b: int, h: int, a: int, t: int, recompute: Recompute,
                            sequence_parallel: bool, scores_stored: bool = True) -> float:
    """Activation bytes of one transformer layer for one micro-batch (module docstring); with
    `scores_stored` False (FlashAttention) the 5·a·s/h term is never held."""
    sbh = float(s) * b * h
    if recompute is Recompute.FULL:
        return 2.0 * sbh / (t if sequence_parallel else 1)
    scores = 5.0 * a * s / h if recompute is Recompute.NONE and scores_stored else 0.0
    if sequence_parallel:
        return sbh * (34.0 + scores) / t
    return sbh * (10.0 + 24.0 / t + scores / t)


@frozen
class TrainMemory(DeviceMemory):
    """One device's memory in training, the fuller pipeline stage's."""

    params: float  # Ψ: this device's parameters before ZeRO sharding
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    activation_layer_bytes: float  # one layer, one micro-batch
    in_flight: int  # micro-batches whose activations the first stage holds (1F1B)
    logits_bytes: float  # the last stage's FP32 logits of one micro-batch
    workspace_bytes: float  # the largest set of tensors one kernel reads and writes (roofline.models.memory)
    capacity_bytes: float | None
    utilization: float
    scores_note: str = ""

    @property
    def per_device_bytes(self) -> float:
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes
                + self.workspace_bytes)

    @property
    def held_bytes(self) -> float:
        return self.per_device_bytes

    def summary(self) -> str:
        """One line: the parts and the verdict (binary sizes, as capacities are)."""
        parts = (f"weights {format_bytes(self.weights_bytes, binary=True)} + gradients "
                 f"{format_bytes(self.gradients_bytes, binary=True)} + optimizer "
                 f"{format_bytes(self.optimizer_bytes, binary=True)} + activations "
                 f"{format_bytes(self.activations_bytes, binary=True)} + workspace "
                 f"{format_bytes(self.workspace_bytes, binary=True)} = "
                 f"{format_bytes(self.per_device_bytes, binary=True)}")
        if self.usable_bytes is None:
            return parts + " (the device lists no capacity)"
        verdict = "fits" if self.fits else "does not fit"
        return (f"{parts}: {verdict} in {format_bytes(self.usable_bytes, binary=True)} usable "
                f"({self.utilization:.0%} of {format_bytes(self.capacity_bytes or 0, binary=True)}), headroom "
                f"{format_bytes(self.headroom_bytes or 0.0, binary=True)}")

    def to_dict(self) -> dict[str, Any]:
        return {"weights_bytes": self.weights_bytes, "gradients_bytes": self.gradients_bytes,
                "optimizer_bytes": self.optimizer_bytes, "activations_bytes": self.activations_bytes,
                "workspace_bytes": self.workspace_bytes, "per_device_bytes": self.per_device_bytes,
                "fits": self.fits, "params_per_device": self.params,
                "activation_bytes_per_layer": self.activation_layer_bytes, "micro_batches_in_flight": self.in_flight,
                "logits_bytes": self.logits_bytes, "capacity_bytes": self.capacity_bytes,
                "usable_bytes": self.usable_bytes, "headroom_bytes": self.headroom_bytes,
                "utilization": self.utilization, "note": self.scores_note or None}


def device_params(setup: TrainSetup) -> float:
    """Ψ: the parameters on the fullest stage's device (tp and ep shares, ⌈L/pp⌉ layers, the larger edge table)."""
    sp = setup.split
    return _params(setup.config, sp.tp, sp.pp, sp.ep, sp.data_ranks)


@functools.lru_cache(maxsize=512)  # a pure function of frozen values: a split search asks it per candidate
def _params(cfg: ModelConfig, tp: int, pp: int, ep: int, data_ranks: int) -> float:
    split = Split(tp=tp, pp=pp, ep=ep, dp=data_ranks)
    return device_weights_bytes(cfg, split, model_dtypes("bf16")) / 2.0


def train_memory(setup: TrainSetup, capacity_bytes: float | None, utilization: float, scores_stored: bool,
                 workspace_bytes: float = 0.0) -> TrainMemory:
    """The memory of the module docstring for `setup`'s fuller stage."""
    cfg, sp = setup.config, setup.split
    psi = device_params(setup)
    per = zero_bytes_per_param(setup.zero, sp.data_ranks, OPTIMIZER_BYTES[setup.optimizer])
    s = setup.seq // sp.cp
    layer = korthikanti_layer_bytes(s, setup.micro_batch, cfg.hidden_size, cfg.num_heads, sp.tp, setup.recompute,
                                    setup.sp, scores_stored)
    layers = stage_layers(cfg, sp.inference_split())
    in_flight = min(sp.pp, setup.micro_batches)
    full_layer = korthikanti_layer_bytes(s, setup.micro_batch, cfg.hidden_size, cfg.num_heads, sp.tp,
                                         Recompute.SELECTIVE, setup.sp)
    recompute_buffer = full_layer if setup.recompute is Recompute.FULL else 0.0
    logits = 4.0 * s * setup.micro_batch * math.ceil(cfg.vocab_size / sp.tp)
    first = layer * layers * in_flight + recompute_buffer
    last = layer * layers + recompute_buffer + logits
    note = ""
    if not scores_stored and setup.recompute is Recompute.NONE:
        note = ("FlashAttention stores no s×s scores: Korthikanti's 5·a·s/h term is not held, so no recompute "
                "keeps what selective recompute keeps")
    return TrainMemory(psi, per["weights"] * psi, per["gradients"] * psi, per["optimizer"] * psi,
                       max(first, last) if sp.pp > 1 else layer * layers + recompute_buffer + logits, layer,
                       in_flight, logits, workspace_bytes, capacity_bytes, utilization, note)


__all__ = ["TrainMemory", "device_params", "korthikanti_layer_bytes", "train_memory", "zero_bytes_per_param"]
