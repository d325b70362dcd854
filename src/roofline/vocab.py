"""Closed vocabularies: the words the whole library shares, as enums.

Each is a `StrEnum`: inside the library a value is an enum member (a typo is an AttributeError, not
a silent miss); at the JSON edge and in text it is its lowercase string (`json.dumps(Unit.MATRIX)`
is `"matrix"`), so files and outputs read as before.

    Unit    the compute units a kernel's FLOPs are split over
    Level   the memory levels a kernel's bytes are split over
    Bound   the class of the resource that sets a time floor: compute (a unit) or memory (a level)
    Phase   a transformer step: prefill or decode
    Role    what a tensor is, for the byte breakdown: weight, KV cache, activation
    Plan    a fusion plan: which ops run as one kernel
    Objective  what a split search ranks by: step time, throughput per device, or throughput within a latency
    Norm    a transformer's normalization: RMSNorm or LayerNorm
    Logits  which prefill positions the LM head projects: the last of each sequence, or all
    MlaForm how multi-head latent attention runs: over the latent (W_UK/W_UV absorbed) or expanded per head

One rule decides what binds (`binding`), for one kernel and for a sequence of kernels alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum


class Unit(StrEnum):
    """Compute units. MATRIX: tensor cores, MXU, AMX (matmuls); VECTOR: plain SIMT/SIMD lanes
    (elementwise work, reductions, norms, softmax); EXP: the special-function units that evaluate
    exponentials and other transcendentals (NVIDIA's MUFU/SFU: exp2, rsqrt, tanh), whose work is
    counted in operations, one per exponential, beside the FLOPs of the vector lanes."""

    MATRIX = "matrix"
    VECTOR = "vector"
    EXP = "exp"


class Level(StrEnum):
    """Where bytes move. DRAM is off-chip memory (HBM, GDDR, DDR): the slope of the roofline. LINK is
    the device-to-device link inside a node (NVLink through NVSwitch, Infinity Fabric, PCIe, ICI),
    NETWORK the one between nodes (InfiniBand, RoCE): the roofs collectives sit under."""

    DRAM = "dram"
    L1 = "l1"  # a CPU core's L1 data cache (measured by `roofline measure`'s cache ladder)
    L2 = "l2"
    L3 = "l3"  # a CPU's last-level cache (AMD GPUs' Infinity Cache is not modelled)
    SMEM = "smem"  # on-chip shared memory per SM (NVIDIA) or local data share per CU (AMD)
    LINK = "link"
    NETWORK = "network"


LINKS = (Level.LINK, Level.NETWORK)
ON_CHIP = (Level.SMEM, Level.L1, Level.L2, Level.L3)  # levels inside the chip: their bytes depend on a kernel's tiling


Resource = Unit | Level


class Bound(StrEnum):
    """What kind of resource sets the floor: a compute unit, a memory level, or a link between devices."""

    COMPUTE = "compute"
    MEMORY = "memory"
    COMMUNICATION = "communication"


class Phase(StrEnum):
    PREFILL = "prefill"
    DECODE = "decode"


class Role(StrEnum):
    WEIGHT = "weight"
    KV_CACHE = "kv_cache"
    ACTIVATION = "activation"


class Plan(StrEnum):
    """Fusion plans over one graph (same FLOPs, fewer bytes as you go down the list).

    NONE    every op its own kernel; attention writes its scores and probabilities to memory
    FLASH   attention's ops one kernel (FlashAttention): scores stay on chip
    FUSED   FLASH, and norms into the next matmul, activations and residual adds into epilogues
    TRACED  the kernels a traced program actually ran (a fused SDPA call is one kernel)
    """

    NONE = "none"
    FLASH = "flash"
    FUSED = "fused"
    TRACED = "traced"


class Norm(StrEnum):
    RMSNORM = "rmsnorm"
    LAYERNORM = "layernorm"  # a bias as well as a gain


class Logits(StrEnum):
    LAST = "last"  # the last position of each prefill sequence, as serving engines do
    ALL = "all"  # every position, as a plain forward() does


class MlaForm(StrEnum):
    ABSORBED = "absorbed"  # attention over the compressed latent, W_UK and W_UV absorbed (DeepSeek's decode)
    EXPANDED = "expanded"  # K and V decompressed and cached per head (Hugging Face's DeepseekV3Attention)


class Objective(StrEnum):
    """What the split search ranks the splits that fit by.

    TIME        the lowest step time (a token's latency)
    THROUGHPUT  the most tokens/s per device
    LATENCY     the most tokens/s per device among the splits within a latency target
    """

    TIME = "time"
    THROUGHPUT = "throughput"
    LATENCY = "latency"


def bound_class(resource: Resource) -> Bound:
    """compute for a unit, communication for a link, memory for the other levels."""
    if isinstance(resource, Unit):
        return Bound.COMPUTE
    return Bound.COMMUNICATION if resource in LINKS else Bound.MEMORY


def binding(times_s: Mapping[Unit, float] | Mapping[Level, float] | Mapping[Resource, float]) -> Resource:
    """THE bound rule: the resource whose time is the largest sets the floor and binds.

    For one kernel `times_s` holds each unit's FLOPs / peak and each level's bytes / bandwidth.
    For kernels run one after another it holds, per resource, the floors of the kernels that
    resource binds (so a step is DRAM-bound when most of its time is spent in DRAM-bound kernels).
    Ties go to memory, as in `kernel_time` (`compute` only if I > I*, strictly). With no time at
    all (a kernel that does nothing) DRAM binds.
    """
    best: Resource = Level.DRAM
    best_key = (-1.0, True)
    for resource, seconds in times_s.items():
        key = (seconds, isinstance(resource, Level))
        if key > best_key:
            best, best_key = resource, key
    return best


def accumulate(pairs: Iterable[tuple[Resource, float]]) -> dict[Resource, float]:
    """Σ seconds per resource: the times a sequence of kernels spends bound by each."""
    out: dict[Resource, float] = {}
    for resource, seconds in pairs:
        out[resource] = out.get(resource, 0.0) + seconds
    return out


__all__ = ["LINKS", "ON_CHIP", "Bound", "Level", "Logits", "MlaForm", "Norm", "Objective", "Phase", "Plan", "Resource",
           "Role", "Unit", "accumulate", "binding", "bound_class"]
