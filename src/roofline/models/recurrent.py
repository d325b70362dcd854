"""The recurrent token mixers' shapes: Gated DeltaNet's and Mamba2's, each with its weights, its state per
sequence and its decode FLOPs per token (the layer kinds that keep a fixed state instead of a KV cache;
their step graphs are roofline.models.deltanet and roofline.models.mamba)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinearAttention:
    """Gated DeltaNet (Yang, Kautz, Hatamizadeh, arXiv 2412.06464; transformers models/qwen3_next,
    Qwen3_5GatedDeltaNet): `key_heads` query/key heads of `key_dim`, `value_heads` value heads of
    `value_dim` (each key head serves value_heads/key_heads of them), a depthwise causal conv1d of
    `conv_kernel` taps over the q, k and v channels, and one recurrent state of key_dim × value_dim
    per value head, kept in `state_bytes` bytes a value (mamba_ssm_dtype; float32 in the reference)."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_kernel: int
    state_bytes: int = 4
    chunk: int = 64  # the chunked prefill's block (fla chunk_gated_delta_rule, transformers' chunk_size 64)

    @property
    def conv_channels(self) -> int:
        """Channels the conv runs over: q and k (key_heads·key_dim each) and v (value_heads·value_dim)."""
        return 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim

    @property
    def in_width(self) -> int:
        """in_proj outputs: q, k, v, the output gate z (value_heads·value_dim), and β and the decay a
        (one each per value head)."""
        return self.conv_channels + self.value_heads * self.value_dim + 2 * self.value_heads

    def layer_params(self, hidden: int) -> int:
        """in_proj h·in_width + conv1d channels·taps (no bias) + dt_bias and A_log (one per value head)
        + the gated norm's gain (value_dim) + out_proj value_heads·value_dim·h."""
        v = self.value_heads * self.value_dim
        return hidden * self.in_width + self.conv_channels * self.conv_kernel + 2 * self.value_heads \
            + self.value_dim + v * hidden

    @property
    def decode_flop_per_token(self) -> int:
        """One layer's recurrent update for one token: per value head decay dk·dv, Sᵀk 2·dk·dv, the rank-1
        update 2·dk·dv and the readout Sᵀq 2·dk·dv = 7·dk·dv (roofline.models.deltanet)."""
        return 7 * self.key_dim * self.value_dim * self.value_heads

    def state_bytes_per_sequence(self, activation_bytes: float) -> float:
        """One layer's state for one sequence: the recurrent value_heads·key_dim·value_dim at
        state_bytes, and the conv's last conv_kernel − 1 inputs per channel in the activation dtype."""
        return (self.value_heads * self.key_dim * self.value_dim * self.state_bytes
                + self.conv_channels * (self.conv_kernel - 1) * activation_bytes)


@dataclass(frozen=True)
class Mamba2:
    """Mamba2's selective state space mixer (Dao & Gu, arXiv 2405.21060; Nemotron-H's
    NemotronHMamba2Mixer in transformers, vLLM and mlx-lm): `heads` heads of `head_dim` (the inner
    width heads·head_dim), B and C shared by `groups` groups of heads, each of `state_dim` (d_state),
    a depthwise causal conv1d of `conv_kernel` taps (with a bias when `conv_bias`) over x, B and C,
    and one state of head_dim × state_dim per head, kept in `state_bytes` bytes a value
    (mamba_ssm_cache_dtype; float32 in the reference). `chunk`: the chunked SSD prefill's block
    (config chunk_size)."""

    heads: int
    head_dim: int
    groups: int
    state_dim: int
    conv_kernel: int
    chunk: int
    conv_bias: bool = True
    proj_bias: bool = False
    state_bytes: int = 4

    @property
    def inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        """x (heads·head_dim), B and C (groups·state_dim each): the channels the conv runs over."""
        return self.inner + 2 * self.groups * self.state_dim

    @property
    def in_width(self) -> int:
        """in_proj outputs: the gate z (inner), x, B, C (conv_channels) and dt (one per head)."""
        return self.inner + self.conv_channels + self.heads

    def linear_params(self, hidden: int) -> int:
        """in_proj h·in_width and out_proj inner·h, with their biases when mamba_proj_bias."""
        bias = (self.in_width + hidden) if self.proj_bias else 0
        return hidden * self.in_width + self.inner * hidden + bias

    @property
    def other_params(self) -> int:
        """What no quantizer replaces: the conv taps (and bias), dt_bias, A_log and D (one each per
        head) and the gated RMSNorm's gain over the inner width."""
        return self.conv_channels * (self.conv_kernel + (1 if self.conv_bias else 0)) + 3 * self.heads + self.inner

    @property
    def decode_flop_per_token(self) -> int:
        """One layer's recurrent update for one token: 5·P·N_s per head (decay P·N_s, outer product P·N_s, add
        P·N_s, readout 2·P·N_s; roofline.models.mamba)."""
        return 5 * self.head_dim * self.state_dim * self.heads

    def state_bytes_per_sequence(self, activation_bytes: float) -> float:
        """One layer's state for one sequence: the SSM state heads·head_dim·state_dim at state_bytes,
        and the conv's last conv_kernel − 1 inputs per channel in the activation dtype."""
        return (self.heads * self.head_dim * self.state_dim * self.state_bytes
                + self.conv_channels * (self.conv_kernel - 1) * activation_bytes)


__all__ = ["LinearAttention", "Mamba2"]
