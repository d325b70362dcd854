"""The model FLOPs a training token costs: the one convention MFU is quoted in.

PaLM (Chowdhery et al. 2022, arXiv 2204.02311, Appendix B): a token of a training step costs

    6·N + 12·L·H·Q·T        FLOPs (forward and backward, no recompute)

N the parameters a token multiplies, without the input embedding (a gathered table, not a matmul; the
LM head counts, tied or not: ModelConfig.matmul_params, active parameters for a mixture of experts);
L the layers, H·Q the heads × head dimension, T the sequence length. 6 = 2 (a multiply and an add)
× 3 (the forward, and the backward's two matmuls per forward matmul). The attention term is PaLM's
non-causal count: 4·H·Q·T a token and layer forward (scores and values), × 3.

For other attention shapes the term is, per softmax-attention layer, 3 · 2·H·(d_qk + d_v) · T_attended
(= 12·H·Q·T when d_qk = d_v = Q), with T_attended = T on a global layer and min(T, W) on a windowed
one (ModelConfig.decode_read_tokens sums it over the layers); MLA counts its decompressed heads
(d_qk = nope + rope). Linear-attention and Mamba2 layers add their projections to N and nothing
here (their state updates are left out of the convention, as PaLM has none).

Hardware FLOPs (HFU) are what the step's kernels do: the recomputed forward included, attention's
causal half counted as it runs. Megatron-LM (Narayanan et al. 2021) quotes 96·B·s·l·h²·(1 + s/6h + V/16lh)
per iteration for GPT with full recompute: 4/3 of its 72·B·s·l·h²(...) model FLOPs.
"""

from __future__ import annotations

from roofline.models.transformer import ModelConfig


def attention_model_flop_per_token(cfg: ModelConfig, seq: int) -> float:
    """3 · Σ_layers 2·H·(d_qk + d_v)·T_attended: 12·L·H·Q·T for Llama (module docstring)."""
    if cfg.is_mla:  # trained decompressed: per-head K and V, 2·H·(192 + 128) a pair for DeepSeek-V3
        return 3.0 * 2.0 * cfg.num_heads * (cfg.qk_head_dim + cfg.v_dim) * float(cfg.decode_read_tokens(seq))
    return 3.0 * float(cfg.attention_flop_read(seq))  # each layer kind at its own shape


def model_flop_per_token(cfg: ModelConfig, seq: int) -> float:
    """6·N + the attention term: PaLM's model FLOPs per training token."""
    return 6.0 * cfg.matmul_params + attention_model_flop_per_token(cfg, seq)


__all__ = ["attention_model_flop_per_token", "model_flop_per_token"]
