"""Step-by-step derivations for a model step: the KV cache size, the decode limit, the intensity at
this batch, the crossover batch and the memory fit, with the numbers put in.
"""

from __future__ import annotations

from roofline.explain.fit import TIGHT_HEADROOM, fit_words
from roofline.explain.placement import explain_placements
from roofline.models import AttentionKind, DecodeLimit, ModelAnalysis, ModelConfig, expected_experts_hit
from roofline.models.recurrent import KDA_GATE_FLOP, KimiDelta, LinearAttention, Mamba2
from roofline.units import format_bytes, format_count, format_flop, format_intensity, format_time
from roofline.vocab import Phase, Role

GLOBAL, LOCAL = AttentionKind.GLOBAL, AttentionKind.LOCAL


def _recurrent_limit(cfg: ModelConfig, lim: DecodeLimit) -> list[str]:
    """The decode limit's recurrent terms: each sequence's state, read and written once a step, and its
    update FLOPs per token (Gated DeltaNet 7·dk·dv per value head, Mamba2 5·P·N_s per head)."""
    out = ["    recurrent layers keep a fixed state per sequence, read and written every step: "
           "I → (2·P + attention + R) / (L · KV bytes per token + 2·S)"]
    la, mb = cfg.linear_attention, cfg.mamba
    if isinstance(la, KimiDelta):  # the channel-wise gate on top of the delta rule
        out.append(f"    R (KDA) = (7·dk·dv + {KDA_GATE_FLOP}·dk)·H = (7·{la.key_dim}·{la.value_dim} + "
                   f"{KDA_GATE_FLOP}·{la.key_dim})·{la.value_heads} × "
                   f"{cfg.attention_layers(AttentionKind.LINEAR)} layers")
    elif la is not None:
        out.append(f"    R (Gated DeltaNet) = 7·dk·dv·Hv = 7·{la.key_dim}·{la.value_dim}·{la.value_heads} × "
                   f"{cfg.attention_layers(AttentionKind.LINEAR)} layers")
    if mb is not None:
        out.append(f"    R (Mamba2) = 5·P·N_s·H = 5·{mb.head_dim}·{mb.state_dim}·{mb.heads} × "
                   f"{cfg.attention_layers(AttentionKind.MAMBA)} layers")
    out.append(f"      = {lim.recurrent_flop_per_token:.6g} FLOP; 2·S = 2 × "
               f"{_sized(lim.state_bytes_per_sequence / 2)} = {lim.state_bytes_per_sequence:.6g} B")
    out.append(f"    I_limit = ({lim.matmul_flop_per_token:.6g} + {lim.attention_flop_per_token:.6g} + "
               f"{lim.recurrent_flop_per_token:.6g}) / ({lim.kv_bytes_per_sequence:.6g} + "
               f"{lim.state_bytes_per_sequence:.6g}) = {format_intensity(lim.flop_per_byte, 4)}")
    return out


def _sized(n: float) -> str:
    """327,680 B (320 KiB, 327.68 KB): both prefixes, each named."""
    return f"{n:,.0f} B ({format_bytes(n, 5, binary=True)}, {format_bytes(n, 5)})"


def explain_kv(cfg: ModelConfig, bytes_per_element: float, dtype_name: str, length: int | None = None) -> list[str]:
    lines = ["KV cache per token"]
    layers = cfg.kv_layers  # linear-attention layers keep a state per sequence instead
    per = cfg.kv_cache_bytes_per_token(bytes_per_element)
    if cfg.compressed is not None:  # DeepSeek-V4 (roofline.models.compressed)
        return [*lines, *cfg.compressed.explain(bytes_per_element, dtype_name, length)]
    if cfg.is_mla:
        lines.append(f"    MLA caches one compressed latent per token per layer: kv_lora_rank + qk_rope_head_dim "
                     f"= {cfg.kv_lora_rank} + {cfg.qk_rope_head_dim} = {cfg.kv_elements_per_token_per_layer()} values")
        ix = cfg.indexer
        if ix is None:
            lines.append(f"    × {layers} layers × {bytes_per_element:g} B ({dtype_name}) = {_sized(per)}")
        else:  # DeepSeek-V3.2: the lightning indexer's key beside the latent, every layer
            lines.append(f"    × {layers} layers × {bytes_per_element:g} B ({dtype_name}) + the DSA indexer's FP8 key "
                         f"and float32 scale, index_head_dim + 4 = {ix.key_bytes} B × {cfg.indexer_layers} layers "
                         f"= {_sized(per)}")
        per -= cfg.index_bytes_per_token
        mha = cfg.num_heads * (cfg.qk_head_dim + cfg.v_dim) * layers * bytes_per_element
        lines.append(f"    (decompressed K and V would be H·(d_qk + d_v) = "
                     f"{cfg.num_heads}·({cfg.qk_head_dim} + {cfg.v_dim}) per layer: {_sized(mha)}, "
                     f"{mha / per:.0f}× more)")
    elif not cfg.uniform_attention:  # each layer kind at its own shape (Gemma 4's full layers)
        for kind, n in cfg.softmax_layer_kinds:
            sh = cfg.attention_shape(kind)
            both = "; K=V: one projection, K and V both cached" if sh.k_eq_v else ""
            lines.append(f"    {kind} layers: G × (d_k + d_v) × layers × bytes = {sh.kv_heads} × ({sh.head_dim} + "
                         f"{sh.v_head_dim}) × {n} × {bytes_per_element:g} ({dtype_name}) = "
                         f"{_sized(sh.kv_elements * n * bytes_per_element)}{both}")
        lines.append(f"    sum over the layer kinds = {_sized(per)}")
    else:
        g, d, bs = cfg.num_kv_heads, cfg.head_dim, cfg.block_sparse
        index = "" if bs is None else (  # MiniMax-M3 (roofline.models.block_sparse)
            f" + the block-sparse indexer's key, sparse_index_dim × {bs.key_value_bytes} B (the model's dtype) × "
            f"sparse layers = {bs.index_dim} × {bs.key_value_bytes} × {cfg.attention_layers(AttentionKind.SPARSE)}")
        lines.append(f"    2 (K and V) × G × d × layers × bytes = 2 × {g} × {d} × {layers} × {bytes_per_element:g} "
                     f"({dtype_name}){index} = {_sized(per)}")
        if bs is not None:
            lines.append(f"    never capped: the indexer scores every cached key; attention reads at most "
                         f"{bs.topk} blocks of {bs.block} a query on the sparse layers")
        if g != cfg.num_heads:
            mha = per * cfg.num_heads / g
            lines.append(f"    GQA: {cfg.num_heads} query heads share {g} K/V heads; with one K/V head per query "
                         f"head it would be {_sized(mha)} ({cfg.num_heads // g}× more)")
    if cfg.sliding_window and cfg.attention_layers(LOCAL):
        lines.append(f"    sliding window {cfg.sliding_window}: {cfg.attention_layers(LOCAL)} of {layers} layers keep "
                     f"only the last {cfg.sliding_window} tokens")
        if length:
            at = bytes_per_element * cfg.kv_elements_cached(length) / length  # each kind at its shape
            lines.append(f"    the figure above is uncapped (every layer, every token); at {length:,} tokens: "
                         f"per-layer bytes × (global layers × L + windowed layers × min(L, W)) / L = {_sized(at)}")
    la, mb = cfg.linear_attention, cfg.mamba
    mixers: list[tuple[str, AttentionKind, LinearAttention | Mamba2, str]] = []
    if la is not None:
        mixers.append((la.name, AttentionKind.LINEAR, la,
                       f"recurrent: value heads × dk × dv × {la.state_bytes} B = {la.value_heads} × {la.key_dim} × "
                       f"{la.value_dim} × {la.state_bytes}"))
    if mb is not None:
        mixers.append(("Mamba2", AttentionKind.MAMBA, mb,
                       f"SSM: heads × head_dim × d_state × {mb.state_bytes} B = {mb.heads} × {mb.head_dim} × "
                       f"{mb.state_dim} × {mb.state_bytes}"))
    for name, kind, mixer, recurrent in mixers:
        n = cfg.attention_layers(kind)
        lines.append(f"state per sequence ({name}, {n} layers; no KV cache), whatever its length")
        lines.append(f"    {recurrent}; conv: (taps − 1) × channels × {bytes_per_element:g} B = "
                     f"{mixer.conv_kernel - 1} × {mixer.conv_channels} × {bytes_per_element:g}")
        lines.append(f"    × {n} layers = {_sized(n * mixer.state_bytes_per_sequence(bytes_per_element))}")
    return lines


def explain_model(a: ModelAnalysis) -> str:
    cfg, dt = a.config, a.model.dtypes
    kv_bpe = dt.kv_cache.bytes_per_element
    lines = [f"{a.title}", f"    compute dtype {a.dtype.name}; weights {dt.weights.name}, KV cache "
             f"{dt.kv_cache.name}, activations {dt.activations.name}; fusion plan {a.plan}", ""]
    if cfg.weights_dtype is not None and dt.weights == cfg.weights_dtype and dt.weights.description:
        lines.insert(2, f"    weights as the checkpoint stores them (its quantization_config): "
                        f"{dt.weights.description} = {dt.weights.bytes_per_element:.6g} bytes each")
    lines.append("parameters")
    counts = cfg.param_counts()
    for part, n in counts.parts.items():
        if n:
            lines.append(f"    {part:<22} {n:>18,}")
        if part == "experts" and counts.active_parts[part]:
            lines.append(f"    {'experts (k per token)':<22} {counts.active_parts[part]:>18,}")
    lines.append(f"    total {format_count(cfg.total_params)} ({cfg.total_params:,}); active per token "
                 f"{format_count(cfg.active_params)} ({cfg.active_params:,})")
    lines.append(f"    multiplied per token (active − embedding table − norms − biases) P = {cfg.matmul_params:,}")
    if cfg.is_moe:
        e, k, n = cfg.num_experts, cfg.experts_per_token, a.model.shape.tokens
        lines.append("experts read per MoE layer")
        if a.model.experts_hit_override is not None:
            lines.append(f"    set by hand: {a.model.experts_hit} of {e}")
        else:
            expected = expected_experts_hit(e, k, n)
            lines.append(f"    assumption: each of the N = {n} tokens picks k = {k} of E = {e} experts "
                         "uniformly at random;")
            lines.append(f"    distinct experts hit = E·(1 − (1 − k/E)^N) = {e}·(1 − (1 − {k}/{e})^{n}) = "
                         f"{expected:.4g} → {a.model.experts_hit} (whole experts, at least k);")
            lines.append("    real routers are skewed (hot experts): --experts-hit overrides this")
        mats = 3 if cfg.gated else 2  # gate, up, down; or up, down (Nemotron-H's ReLU² experts)
        per_expert = mats * cfg.hidden_size * cfg.moe_intermediate_size
        hit = a.model.experts_hit or 0
        lines.append(f"    expert weights read = {hit} × {mats}·h·f = {hit} × {mats}·"
                     f"{cfg.hidden_size}·{cfg.moe_intermediate_size} = {hit * per_expert:,} parameters "
                     f"per layer, × {cfg.moe_layers} layers")
    lines.append("")
    lines += explain_kv(cfg, kv_bpe, dt.kv_cache.name, a.seq)
    state = cfg.state_bytes_per_sequence(kv_bpe)
    kv_seq = cfg.kv_cache_bytes(1, a.seq, kv_bpe) - state  # ModelConfig.kv_cache_bytes: the cache and the state
    with_state = f" + state {_sized(state)}" if state else ""
    lines.append(f"    one sequence at {a.seq} tokens: {_sized(kv_seq)}{with_state}; × batch {a.batch} = "
                 f"{_sized((kv_seq + state) * a.batch)}")
    lines.append("")
    roles = a.bytes_by_role()
    ridge = a.ridge_flop_per_byte
    lines.append(f"this step (plan {a.plan})")
    lines.append(f"    FLOPs = {format_flop(a.flop)} ({a.flop:.6g})")
    lines.append(f"    bytes = weights {format_bytes(roles[Role.WEIGHT])} + "
                 f"KV cache {format_bytes(roles[Role.KV_CACHE])} + "
                 f"activations {format_bytes(roles[Role.ACTIVATION])} = {format_bytes(a.bytes)} ({a.bytes:.6g})")
    lines.append(f"    I = {a.flop:.6g} / {a.bytes:.6g} = {format_intensity(a.flop_per_byte, 4)}; ridge "
                 f"{a.machine.name} {a.dtype.peak_key} = {format_intensity(ridge, 4)}")
    shares = sorted(a.analysis.bound_times_s.items(), key=lambda rt: -rt[1])
    lines.append("    bound = the resource whose kernels take the most of the time floor: "
                 + ", ".join(f"{r} {t / a.time_s:.1%}" for r, t in shares)
                 + f" → {a.bound} ({a.bound_class}-bound)")
    lines.append(f"    time floor = Σ kernels' floors = {format_time(a.time_s)}; {a.tokens} tokens → "
                 f"{a.tokens_per_s:,.0f} tokens/s; {a.memory_bound_share:.0%} of the time in memory-bound kernels")
    if a.phase == Phase.DECODE:
        lim = a.decode_limit
        lines.append("")
        lines.append("decode limit as the batch grows: (2·P + attention FLOPs per token) / (L · KV bytes per token)")
        lines.append("    weights are read once per step, so per sequence they vanish as B → ∞; FLOPs and KV bytes")
        lines.append("    both grow with B:  I → (2·P + attention FLOPs per token) / (L · KV bytes per token)")
        lines.append(f"    2·P = 2 × {cfg.matmul_params:,} = {lim.matmul_flop_per_token:.6g} FLOP")
        per_pair = cfg.attention_flop_per_pair()
        if cfg.is_mla:
            what = (f"2·H·(576 + 512) = 2·{cfg.num_heads}·({cfg.kv_lora_rank + cfg.qk_rope_head_dim} + "
                    f"{cfg.kv_lora_rank})")
        else:
            what = f"2·H·(d + d) = 2·{cfg.num_heads}·({cfg.qk_head_dim} + {cfg.v_dim})"
        if cfg.attention_layers(LOCAL) and cfg.sliding_window:
            read = (f"(({a.seq} − 1) mod {cfg.sliding_window} + 1)" if cfg.attention_chunked
                    else f"min({a.seq}, {cfg.sliding_window})")
            tokens_text = (f"({cfg.attention_layers(GLOBAL)} layers × {a.seq} + {cfg.attention_layers(LOCAL)} "
                           f"layers × {read})")
        elif cfg.indexer is not None:
            tokens_text = f"min({a.seq}, top-k {cfg.indexer.topk}) × {cfg.num_layers} layers"
        elif cfg.block_sparse is not None:  # MiniMax-M3: keys(L) on the sparse layers (roofline.models.block_sparse)
            bs, sparse = cfg.block_sparse, cfg.attention_layers(AttentionKind.SPARSE)
            tokens_text = (f"({cfg.attention_layers(GLOBAL)} layers × {a.seq} + {sparse} block-sparse layers × "
                           f"min(L, (k − 1)·b + (L − 1) mod b + 1) = {int(bs.keys(a.seq))}) + the indexer "
                           f"(2·d_I + 1)·H_I = {(2 * bs.index_dim + 1) * bs.index_heads} per cached token × {a.seq} + "
                           f"H_I·⌈L/b⌉ = {bs.index_heads}·{int(bs.blocks(a.seq))} × {sparse} layers")
        else:
            tokens_text = f"{a.seq} × {cfg.kv_layers} layers"
        if not cfg.is_mla and not cfg.uniform_attention:  # each layer kind at its own shape
            kinds = cfg.softmax_layer_kinds
            shapes = [(k, cfg.attention_shape(k)) for k, _ in kinds]
            what = " and ".join(f"{k} 2·H·(d + d_v) = 2·{sh.heads}·({sh.head_dim} + {sh.v_head_dim}) = "
                                f"{sh.flop_per_pair:.6g}" for k, sh in shapes)
            lines.append(f"    attention = {what} FLOP per (query, key) pair per layer")
        else:
            lines.append(f"    attention = {what} = {per_pair:.6g} FLOP per (query, key) pair per layer")
        if cfg.indexer is not None:
            ix = cfg.indexer
            tokens_text += (f" + the DSA indexer (2·d_I + 3)·H_I = {(2 * ix.head_dim + 3) * ix.heads} per cached token "
                            f"× {a.seq} × {cfg.indexer_layers} layers")
        lines.append(f"              × {tokens_text} = {lim.attention_flop_per_token:.6g} FLOP")
        index = (f" (the indexer reads its whole key cache: {cfg.index_bytes_per_token} B × {a.seq} tokens)"
                 if cfg.indexer is not None or cfg.block_sparse is not None else "")
        lines.append(f"    KV bytes per sequence = {_sized(lim.kv_bytes_per_sequence)}{index}")
        if lim.state_bytes_per_sequence:
            lines.extend(_recurrent_limit(cfg, lim))
        else:
            lines.append(f"    I_limit = ({lim.matmul_flop_per_token:.6g} + {lim.attention_flop_per_token:.6g}) / "
                         f"{lim.kv_bytes_per_sequence:.6g} = {format_intensity(lim.flop_per_byte, 4)}")
        cross = a.crossover
        lines.append("    the graph's totals (activations included) tend to "
                     f"{format_intensity(cross.limit_flop_per_byte, 4)}")
        verdict = "below" if lim.flop_per_byte < ridge else "above"
        lines.append(f"    {verdict} the ridge {format_intensity(ridge, 4)}: "
                     + ("no batch size makes decode compute-bound; only fewer KV bytes per FLOP do "
                        "(GQA, MLA, an FP8/FP4 KV cache, a window)" if verdict == "below"
                        else "a large enough batch reaches the roof"))
    lines.append("")
    lines.append("crossover batch")
    lines.append(f"    {a.crossover.reason}")
    mem = a.memory
    lines.append("")
    lines.append("memory fit")
    every = cfg.total_params * dt.weights.bytes_per_element
    lines.append(f"    weights {format_count(cfg.total_params)} params × {dt.weights.bytes_per_element:g} B = "
                 f"{format_bytes(every, binary=True)}"
                 + ("" if a.split.trivial else f" in all; each device holds its share under {a.split}"))
    lines.append(f"    per device: weights {format_bytes(mem.weights_bytes, binary=True)} + KV cache "
                 f"{format_bytes(mem.kv_cache_bytes, binary=True)} + workspace "
                 f"{format_bytes(mem.workspace_bytes, binary=True)} = {format_bytes(mem.total_bytes, binary=True)}")
    if mem.capacity_bytes and mem.min_split is not None:
        lines.append(f"    {a.machine.name} holds {format_bytes(mem.capacity_bytes, binary=True)}; the smallest valid "
                     f"split whose per-device total fits in {mem.utilization:.0%} of it: {mem.min_split} "
                     f"({mem.devices} device{'s' if mem.devices != 1 else ''}; tensor parallel within a node, "
                     "then pipeline stages)")
    if mem.fits and mem.usable_bytes:
        lines.append(f"    this split: {format_bytes(mem.total_bytes, binary=True)} per device of "
                     f"{format_bytes(mem.usable_bytes, binary=True)} usable ({mem.utilization:.0%} of "
                     f"{format_bytes(mem.capacity_bytes or 0.0, binary=True)}): headroom = usable − needed; "
                     f"{fit_words(mem.total_bytes, mem.usable_bytes)} (tight below {TIGHT_HEADROOM:.0%})")
    if mem.warning:
        lines.append(f"    WARNING: {mem.warning}")
    return "\n".join(lines)


def explain_kernels(a: ModelAnalysis) -> str:
    """Every kernel's derivation; the datasheet and link sources listed once at the end, cited as [n]."""
    return explain_placements(a.placements)


__all__ = ["TIGHT_HEADROOM", "explain_kernels", "explain_kv", "explain_model", "fit_words"]
