"""A split of one step over devices, and where its groups sit.

    tp   tensor parallel: attention heads and MLP columns/rows over tp devices (Megatron-style: an
         all-reduce after attention's output projection and after the MLP's down projection)
    pp   pipeline parallel: the layers in pp stages, activations sent from stage to stage
    ep   expert parallel: an MoE layer's experts over ep devices, tokens dispatched and combined
         with all-to-all
    dp   data parallel: dp replicas, each with batch / dp sequences (throughput only)

Devices are laid out tensor-parallel innermost, then pipeline stages, then replicas, as engines place
them: a tp group fills consecutive devices of a node, so it stays on the node's link when tp is at
most the devices per node.
"""

from __future__ import annotations

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.units import require_positive_int
from roofline.vocab import Level


@frozen
class Split:
    """One step split over tp × pp × dp devices, its experts over ep of each stage's tp × dp (the module docstring)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1

    def __post_init__(self) -> None:
        for label in ("tp", "pp", "ep", "dp"):
            require_positive_int(getattr(self, label), f"--{label}")
        if (self.tp * self.dp) % self.ep:
            raise RooflineError(f"--ep {self.ep} must divide the devices of a pipeline stage, tp × dp = "
                                f"{self.tp} × {self.dp} = {self.tp * self.dp} (the experts are spread over them)")

    @property
    def devices(self) -> int:
        """tp × pp × dp: expert parallelism reuses the devices of a stage."""
        return self.tp * self.pp * self.dp

    @property
    def trivial(self) -> bool:
        return self.devices == 1

    def to_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "ep": self.ep, "dp": self.dp, "devices": self.devices}

    def __str__(self) -> str:
        parts = [f"{k.upper()} {v}" for k, v in self.to_dict().items() if k != "devices" and v > 1]
        return " × ".join(parts) or "one device"


def divisors(n: int, most: int | None = None) -> list[int]:
    """The divisors of `n`, smallest first, at most `most` (the degrees a split may take along an axis)."""
    top = n if most is None else min(n, most)
    return [d for d in range(1, top + 1) if n % d == 0]


def group_level(group: int, devices_per_node: int, devices: int | None = None) -> Level:
    """The roof of a group of `group` consecutive devices that starts at a multiple of its size (a tp
    group) among `devices` in all: the node's link if every such group fits in one node (all the
    devices do, or the node holds a whole number of groups), else the network (a group that straddles
    two nodes is as slow as its slowest hop)."""
    if devices is not None and devices <= devices_per_node:
        return Level.LINK
    return Level.LINK if group <= devices_per_node and devices_per_node % group == 0 else Level.NETWORK


def stage_boundaries_across_nodes(split: Split, devices_per_node: int) -> int:
    """How many of the pp − 1 stage boundaries cross from one node to the next: the boundary after
    stage b sits between devices b·tp − 1 and b·tp, in different nodes when b·tp is a multiple of the
    devices per node (tp-major layout)."""
    return sum(1 for b in range(1, split.pp) if (b * split.tp) % devices_per_node == 0)
