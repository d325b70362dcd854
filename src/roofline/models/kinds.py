"""The closed sets a model's layers are made of (AttentionKind, MlpKind) and its parameter counts by part
(ParamCounts): the vocabulary ModelConfig and the layer modules share, kept apart so that neither imports
the other for it. roofline.models.transformer re-exports every name."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from roofline.frozen import frozen


class AttentionKind(StrEnum):
    """Which token mixer a layer runs: full causal attention (GLOBAL), attention over a sliding window
    (LOCAL), attention over the key blocks an indexer picks (SPARSE: MiniMax-M3's block-sparse attention,
    roofline.models.block_sparse), linear attention with a fixed state per sequence (LINEAR: Gated DeltaNet), a Mamba2
    selective state space (MAMBA), or none (NONE: Nemotron-H's blocks that hold only an MLP)."""

    GLOBAL = "global"
    LOCAL = "local"
    SPARSE = "sparse"
    LINEAR = "linear"
    MAMBA = "mamba"
    NONE = "none"


SOFTMAX_KINDS = (AttentionKind.GLOBAL, AttentionKind.LOCAL, AttentionKind.SPARSE)  # the kinds that keep a KV cache


class MlpKind(StrEnum):
    """Which MLP a layer runs: one dense MLP, a mixture of experts, or none (a Nemotron-H mixer block)."""

    DENSE = "dense"
    MOE = "moe"
    NONE = "none"


@frozen
class ParamCounts:
    """Parameters by part. `parts` counts every routed expert ("experts"); `active_parts` counts
    what one token uses, the routed experts at experts_per_token of num_experts. Both have the same
    keys, in the same order."""

    parts: Mapping[str, int]
    active_parts: Mapping[str, int]
    matmul: int  # active parameters a token multiplies (see ModelConfig.matmul_params)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    @property
    def active(self) -> int:
        return sum(self.active_parts.values())


__all__ = ["SOFTMAX_KINDS", "AttentionKind", "MlpKind", "ParamCounts"]
