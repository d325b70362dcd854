"""Memory per device, the way serving engines see it, and the smallest split that fits.

    per device = weights + KV cache + activation workspace (+ runtime reserve)
    usable     = capacity × utilization (vLLM's gpu_memory_utilization, default 0.9: the rest is left to
                 the CUDA context, NCCL buffers, CUDA graphs and fragmentation)

Weights per device: the parameters of one device's share of the widths (roofline.models.split.shard),
the layer parts × ⌈L/pp⌉/L on one pipeline stage plus the larger of the first stage's embedding
table(s) and the last stage's LM head (a tied head keeps a copy of the table there); routed experts
/ ep, whole (with --tp too: expert parallelism does not split an expert by tp; shared experts and the
router are replicated); multi-token-prediction layers on the last stage. KV cache per device: one
replica's batch/dp sequences at the device's KV heads, × ⌈L/pp⌉/L.
Activation workspace: the largest set of activations one kernel of the step reads and writes at
once (what must be live together), a lower bound on what an engine's profiling run reserves.

The fewest devices is the smallest VALID split that fits, searched as engines deploy: tensor
parallel within a node first (every tp that divides the heads, up to the node's devices), then
pipeline stages across nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from roofline.errors import RooflineError, T
from roofline.frozen import frozen
from roofline.graph import Kernel
from roofline.models.dtypes import ModelDtypes
from roofline.models.mtp import MTP_PARTS
from roofline.models.shared import shared
from roofline.models.split import shard, stage_share, valid_splits
from roofline.models.transformer import ModelConfig
from roofline.parallel import MOST_DEVICES, NODE_DEVICES, Split
from roofline.units import format_bytes
from roofline.vocab import Role

DEFAULT_UTILIZATION = 0.9  # vLLM's gpu_memory_utilization default
def gib(size: float) -> str:
    """Memory sizes in binary units, as device capacities are (80 GiB)."""
    return format_bytes(size, binary=True)


EDGE_PARTS = ("embedding", "position_embedding", "lm_head")  # on the first and the last pipeline stage


class DeviceMemory:
    """What a device holds against its usable memory (capacity × utilization); a subclass gives
    capacity_bytes, utilization and held_bytes (its own sum of parts)."""

    capacity_bytes: float | None
    utilization: float

    @property
    def held_bytes(self) -> float:
        raise NotImplementedError

    @property
    def usable_bytes(self) -> float | None:
        return None if self.capacity_bytes is None else self.capacity_bytes * self.utilization

    @property
    def fits(self) -> bool | None:
        return None if self.usable_bytes is None else self.held_bytes <= self.usable_bytes

    @property
    def headroom_bytes(self) -> float | None:
        return None if self.usable_bytes is None else self.usable_bytes - self.held_bytes


@frozen
class MemoryFit(DeviceMemory):
    """One device's weights, KV cache and workspace against its usable memory, and the smallest
    valid split that fits (None: none up to the system's devices)."""

    weights_bytes: float
    kv_cache_bytes: float
    workspace_bytes: float
    capacity_bytes: float | None
    utilization: float
    machine: str
    split: Split
    min_split: Split | None
    searched_devices: int
    batch: int = 1  # sequences of the step, over every replica
    layout: str = ""  # the split's layout the search kept ("EP × DP, TP 1"), "" when it searched every split

    @property
    def max_batch(self) -> int | None:
        """The largest batch this split holds: the weights stay, and the KV cache and the workspace grow
        with the sequences (each replica's batch/dp), so per replica ⌊(usable − weights) / ((KV +
        workspace) / (batch/dp))⌋, × dp; 0 when even the weights do not fit, None without a capacity."""
        if self.usable_bytes is None:
            return None
        per_replica = self.batch // self.split.dp
        per_sequence = (self.kv_cache_bytes + self.workspace_bytes) / per_replica
        room = self.usable_bytes - self.weights_bytes
        if room <= 0:
            return 0
        return int(room // per_sequence) * self.split.dp if per_sequence else None

    @property
    def total_bytes(self) -> float:
        """Per device: weights + KV cache + activation workspace."""
        return self.weights_bytes + self.kv_cache_bytes + self.workspace_bytes

    @property
    def held_bytes(self) -> float:
        return self.total_bytes

    @property
    def devices(self) -> int | None:
        """The fewest devices: those of the smallest valid split that fits."""
        return None if self.min_split is None else self.min_split.devices

    @property
    def warning(self) -> str:
        if self.capacity_bytes is None:
            return f"{self.machine} lists no memory capacity: cannot check that the model fits"
        if self.fits:
            return ""
        where = (f"one {self.machine}" if self.split.trivial
                 else f"each of {self.split.devices} {self.machine} ({self.split})")
        text = (f"does not fit on {where}: weights {gib(self.weights_bytes)} + KV cache "
                f"{gib(self.kv_cache_bytes)} + workspace {gib(self.workspace_bytes)} = {gib(self.total_bytes)} per "
                f"device > {gib(self.usable_bytes or 0)} usable ({self.utilization:.0%} of "
                f"{gib(self.capacity_bytes)}); ")
        if self.min_split is None:
            return text + f"no valid split of up to {self.searched_devices} devices holds it"
        flags = " ".join(f"--{k} {v}" for k, v in self.min_split.to_dict().items() if k != "devices" and v > 1)
        kind = f"split of this layout ({self.layout})" if self.layout else "valid split"
        return text + (f"the smallest {kind} that fits is {self.min_split} ({self.min_split.devices} devices: "
                       f"{flags})")

    def to_dict(self) -> dict[str, Any]:
        return {"weights_bytes": self.weights_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "workspace_bytes": self.workspace_bytes, "total_bytes": self.total_bytes,
                "capacity_bytes": self.capacity_bytes, "utilization": self.utilization,
                "usable_bytes": self.usable_bytes, "devices": self.devices,
                "min_split": None if self.min_split is None else self.min_split.to_dict(),
                "min_split_layout": self.layout or None, "fits": self.fits,
                "max_batch": self.max_batch,
                "warning": self.warning or None}


def device_weights_bytes(cfg: ModelConfig, split: Split, dtypes: ModelDtypes) -> float:
    """One device's weights: its share of the widths; one stage's layers; the edge tables of the fuller
    end. Each part in its own dtype (a quantized checkpoint's tables and excluded modules in BF16).
    Within a search (roofline.models.shared) once a layout: its memory fit and its serving report ask."""
    return shared(("weights", id(cfg), split, id(dtypes)), lambda: _device_weights_bytes(cfg, split, dtypes),
                  cfg, dtypes)


def _device_weights_bytes(cfg: ModelConfig, split: Split, dtypes: ModelDtypes) -> float:
    parts = shard(cfg, split).param_counts().parts
    layers = {k: float(v) for k, v in parts.items() if k not in EDGE_PARTS and k not in MTP_PARTS}
    mtp = {k: float(parts[k]) for k in MTP_PARTS if k in parts}  # multi-token prediction: after the last layer
    # (E + R) / ep whole experts a device: the E routed ones and R redundant replicas (--redundant-experts)
    slots = (cfg.num_experts + cfg.redundant_experts) / cfg.num_experts if cfg.is_moe else 1.0
    for group, part, share in ((layers, "experts", slots), (layers, "expert_biases", slots), (mtp, "mtp_experts", 1.0)):
        if split.ep > 1 and part in group:
            group[part] *= share / split.ep
    if split.pp == 1:
        return dtypes.weights_bytes({**layers, **mtp, **{k: parts[k] for k in EDGE_PARTS if k in parts}})
    first = dtypes.weights_bytes({k: parts.get(k, 0) for k in ("embedding", "position_embedding")})
    last = (dtypes.weights_bytes({"lm_head": parts["lm_head"]}) if parts.get("lm_head")
            else dtypes.weights_bytes({"embedding": parts.get("embedding", 0)}))  # a tied head keeps a copy
    last += dtypes.weights_bytes(mtp)  # the MTP layers sit on the last stage, beside the head
    share = stage_share(cfg, split)
    return dtypes.weights_bytes(layers) * share + max(first, last)


def device_kv_bytes(cfg: ModelConfig, split: Split, batch: int, context: int, dtypes: ModelDtypes) -> float:
    """One device's KV cache: batch/dp sequences at its KV heads, on one stage's ⌈L/pp⌉ of L layers."""
    kv = shard(cfg, split).kv_cache_bytes(batch // split.dp, context, dtypes.kv_cache.bytes_per_element)
    return float(kv) * stage_share(cfg, split)


def candidate_splits(cfg: ModelConfig, devices_per_node: int, max_devices: int) -> list[Split]:
    """Valid splits in the order engines deploy them (from roofline.models.split.valid_splits): tensor
    parallel within a node first (every tp that divides the node, smallest first), then the largest
    valid tp of a node × 2, 3, ... pipeline stages across nodes (uneven stages allowed)."""
    within = [s for s in valid_splits(cfg, min(devices_per_node, max_devices), devices_per_node, experts=False)
              if s.pp == 1 and devices_per_node % s.tp == 0]
    if not within:
        return []
    tp = within[-1].tp
    across = [s for s in valid_splits(cfg, max_devices, tp, even_stages=False, experts=False, tp=tp) if s.pp > 1]
    return within + across


def workspace_bytes(kernels: Iterable[Kernel]) -> float:
    """The activation workspace: the largest set of activations one kernel reads and writes at once
    (what must be live together), over the kernels of a step (per device)."""
    return max((sum(t.bytes for t in (*k.reads, *k.writes) if t.role is Role.ACTIVATION) for k in kernels),
               default=0.0)


def sequences_that_fit(weights_bytes: float, workspace: float, kv_bytes_per_sequence: float, usable_bytes: float,
                       dp: int, unit: int) -> int:
    """The most sequences a split holds when each adds its whole KV cache and the weights and one
    workspace stay: ⌊(usable − weights − workspace) / KV per sequence⌋ per replica, rounded down to the
    batch unit's share of a replica (unit / dp), × dp; 0 when not one fits."""
    room = usable_bytes - weights_bytes - workspace
    per_replica = int(room // kv_bytes_per_sequence) if room > 0 else 0
    return per_replica // (unit // dp) * unit


def memory_fit(cfg: ModelConfig, batch: int, context: int, dtypes: ModelDtypes, capacity_bytes: float | None,
               machine: str, split: Split | None = None, workspace: Callable[[Split], float] = lambda s: 0.0,
               utilization: float = DEFAULT_UTILIZATION, devices_per_node: int = NODE_DEVICES,
               max_devices: int = MOST_DEVICES) -> MemoryFit:
    """The fit of `split` (default: one device) and the smallest valid split that fits."""
    if not 0 < utilization <= 1:
        raise RooflineError(f"{T.utilization} must be in (0, 1], got {utilization}")
    sp = split or Split()

    def per_device(s: Split) -> tuple[float, float, float]:
        return device_weights_bytes(cfg, s, dtypes), device_kv_bytes(cfg, s, batch, context, dtypes), workspace(s)

    w, kv, ws = per_device(sp)
    best, layout = None, ""
    if capacity_bytes is not None:
        same = layout_splits(cfg, sp, batch, devices_per_node, max_devices)
        for candidates, named in ((same, _layout(sp) if same else ""),
                                  (candidate_splits(cfg, devices_per_node, max_devices), "")):
            best = next((s for s in candidates if sum(per_device(s)) <= capacity_bytes * utilization), None)
            if best is not None:
                layout = named
                break
    return MemoryFit(w, kv, ws, capacity_bytes, utilization, machine, sp, best, max_devices, batch, layout)


def _layout(sp: Split) -> str:
    parts = [p for p, on in (("EP", sp.ep > 1), ("DP", sp.dp > 1)) if on]
    return " × ".join(parts) + f", TP {sp.tp}" + (f", PP {sp.pp}" if sp.pp > 1 else "")


def layout_splits(cfg: ModelConfig, split: Split, batch: int, devices_per_node: int, max_devices: int) -> list[Split]:
    """For a split with expert or data parallelism: the valid splits of the same layout (its tp and pp,
    expert parallel if it has it, data parallel if it has it) with more devices, fewest first, so that
    the suggestion scales the deployment the user chose (DeepSeek's EP × DP) instead of leaving it for
    tensor and pipeline parallelism; [] for a tp/pp split (candidate_splits answers for those)."""
    if split.ep == 1 and split.dp == 1:
        return []
    return [s for s in valid_splits(cfg, max_devices, devices_per_node, batch=batch, tp=split.tp,
                                    experts=cfg.is_moe)
            if s.devices > split.devices and s.pp == split.pp and (s.ep > 1) == (split.ep > 1)
            and (s.dp > 1) == (split.dp > 1)]


__all__ = ["DEFAULT_UTILIZATION", "DeviceMemory", "MemoryFit", "candidate_splits", "device_kv_bytes",
           "device_weights_bytes",
           "layout_splits", "memory_fit", "sequences_that_fit", "workspace_bytes"]
