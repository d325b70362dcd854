"""A model step's dtypes: what each tensor role is stored in, and whose peak the matmuls run at."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace

from roofline.dtypes import DTYPES, DType, get_dtype, require_storable
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.hardware import Machine

_BF16 = DTYPES["bf16"]  # what checkpoints keep their unquantized modules in (torch_dtype bfloat16)


@frozen
class ModelDtypes:
    """Storage dtype per tensor role, and the compute dtype whose peak the matmuls run at
    (None: chosen by the analysis, the activation dtype where the machine has a peak for it)."""

    weights: DType
    activations: DType
    kv_cache: DType
    compute: DType | None = None
    # False: no weights dtype was asked for and bf16 stands in; a checkpoint that states its own
    # (ModelConfig.weights_dtype, from config.json's quantization_config) replaces it: `for_checkpoint`
    weights_given: bool = field(default=True, compare=False)
    # per parameter part, the fraction stored in BF16 beside `weights` (a quantized checkpoint's
    # tables, norms, biases and excluded modules: ModelConfig.unquantized); empty: every weight in `weights`
    unquantized: tuple[tuple[str, float], ...] = ()
    # per parameter part, fractions stored in yet another dtype (a ModelOpt MIXED_PRECISION checkpoint's
    # per-module quant_algo: ModelConfig.mixed_weights); the rest of the part is in `weights`
    mixed: tuple[tuple[str, DType, float], ...] = ()

    def part_fraction(self, part: str) -> float:
        """The fraction of parameter part `part` kept in BF16 (0: all of it in `weights`)."""
        return next((f for p, f in self.unquantized if p == part), 0.0)

    def weight_dtype(self, part: str) -> DType:
        """What the graph stores part `part`'s weight tensors in: BF16 where the checkpoint keeps the
        whole part unquantized, the other dtype that holds the whole part of a mixed checkpoint, else
        `weights` (a part kept in part, a few layers of it, is counted exactly in memory by
        `weights_bytes` and read as `weights` in the step: see the load warning)."""
        whole = next((d for p, d, f in self.mixed if p == part and f >= 1.0), None)
        return _BF16 if self.part_fraction(part) >= 1.0 else whole or self.weights

    def weights_bytes(self, parts: Mapping[str, float]) -> float:
        """Bytes of parameters by part: each part's BF16 fraction at 2 bytes, its fractions in other
        dtypes (`mixed`) at theirs, the rest at `weights`."""
        w = self.weights.bytes_per_element
        total = 0.0
        for p, n in parts.items():
            other = [(d.bytes_per_element, f) for q, d, f in self.mixed if q == p]
            rest = 1.0 - self.part_fraction(p) - sum(f for _, f in other)
            total += n * (rest * w + self.part_fraction(p) * _BF16.bytes_per_element + sum(b * f for b, f in other))
        return total

    def to_dict(self) -> dict[str, str | None]:
        return {"weights": self.weights.name, "activations": self.activations.name,
                "kv_cache": self.kv_cache.name, "compute": self.compute.name if self.compute else None}


def model_dtypes(weights: str | DType | None = None, activations: str | DType = "bf16",
                 kv_cache: str | DType | None = None, compute: str | DType | None = None) -> ModelDtypes:
    """Dtypes by role; the KV cache defaults to the activation dtype. Block-scaled formats (mxfp4,
    nvfp4, ...) are accepted for any role: their scale bytes are counted. Weights None: what the
    checkpoint stores (its quantization_config, see `for_checkpoint`), else bf16."""
    act = require_storable(activations)
    return ModelDtypes(require_storable(weights or "bf16"), act, require_storable(kv_cache) if kv_cache else act,
                       get_dtype(compute) if compute else None, weights_given=weights is not None)


def for_checkpoint(dtypes: ModelDtypes, checkpoint: DType | None,
                   unquantized: tuple[tuple[str, float], ...] = (),
                   mixed: tuple[tuple[str, DType, float], ...] = ()) -> ModelDtypes:
    """`dtypes` with the checkpoint's weights dtype (ModelConfig.weights_dtype: DeepSeek-V3's FP8 with
    128x128 block scales), the parts it keeps in BF16 (ModelConfig.unquantized) and those a mixed
    checkpoint stores in other dtypes (ModelConfig.mixed_weights) where no weights dtype was asked for;
    otherwise `dtypes` unchanged (a dtype asked for applies to every weight)."""
    if dtypes.weights_given or checkpoint is None:
        return dtypes
    return replace(dtypes, weights=checkpoint, weights_given=True, unquantized=unquantized, mixed=mixed)


def compute_dtype(dtypes: ModelDtypes, machine: Machine) -> DType:
    """The dtype whose matrix peak the step runs at: the one asked for, else the activation dtype
    where the machine has a peak for it, else the machine's default (bf16 on GPUs)."""
    if dtypes.compute is not None:
        if not machine.has_peak(dtypes.compute):
            raise RooflineError(f"{machine.id} lists no matrix peak for {dtypes.compute.peak_key}; "
                                f"it has: {', '.join(machine.dtypes())}")
        return dtypes.compute
    if machine.has_peak(dtypes.activations):
        return dtypes.activations
    return get_dtype(machine.default_dtype())


def weight_part(weight: str) -> str:
    """The parameter part (ModelConfig.param_counts) a weight tensor of the step graph belongs to, by its name."""
    for key, part in (("index_q.", "index_query"), ("compressor.", "compressor"), ("mhc.", "mhc"),  # DeepSeek-V4
                      ("latent_proj.", "latent_proj"), ("linear_attn.", "linear_attention"), ("mamba.", "mamba"),
                      ("indexer.", "indexer"), ("attn_res.", "attn_res"),
                      ("embed_tokens", "embedding"), ("position_embeddings", "position_embedding"),
                      ("lm_head", "lm_head"), ("router.", "router"), ("shared.", "shared_experts"),
                      ("experts.", "experts"), ("gate_up_proj", "mlp"), ("up_proj", "mlp"), ("down_proj", "mlp")):
        if key in weight:
            return part
    return "attention"


__all__ = ["ModelDtypes", "compute_dtype", "for_checkpoint", "model_dtypes", "weight_part"]
