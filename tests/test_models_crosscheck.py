"""Independent cross-checks of the transformer models: FLOPs and bytes derived by hand, not by the builder.

Each expected value is written from the model's published config (the preset JSON, which is the model's
own config.json) with the derivation in a comment. The parameter arithmetic here is written out again on
purpose rather than taken from ModelConfig.matmul_params, so that a slip in either shows up.
"""

from __future__ import annotations

import json
import re

import pytest

from roofline.cli import main
from roofline.graph import Kernel
from roofline.models import (
    AttentionKind,
    ModelConfig,
    ModelGraph,
    analyze_model,
    build_graph,
    config_from_dict,
    load_config,
    preset_names,
)
from roofline.models.transformer import SOFTMAX_KINDS
from roofline.vocab import Unit

PROMPT = 2048  # the prefill check: batch 1, prompt 2048
DECODE_BATCH, DECODE_CONTEXT = 4, 4096


# --- helpers: the nanoGPT-style count, written out from the config fields ------------------------------

def linear_params_per_token(c: ModelConfig) -> tuple[int, int]:
    """(body, head): the weights of every linear layer one token multiplies, as nanoGPT's estimate
    counts them, split into the layers' share and the LM head (V·h, tied or not). Embedding tables are
    gathered, norms and biases are not matmuls; a MoE token multiplies the router, k routed experts
    and the shared ones."""
    h = c.hidden_size
    if c.is_mla:
        H, dn, dr, dv, r, qr = (c.num_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim,
                                c.kv_lora_rank, c.q_lora_rank)
        # q_a (h·q_lora) + q_b (q_lora·H·(nope+rope)) + kv_a (h·(kv_lora+rope)) + kv_b (kv_lora·H·(nope+v)) + o
        attn = h * qr + qr * H * (dn + dr) + h * (r + dr) + r * H * (dn + dv) + H * dv * h
    mats = 3 if c.gated else 2  # gate, up, down (GPT-2: up, down)
    dense = mats * h * c.intermediate_size
    body = c.num_layers * attn if c.is_mla else 0
    cp = c.compressed  # DeepSeek-V4 runs its own attention (below), not q, k, v, o
    if not c.is_mla and cp is None:  # each softmax layer kind at its own shape (Gemma 4's full layers: 512 wide, K=V)
        for kind in SOFTMAX_KINDS:
            s = c.attention_shape(kind)
            q = 2 * s.heads if c.attn_output_gate else s.heads  # Qwen3-Next/3.5: q_proj gives query and gate
            v = 0 if s.k_eq_v else h * s.kv_heads * s.v_head_dim  # K=V: no v_proj
            body += c.attention_layers(kind) * (h * q * s.head_dim + h * s.kv_heads * s.head_dim + v
                                                + s.heads * s.v_head_dim * h)  # q, k, v, o
    body += c.dense_layers * dense
    la = c.linear_attention
    if la is not None:  # Gated DeltaNet: in_proj to q, k, v, z, β, a and out_proj (its conv is not a matmul)
        v = la.value_heads * la.value_dim
        inp = 2 * la.key_heads * la.key_dim + 2 * v + 2 * la.value_heads
        body += c.attention_layers(AttentionKind.LINEAR) * (h * inp + v * h)
    mb = c.mamba
    if mb is not None:  # Mamba2: in_proj to z, x, B, C, dt and out_proj (its conv is not a matmul)
        inner = mb.heads * mb.head_dim
        body += c.attention_layers(AttentionKind.MAMBA) * (h * (2 * inner + 2 * mb.groups * mb.state_dim + mb.heads)
                                                           + inner * h)
    if c.is_moe:
        gate = 1 if c.shared_expert_gate else 0  # the shared expert's sigmoid gate, h -> 1
        lat = c.moe_latent_size  # LatentMoE (Nemotron 3 Super): routed experts in ℓ, two projections h <-> ℓ
        moe = h * (c.num_experts + gate) \
            + (c.experts_per_token * (lat or h) + c.num_shared_experts * h) * mats * c.moe_intermediate_size \
            + (2 * h * lat if lat else 0)
        body += c.moe_layers * moe
    ix = c.indexer
    if ix is not None:  # DSA's lightning indexer where a layer runs one: wq_b, wk, weights_proj
        body += c.indexer_layers * (c.q_lora_rank * ix.heads * ix.head_dim + h * ix.head_dim + h * ix.heads)
    bs = c.block_sparse
    if bs is not None:  # MiniMax-M3's indexer on its sparse layers: q_proj h -> H_I·d_I and k_proj h -> d_I
        body += c.attention_layers(AttentionKind.SPARSE) * (h * bs.index_heads * bs.index_dim + h * bs.index_dim)
    if cp is not None:  # DeepSeek-V4 (transformers DeepseekV4Attention): its own attention, not q, k, v, o
        H, d, ql, g, ol, n = c.num_heads, cp.head_dim, cp.q_lora, cp.o_groups, cp.o_lora, cp.hc_mult
        csa, hca = cp.layers(cp.csa), cp.layers(cp.hca)
        body += c.num_layers * (h * ql + ql * H * d + h * d + H * d * ol + g * ol * h)  # q_a, q_b, kv, o_a, o_b
        body += csa * (2 * h * 2 * d + 2 * h * 2 * cp.index_dim + h * cp.index_heads  # compressor, indexer
                       + ql * cp.index_heads * cp.index_dim) + hca * 2 * h * d
        body += 2 * c.num_layers * (2 + n) * n * n * h  # mHC's fn, two a layer
        return body, c.vocab_size * h + n * n * h  # hc_head runs on the rows the head projects
    return body, c.vocab_size * h


def indexer_matrix_flop(c: ModelConfig, pairs: int) -> float:
    """DSA: 2·H_I·d_I per scored (query, key) pair on each indexer layer (roofline.models.dsa); MiniMax-M3's
    alike on each sparse layer (q_h·k per index head, transformers MiniMaxM3VLIndexer)."""
    ix, bs = c.indexer, c.block_sparse
    if bs is not None:
        return c.attention_layers(AttentionKind.SPARSE) * 2.0 * bs.index_heads * bs.index_dim * pairs
    return 0.0 if ix is None else c.indexer_layers * 2.0 * ix.heads * ix.head_dim * pairs


def block_keys(c: ModelConfig, i: int) -> int:
    """MiniMax-M3: keys a query at position i attends on a sparse layer, every key while its block ⌈i/b⌉ is
    among the first k, else its own partial block and k − 1 whole ones (transformers MiniMaxM3VLIndexer)."""
    bs = c.block_sparse
    assert bs is not None
    return i if -(-i // bs.block) <= bs.topk else (bs.topk - 1) * bs.block + (i - 1) % bs.block + 1


def compressed_matrix_flop(c: ModelConfig, phase: str, b: int, n: int) -> float:
    """DeepSeek-V4: each CSA/HCA layer's queries also attend its compressed entries (2·H·2d a pair, one K = V
    head), and CSA's indexer scores the ⌊i/4⌋ index keys (2·H_I·d_I a pair). Prefill, query i (1-based) sees
    ⌊i/m⌋ entries, CSA at most top-k; decode, one query sees ⌊L/m⌋ (CSA: min(⌊L/4⌋, k))."""
    cp = c.compressed
    if cp is None:
        return 0.0
    out = 0.0
    for m, k in ((cp.csa, cp.topk), (cp.hca, None)):
        seen = [i // m for i in range(1, n + 1)] if phase == "prefill" else [n // m]
        attended = sum(min(s, k) if k else s for s in seen)
        out += cp.layers(m) * b * c.num_heads * 4 * cp.head_dim * attended
        if m == cp.csa:
            out += cp.layers(m) * b * 2 * cp.index_heads * cp.index_dim * sum(seen)
    return out


def deltanet_matrix_flop_per_token(c: ModelConfig) -> float:
    """The chunked Gated DeltaNet's matrix FLOPs per prompt token over its layers (Yang et al., arXiv
    2406.06484, the WY form over chunks of C = 64): per value head 2·C·(3·dk + 2·dv) + 6·dk·dv."""
    la = c.linear_attention
    if la is None:
        return 0.0
    per_head = 2 * 64 * (3 * la.key_dim + 2 * la.value_dim) + 6 * la.key_dim * la.value_dim
    return c.attention_layers(AttentionKind.LINEAR) * la.value_heads * per_head


def mamba_matrix_flop_per_token(c: ModelConfig) -> float:
    """Mamba2's chunked SSD matrix FLOPs per prompt token over its layers (Dao & Gu, arXiv 2405.21060
    §6, chunks of Q = chunk_size): C·Bᵀ 2·Q·N per group; (L∘CBᵀ)·X 2·Q·P, the chunk states Bᵀ·X and
    their output C·S 2·P·N each, per head."""
    mb = c.mamba
    if mb is None:
        return 0.0
    q, p, n = mb.chunk, mb.head_dim, mb.state_dim
    per_token = 2 * q * n * mb.groups + mb.heads * (2 * q * p + 2 * p * n + 2 * p * n)
    return c.attention_layers(AttentionKind.MAMBA) * per_token


def causal_pairs(n: int, window: int | None) -> int:
    """Σ_{i=1..n} min(i, W): query i sees keys 1..i (the last W of them under a window)."""
    return sum(min(i, window) if window else i for i in range(1, n + 1))


def attention_matrix_flop_per_pair(c: ModelConfig, phase: str, kind: AttentionKind = AttentionKind.GLOBAL) -> int:
    """2·d_qk + 2·d_v per head per (query, key) pair: the seed's 4·d when d_qk = d_v = d.
    MLA: prefill decompresses K (nope + rope = 192) and V (128); decode runs the absorbed form over the
    latent, q·c over kv_lora + rope = 512 + 64 dims and p·c over kv_lora = 512 (DeepSeek-V2 paper §2.1.3,
    FlashMLA's decode kernel)."""
    if c.is_mla:
        if phase == "prefill":
            return c.num_heads * (2 * (c.qk_nope_head_dim + c.qk_rope_head_dim) + 2 * c.v_head_dim)
        return c.num_heads * (2 * (c.kv_lora_rank + c.qk_rope_head_dim) + 2 * c.kv_lora_rank)
    s = c.attention_shape(kind)  # the layer kind's own heads and widths
    return s.heads * 2 * (s.head_dim + s.v_head_dim)


def matrix_flop(mg: ModelGraph) -> float:
    return sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in mg.graph.ops)


def by_role(mg: ModelGraph, plan: str = "flash") -> dict[str, float]:
    out = {"weight": 0.0, "kv_cache": 0.0, "activation": 0.0}
    for k in mg.graph.kernels(mg.plan(plan)):
        for role, b in k.bytes_by_role().items():
            out[role] += b * k.count
    return out


def kernel(mg: ModelGraph, name: str, plan: str = "flash") -> Kernel:
    for k in mg.graph.kernels(mg.plan(plan)):
        if k.name == name:
            return k
    raise AssertionError(f"no kernel {name}")


def weight_bytes(k: Kernel) -> float:
    return sum(t.bytes for t in k.reads if t.role == "weight")


# --- 1. nanoGPT: 2 × params × tokens + attention --------------------------------------------------

@pytest.mark.parametrize("name", preset_names())
def test_prefill_matrix_flops_are_2_params_tokens_plus_attention(name: str) -> None:
    c = load_config(name)
    body, head = linear_params_per_token(c)
    # every prompt token goes through the layers; only the last token of the sequence through the final
    # norm and LM head (its logits are the only ones prefill samples from), hence head × 1, not × PROMPT
    expected = 2 * body * PROMPT + 2 * head * 1 + (deltanet_matrix_flop_per_token(c)
                                                   + mamba_matrix_flop_per_token(c)) * PROMPT
    for kind in SOFTMAX_KINDS:
        window = c.sliding_window if kind == AttentionKind.LOCAL else None
        pairs = (sum(block_keys(c, i) for i in range(1, PROMPT + 1)) if c.block_sparse and kind == AttentionKind.SPARSE
                 else causal_pairs(PROMPT, window))
        expected += c.attention_layers(kind) * attention_matrix_flop_per_pair(c, "prefill", kind) * pairs
    # the indexer scores every causal pair; MLA then attends min(i, top-k) of them: all of them at 2048
    expected += indexer_matrix_flop(c, causal_pairs(PROMPT, None)) + compressed_matrix_flop(c, "prefill", 1, PROMPT)
    assert matrix_flop(build_graph(c, "prefill", 1, PROMPT)) == pytest.approx(expected, rel=1e-3)


@pytest.mark.parametrize("name", preset_names())
def test_decode_matrix_flops_are_2_params_per_sequence_plus_attention(name: str) -> None:
    c = load_config(name)
    body, head = linear_params_per_token(c)
    b, L = DECODE_BATCH, DECODE_CONTEXT
    expected = 2 * (body + head) * b  # one new token per sequence, and each gets logits (DeltaNet decode: vector)
    for kind in SOFTMAX_KINDS:
        # one query against the L cached tokens (its own included), min(L, W) on a windowed layer
        keys = min(L, c.sliding_window) if kind == AttentionKind.LOCAL and c.sliding_window else L
        keys = min(keys, c.indexer.topk) if c.indexer is not None else keys  # DSA: MLA reads the top-k rows
        keys = block_keys(c, L) if c.block_sparse and kind == AttentionKind.SPARSE else keys  # MiniMax-M3's blocks
        expected += c.attention_layers(kind) * attention_matrix_flop_per_pair(c, "decode", kind) * b * keys
    expected += indexer_matrix_flop(c, b * L)  # ... which the indexer picks by scoring all L
    expected += compressed_matrix_flop(c, "decode", b, L)
    assert matrix_flop(build_graph(c, "decode", b, L)) == pytest.approx(expected, rel=1e-3)


@pytest.mark.parametrize("name", preset_names())
def test_matmul_params_equal_the_linear_weights_a_token_multiplies(name: str) -> None:
    # exact: no bias (DeepSeek-V3's router e_score_correction_bias included) counted as a multiplied weight
    c = load_config(name)
    body, head = linear_params_per_token(c)
    assert c.matmul_params == body + head


def test_sliding_window_prefill_beyond_the_window() -> None:
    # Mistral 7B v0.1, every layer windowed at 4096, prompt 8192: Σ min(i, 4096) = 4096·4097/2 + 4096·4096
    c = load_config("mistral-7b")
    body, head = linear_params_per_token(c)
    pairs = 4096 * 4097 // 2 + 4096 * 4096
    expected = 2 * body * 8192 + 2 * head + 32 * 32 * 4 * 128 * pairs
    assert matrix_flop(build_graph(c, "prefill", 1, 8192)) == pytest.approx(expected, rel=1e-9)


# --- 2. bytes by hand: Llama 3 8B decode, batch 1, context 4096, bf16, flash -------------------------

def test_llama_3_8b_decode_bytes_by_role_by_hand() -> None:
    # meta-llama/Meta-Llama-3-8B config: h 4096, 32 layers, 32 heads, 8 KV heads, d 128, f 14336, V 128256
    h, layers, H, G, d, f, V = 4096, 32, 32, 8, 128, 14336, 128256
    mg = build_graph(load_config("llama-3-8b"), "decode", 1, 4096)
    per_layer = (h * (H + 2 * G) * d  # qkv_proj
                 + H * d * h  # o_proj
                 + 2 * h * f + f * h  # gate_up, down
                 + 2 * h)  # the two RMSNorm gains
    weights = 2 * (layers * per_layer + h + V * h + h)  # + final norm gain, LM head, ONE embedding row
    kv_read = 32 * 4096 * 2 * 8 * 128 * 2  # layers × L × (K, V) × G × d × 2 B: the whole cache, once
    kv_written = 32 * 2 * 8 * 128 * 2  # the new token's K and V per layer
    # activations, in rows of h bf16 values (8192 B) per layer: attn_norm 1+1, qkv 1 + 1.5, rope 1.5 + 1,
    # attention 1 + 1, o_proj 1 + 1, residual 2 + 1, mlp_norm 1+1, gate_up 1 + 7, act 7 + 3.5, down 3.5 + 1,
    # residual 2 + 1 = 42 rows; plus the embedding's output row, final norm in and out, LM head in + logits
    acts = layers * 42 * 2 * h + 2 * h + 2 * 2 * h + 2 * h + 2 * V
    roles = by_role(mg)
    assert roles["weight"] == weights  # 15,009,857,536 B
    assert roles["kv_cache"] == kv_read + kv_written  # 536,870,912 + 131,072
    assert roles["activation"] == acts  # 11,299,328
    attn = kernel(mg, "attn")
    assert sum(t.bytes for t in attn.reads if t.role == "kv_cache") * attn.count == kv_read
    assert weight_bytes(kernel(mg, "embedding")) == 2 * h  # a gather: the row, not the 1 GB table


# --- 3. DeepSeek-V3: MLA cache, absorbed attention, experts -----------------------------------------

def test_deepseek_v3_latent_cache_and_absorbed_attention() -> None:
    c = load_config("deepseek-v3")
    # (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B × 61 layers
    assert c.kv_cache_bytes_per_token(2) == (512 + 64) * 2 * 61 == 70_272
    L = 4096
    mg = build_graph(c, "decode", 1, L)
    attn = kernel(mg, "attn")
    assert attn.count == 61
    # the latent rows are read once (keys are all 576 columns, values the first 512 of the same rows);
    # q is 128 heads × 576, the output 128 heads × 512 latent values
    assert attn.bytes == L * 576 * 2 + 128 * 576 * 2 + 128 * 512 * 2
    # per head per cached token: q·c over 576 dims and p·c over 512 (2 FLOPs per MAC), softmax 5 per score
    assert attn.cost.flop_by_unit[Unit.MATRIX] == 128 * L * (2 * 576 + 2 * 512)
    # absorption: W_UK (128 heads × 128 nope × 512) into q, W_UV (128 × 512 × 128) on the output
    assert kernel(mg, "q_absorb").cost.flop_by_unit[Unit.MATRIX] == 2 * 128 * 128 * 512
    assert kernel(mg, "o_absorb").cost.flop_by_unit[Unit.MATRIX] == 2 * 128 * 512 * 128
    # the cache write: one latent of 576 bf16 values per layer
    new = [t for t in kernel(mg, "latent_norm_rope").writes if t.role == "kv_cache"]
    assert sum(t.bytes for t in new) == 576 * 2


@pytest.mark.parametrize("batch", [1, 16, 256])
def test_deepseek_v3_expert_weights_read(batch: int) -> None:
    c = load_config("deepseek-v3")
    h, fe, E, k = 7168, 2048, 256, 8
    assert (c.num_experts, c.experts_per_token, c.num_shared_experts, c.first_dense_layers) == (E, k, 1, 3)
    # bytes per weight as the checkpoint ships them (its config.json quantization_config): FP8 E4M3, plus
    # one FP32 scale per 128×128 block: (8 + 32 / 16384) / 8 = 1.000244140625
    fp8 = (8 + 32 / (128 * 128)) / 8
    expert = 3 * h * fe * fp8  # gate, up, down of one 2048-wide expert
    # the stated assumption: each of N tokens picks k of E uniformly, E·(1 − (1 − k/E)^N) distinct experts
    # (N = 1: exactly k = 8; N = 16: 101.96 → 102; N = 256: 255.92 → 256), rounded, at least k
    hit = 8 if batch == 1 else round(E * (1 - (1 - k / E) ** batch))
    mg = build_graph(c, "decode", batch, 4096)
    assert mg.experts_hit == hit
    gu, down = kernel(mg, "moe.experts.gate_up"), kernel(mg, "moe.experts.down")
    assert gu.count == down.count == 61 - 3  # 58 MoE layers
    assert weight_bytes(gu) + weight_bytes(down) == hit * expert
    shared = weight_bytes(kernel(mg, "moe.shared.gate_up")) + weight_bytes(kernel(mg, "moe.shared.down"))
    assert shared == 1 * expert
    dense = weight_bytes(kernel(mg, "dense.gate_up_proj")) + weight_bytes(kernel(mg, "dense.down_proj"))
    assert kernel(mg, "dense.gate_up_proj").count == 3 and dense == 3 * h * 18432 * fp8


# --- 4. Mixtral, Gemma 2, GPT-2 ----------------------------------------------------------------------

def test_mixtral_reads_two_experts_at_batch_1_and_all_eight_as_the_batch_grows() -> None:
    c = load_config("mixtral-8x7b")
    expert = 3 * 4096 * 14336 * 2  # one SwiGLU expert, bf16
    hits = []
    for batch in (1, 2, 4, 8, 16, 64, 1024):
        mg = build_graph(c, "decode", batch, 4096)
        read = weight_bytes(kernel(mg, "experts.gate_up")) + weight_bytes(kernel(mg, "experts.down"))
        assert read % expert == 0
        hits.append(read // expert)
    # 8·(1 − (6/8)^N): N = 1 → 2 (top-2); 2 → 3.5 → 4; 4 → 5.47 → 5; 8 → 6.8 → 7; 16 → 7.92 → 8
    assert hits == [2, 4, 5, 7, 8, 8, 8]


def test_gemma_2_local_layers_read_the_window_and_global_layers_the_context() -> None:
    # google/gemma-2-9b: 42 layers alternating local (window 4096, even layers) and global, G 8, d 256
    mg = build_graph(load_config("gemma-2-9b"), "decode", 1, 8192)
    per_token = 2 * 8 * 256 * 2  # K and V, G·d, bf16
    local, glob = kernel(mg, "attn.local"), kernel(mg, "attn.global")
    assert local.count == glob.count == 21
    assert sum(t.bytes for t in local.reads if t.role == "kv_cache") == min(8192, 4096) * per_token
    assert sum(t.bytes for t in glob.reads if t.role == "kv_cache") == 8192 * per_token
    assert by_role(mg)["kv_cache"] == 21 * (4096 + 8192) * per_token + 42 * per_token  # + the new token's write


def test_gpt2_tied_embeddings_counted_once_and_read_by_the_lm_head() -> None:
    c = load_config("gpt2")
    h, V, L, f, P = 768, 50257, 12, 3072, 1024
    # wte once (tied), wpe, per layer: c_attn 3h² + 3h, c_proj h² + h, c_fc h·f + f, c_proj f·h + h, 2 LayerNorms
    # (2h each); final LayerNorm 2h. HF's GPT2LMHeadModel reports 124,439,808.
    total = V * h + P * h + L * (3 * h * h + 3 * h + h * h + h + h * f + f + f * h + h + 2 * 2 * h) + 2 * h
    assert c.total_params == total == 124_439_808
    mg = build_graph(c, "decode", 1, 512)
    head = kernel(mg, "lm_head")
    assert [t.name for t in head.reads if t.role == "weight"] == ["embed_tokens.weight"]
    assert weight_bytes(head) == V * h * 2
    assert "lm_head.weight" not in mg.graph.tensors
    assert weight_bytes(kernel(mg, "embedding")) == 2 * h * 2  # one wte row and one wpe row


# --- 5. fusion plans ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", preset_names())
@pytest.mark.parametrize("phase, batch, seq", [("prefill", 1, 2048), ("decode", 8, 4096)])
def test_plans_same_flops_and_naive_costs_exactly_the_scores(name: str, phase: str, batch: int, seq: int) -> None:
    c = load_config(name)
    mg = build_graph(c, phase, batch, seq)

    def totals(plan: str) -> tuple[float, float]:
        ks = mg.graph.kernels(mg.plan(plan))
        return sum(k.flop * k.count for k in ks), sum(k.bytes * k.count for k in ks)

    (f0, b0), (f1, b1), (f2, b2) = totals("none"), totals("flash"), totals("fused")
    assert f0 == f1 == f2
    assert b0 > b1 >= b2
    # naive attention: scores [B, H, Nq, Nkv] written by qk, read by softmax; probabilities written by
    # softmax, read by pv: 4 × one score tensor per attention group and layer (bf16 scores)
    H, nq = c.num_heads, (seq if phase == "prefill" else 1)
    scores = 0
    for kind in SOFTMAX_KINDS:
        # naive prefill writes all N×N; decode reads the cache (DSA: its top-k rows)
        nkv = seq if phase == "prefill" else (c.read_tokens(kind, seq) if c.indexer or c.block_sparse
                                              else c.cached_tokens(kind, seq))
        scores += c.attention_layers(kind) * 4 * batch * H * nq * nkv * 2
    extra = 0
    if c.is_mla and phase == "decode":
        # the absorbed decode reads the latent as keys and as values; fused, the rows are read once,
        # naive, the pv kernel reads the latent rows it attends a second time (the boundary rule)
        rows = c.read_tokens(AttentionKind.GLOBAL, seq)
        extra = c.num_layers * batch * rows * (c.kv_lora_rank + c.qk_rope_head_dim) * 2
    cp = c.compressed
    if cp is not None:  # DeepSeek-V4: one K = V tensor, read by qk and again by pv when naive
        scores = extra = 0
        for m in (0, cp.csa, cp.hca):
            keys = seq if phase == "prefill" else min(seq, cp.window) + (cp.read_entries(m, seq) if m else 0)
            scores += cp.layers(m) * 4 * batch * H * nq * keys * 2
            extra += cp.layers(m) * batch * (seq if phase == "prefill" else keys) * cp.head_dim * 2
    assert b0 - b1 == scores + extra


# --- 6. the CLI's JSON and --explain ------------------------------------------------------------------

def test_json_keys_and_explain_numbers_agree(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["model", "llama-3-70b", "--machine", "h100", "--phase", "decode", "--batch", "1", "--context", "8192"]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {"total", "active"} <= set(d["params"])
    assert {"flop", "bytes", "time_s", "flop_per_byte"} <= set(d["totals"])
    for k in d["kernels"]:
        assert {"name", "count", "flop", "bytes", "flop_per_byte", "time_s", "bound"} <= set(k)
    # the totals are the kernels' sums, each kernel × its count
    assert sum(k["flop"] * k["count"] for k in d["kernels"]) == pytest.approx(d["totals"]["flop"], rel=1e-12)
    assert sum(k["bytes"] * k["count"] for k in d["kernels"]) == pytest.approx(d["totals"]["bytes"], rel=1e-12)
    assert sum(k["time_s"] * k["count"] for k in d["kernels"]) == pytest.approx(d["totals"]["time_s"], rel=1e-12)
    assert d["kv_cache_bytes_per_token"] == 2 * 8 * 128 * 80 * 2  # 327,680 B: the seed's 320 KiB
    # the seed's limit: (2·69,501,714,432 + 4·8192·8192·80) / (8192 · 327,680) = 59.78 FLOP/B
    limit = (2 * 69_501_714_432 + 4 * 8192 * 8192 * 80) / (8192 * 327_680)
    assert d["decode_limit_flop_per_byte"] == pytest.approx(limit, rel=1e-12)

    assert main([*argv, "--explain"]) == 0
    text = capsys.readouterr().out
    assert f"{int(d['kv_cache_bytes_per_token']):,} B" in text  # "327,680 B"
    assert f"= {d['decode_limit_flop_per_byte']:.4g} FLOP/B" in text  # "I_limit = ... = 59.78 FLOP/B"
    kv_seq = re.search(r"KV bytes per sequence = ([\d,]+) B", text)
    assert kv_seq is not None and int(kv_seq.group(1).replace(",", "")) == 8192 * 327_680
    two_p = re.search(r"2·P = 2 × ([\d,]+) =", text)
    assert two_p is not None and int(two_p.group(1).replace(",", "")) == 69_501_714_432


def test_deepseek_json_and_explain_agree_on_the_latent(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["model", "deepseek-v3", "--machine", "h200", "--phase", "decode", "--batch", "1", "--context", "4096"]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kv_cache_bytes_per_token"] == 70_272
    assert d["experts_hit"] == 8
    a = analyze_model("deepseek-v3", "h200", "decode", 1, 4096)
    assert d["decode_limit_flop_per_byte"] == pytest.approx(a.decode_limit.flop_per_byte, rel=1e-12)
    assert main([*argv, "--explain"]) == 0
    text = capsys.readouterr().out
    assert "512 + 64 = 576 values" in text and "70,272 B" in text
    # P = the linear weights a token multiplies (the router's selection bias is not one): 36,624,596,992
    body, head = linear_params_per_token(load_config("deepseek-v3"))
    assert f"2·P = 2 × {body + head:,} =" in text
    assert f"KV bytes per sequence = {4096 * 70_272:,} B" in text
    assert f"= {d['decode_limit_flop_per_byte']:.4g} FLOP/B" in text  # "I_limit = ... = 496.3 FLOP/B"


def test_llama_attention_bias_puts_a_bias_on_o_proj_too() -> None:
    # transformers' LlamaAttention (and Qwen3's): q, k, v AND o_proj take bias=config.attention_bias
    raw = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 128,
           "attention_bias": True}
    c = config_from_dict(raw, "tiny-llama")
    h, H, G, d, layers = 256, 4, 2, 64, 2
    assert c.param_counts().parts["biases"] == layers * ((H + 2 * G) * d + h)  # q, k, v biases + the o_proj bias
    o_proj = kernel(build_graph(c, "decode", 1, 16), "o_proj")
    assert [t.shape for t in o_proj.reads if t.role == "weight"] == [(H * d, h), (h,)]
