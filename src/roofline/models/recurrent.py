"""The recurrent token mixers' shapes: Gated DeltaNet's, KDA's and Mamba2's, each with its weights, its state
per sequence and its decode FLOPs per token (the layer kinds that keep a fixed state instead of a KV cache;
their step graphs are roofline.models.deltanet, roofline.models.kda and roofline.models.mamba)."""

from __future__ import annotations

from roofline.frozen import frozen


@frozen
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

    name = "Gated DeltaNet"  # the layer kind, as `roofline models` and --explain name it (not a field)

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
    def vector_params(self) -> int:
        """What a token does not multiply in a matmul: the conv taps, dt_bias and A_log (one each per value
        head) and the gated norm's gain."""
        return self.conv_channels * self.conv_kernel + 2 * self.value_heads + self.value_dim

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


# FLOPs per channel of KDA's forget gate: the bias add, softplus (exp, add, log), the multiply by −exp(A_log) and
# the exp that turns the log-decay into the decay (transformers KimiLinearForgetGate, fla's kda gate)
KDA_GATE_FLOP = 6
# Under gate_lower_bound (fla's safe gate, lower_bound·sigmoid(exp(A_log)·(f + dt_bias)); transformers 5.24's
# Glm5NextTextForgetGate alike): the bias add, the multiply by exp(A_log), the sigmoid (4), the multiply by the
# bound and the exp of the log-decay
SAFE_GATE_FLOP = 8
# FLOPs per channel the chunked prefill spends on the channel-wise decay: its cumulative sum in the chunk (1),
# the decay folded into q, k and the state update's k (exp(g)·q, exp(−g)·k, exp(g_C − g)·k: 3 exps, 3
# multiplies, 1 subtract) = 8
KDA_CHUNK_DECAY_FLOP = 8


@frozen
class KimiDelta(LinearAttention):
    """Kimi Delta Attention (Kimi Linear, arXiv 2510.26692; transformers models/kimi_linear
    KimiLinearDeltaAttention, fla ops/kda): Gated DeltaNet's delta rule with a decay per channel instead of
    one per head. `key_heads` = `value_heads` = H heads of `key_dim` = `value_dim` = d
    (linear_attn_config num_heads, head_dim). Per layer:

        q_proj, k_proj, v_proj   h -> H·d each; a depthwise causal conv of K taps (no bias) + SiLU over the
                                 3·H·d channels
        forget gate              f_a_proj h -> d, f_b_proj d -> H·d (low rank), dt_bias H·d, A_log H: the
                                 log-decay g = −exp(A_log)·softplus(f + dt_bias), one per channel
        beta                     b_proj h -> H, sigmoid
        output gate              g_a_proj h -> d, g_b_proj d -> H·d (low rank); o_norm: RMSNorm over d times
                                 sigmoid(gate), one gain of d
        o_proj                   H·d -> h

    The state is Gated DeltaNet's (H·d·d values per sequence, float32 in transformers and vLLM) and the conv
    state the last K − 1 inputs of the 3·H·d channels.

    Kimi K3 (TensorRT-LLM@000a860 modeling_kimi_linear.py KimiKDARuntime, fla's kda gate kernels):
    `full_rank_gate` (linear_attn_config use_full_rank_gate): the output gate is one g_proj h -> H·d, not g_a and
    g_b; `safe_gate` (gate_lower_bound given): the log-decay is lower_bound·sigmoid(exp(A_log)·(f + dt_bias)),
    SAFE_GATE_FLOP a channel instead of KDA_GATE_FLOP (the same weights)."""

    full_rank_gate: bool = False
    safe_gate: bool = False
    name = "KDA"

    @property
    def gate_flop(self) -> int:
        """FLOPs of the forget gate a channel: KDA_GATE_FLOP, or SAFE_GATE_FLOP under a lower bound."""
        return SAFE_GATE_FLOP if self.safe_gate else KDA_GATE_FLOP

    def gate_params(self, hidden: int) -> int:
        """The output gate's weights: g_a h·d + g_b d·H·d, or the full-rank g_proj h·H·d."""
        hd, d = self.value_heads * self.value_dim, self.value_dim
        return hidden * hd if self.full_rank_gate else hidden * d + d * hd

    def layer_params(self, hidden: int) -> int:
        """q, k, v 3·h·H·d; conv 3·H·d·K; f_a h·d; f_b d·H·d; the output gate (gate_params); dt_bias H·d; A_log H;
        b_proj h·H; o_norm d; o_proj H·d·h."""
        hd, d, heads = self.value_heads * self.value_dim, self.value_dim, self.value_heads
        return (3 * hidden * hd + 3 * hd * self.conv_kernel + hidden * d + d * hd + self.gate_params(hidden) + hd
                + heads + hidden * heads + d + hd * hidden)

    @property
    def vector_params(self) -> int:
        """The conv taps 3·H·d·K, dt_bias H·d, A_log H and o_norm's gain d."""
        hd = self.value_heads * self.value_dim
        return 3 * hd * self.conv_kernel + hd + self.value_heads + self.value_dim

    @property
    def decode_flop_per_token(self) -> int:
        """One layer's recurrent update for one token: per head Gated DeltaNet's 7·dk·dv (the decay now a
        multiply per channel row of S, the same dk·dv) and the gate KDA_GATE_FLOP·dk."""
        return (7 * self.key_dim * self.value_dim + self.gate_flop * self.key_dim) * self.value_heads


@frozen
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


__all__ = ["KDA_CHUNK_DECAY_FLOP", "KDA_GATE_FLOP", "SAFE_GATE_FLOP", "KimiDelta", "LinearAttention", "Mamba2"]
