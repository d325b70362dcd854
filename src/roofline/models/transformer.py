"""ModelConfig: the shape of a decoder-only transformer, what its layers cache and what it counts.

Parameter counts are derived from the shape alone (`ModelConfig.param_counts`, a `ParamCounts`): embeddings,
the attention and MLP weights of every layer, norm gains and biases. "Active" parameters are those one token
uses: for a mixture of experts, the router, the shared experts and `experts_per_token` routed experts instead
of all of them; embeddings and the LM head included, as the published figures include them (Mixtral 8x7B: 12.9B).

Attended tokens (`ModelConfig.attended_tokens`): the tokens one sequence's layers keep and read at a length L,
summed over layers: L per global layer, min(L, W) per windowed one. The KV cache, the decode limit, the memory
fit and the sweeps all take it from there.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from roofline.dtypes import DType
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.models.attention_shape import AttentionShape
from roofline.models.attn_res import AttentionResiduals
from roofline.models.block_sparse import BlockSparse
from roofline.models.compressed import CompressedAttention, compressed_mtp_parts
from roofline.models.formulas import Num, minimum
from roofline.models.kinds import SOFTMAX_KINDS, AttentionKind, MlpKind, ParamCounts
from roofline.models.mtp import MTP_PARTS, mtp_parts
from roofline.models.recurrent import LinearAttention, Mamba2
from roofline.models.sparse import SparseIndexer
from roofline.parallel.algorithms import Algorithm
from roofline.units import require_positive_int
from roofline.vocab import Logits, MlaForm, Norm

DEFAULT_LENGTH = 2048  # prompt (prefill) or context (decode) length when none is given, capped per model
LOGITS = tuple(str(v) for v in Logits)  # which positions the LM head projects in prefill
MLA_MODES = tuple(str(v) for v in MlaForm)  # how MLA attends: over the latent, or over per-head K and V


@frozen
class ModelConfig:
    """The shape of a decoder-only transformer: everything the graph builder and the counts need."""

    name: str
    architecture: str  # the HF model_type it came from
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width (0 if every layer is MoE)
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    norm: Norm = Norm.RMSNORM  # LayerNorm has a bias too
    # "swiglu" | "geglu" | "swiglu_clamped" (gated; gpt-oss clamps gate and up) | "gelu" (GPT-2: up, gelu, down)
    # | "swiglu_limited" (DeepSeek-V4: silu(gate.clamp(max=l)) · up.clamp(-l, l)) | "situ", "situ_gate" (Kimi K3)
    activation: str = "swiglu"
    qkv_bias: bool = False  # Qwen2: biases on q, k, v
    o_bias: bool = False  # Llama/Qwen3 attention_bias: a bias on o_proj as well as on q, k, v
    linear_bias: bool = False  # GPT-2: biases on every linear layer
    qk_norm: bool = False  # Qwen3, Gemma 3: RMSNorm over each head of q and k
    qk_norm_per_layer: bool = False  # MiniMax-M2: the RMSNorm over all of q (H·d) and all of k (G·d), one gain each
    sandwich_norm: bool = False  # Gemma 2/3: norms after attention and after the MLP as well
    learned_positions: int = 0  # GPT-2: rows of the learned position table (0: RoPE)
    sliding_window: int | None = None
    # Llama 4 attention_chunk_size: the LOCAL layers attend within chunks of sliding_window tokens (each
    # token its chunk's earlier tokens), not a sliding window; their cache is capped at the chunk alike
    attention_chunked: bool = False
    rope_global: bool = True  # False: the GLOBAL layers run no RoPE (Llama 4's NoPE layers)
    # the GLOBAL layers' own attention shape where it is not the LOCAL layers' (Gemma 4's global_head_dim,
    # num_global_key_value_heads, attention_k_eq_v); None: every softmax layer at the model's (attention_shape)
    global_attention: AttentionShape | None = None
    v_norm: bool = False  # Gemma 4: an RMSNorm without a gain over each V head (FLOPs, no parameters)
    # per layer GLOBAL or LOCAL; empty: every layer alike (LOCAL if there is a window). See layer_kinds.
    layer_attention: tuple[AttentionKind, ...] = ()
    # mixture of experts
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0  # each of moe_intermediate_size width
    moe_latent_size: int = 0  # LatentMoE (Nemotron 3 Super/Ultra): the routed experts run in this width (models/latent)
    moe_latent_norm: bool = False  # Kimi K3: an RMSNorm over the experts' latent sum before it is projected back
    first_dense_layers: int = 0  # DeepSeek-V3: the first k layers have a dense MLP
    moe_gains: int = 0  # per MoE layer, norm gains and scales beyond the block's (Gemma 4: 3 norms, router scales)
    router_bias: bool = False  # DeepSeek-V3: e_score_correction_bias; gpt-oss: the router's bias
    expert_bias: bool = False  # gpt-oss: biases on every expert's gate_up (2f) and down (h) projections
    attention_sinks: bool = False  # gpt-oss: one learned sink logit per head, in every softmax's sum
    # multi-head latent attention (DeepSeek-V3); kv_lora_rank > 0 turns it on
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    linear_attention: LinearAttention | None = None  # the LINEAR layers' shape (Qwen3-Next, Qwen3.5)
    mamba: Mamba2 | None = None  # the MAMBA layers' shape (Nemotron-H)
    indexer: SparseIndexer | None = None  # DeepSeek-V3.2: MLA attends the indexer's top-k tokens
    block_sparse: BlockSparse | None = None  # MiniMax-M3: the SPARSE layers' indexer (models/block_sparse)
    # DeepSeek-V4: every layer LOCAL (shared-KV MQA over the window, K = V) plus its compressed branch
    # (roofline.models.compressed), mHC's hc_mult residual streams, the first hash_layers MoE layers hash-routed
    compressed: CompressedAttention | None = None
    hash_layers: int = 0
    attn_res: AttentionResiduals | None = None  # Kimi K3: a softmax over the stream's snapshots before each norm
    # per layer DENSE, MOE or NONE; empty: MOE after first_dense_layers when there are experts, else DENSE
    layer_mlp: tuple[MlpKind, ...] = ()
    # per layer the dense FFN's own width, 0 where the layer runs none (DeciLM's NAS blocks: ffn_mult per
    # layer); empty: intermediate_size on every dense layer
    ffn_widths: tuple[int, ...] = ()
    nope: bool = False  # Nemotron-H: no positional encoding on its attention layers (no RoPE op)
    attn_output_gate: bool = False  # a sigmoid gate on the attention output: q_proj's (Qwen3-Next), MLA's g_proj (K3)
    shared_expert_gate: bool = False  # Qwen3-Next/3.5: a sigmoid gate (h -> 1) on the shared expert's output
    vision_params: int = 0  # a multimodal checkpoint's vision tower: in its memory, not in the text step
    # multi-token prediction (num_nextn_predict_layers): layers in the checkpoint's memory, not in the main
    # step (roofline.models.mtp); mtp_tables: each keeps its own copy of the embedding and the head (DeepSeek)
    mtp_layers: int = 0
    mtp_tables: bool = False
    mtp_draft: bool = False  # this is one MTP module run as a draft: eh_proj before its layer (models/draft.py)
    rotary_dims: int = 0  # dims of each q/k head RoPE rotates (partial_rotary_factor · head_dim); 0: all
    source: str = ""  # preset name or file path
    # how the program runs the step (not the checkpoint's shape; `roofline model --logits/--mla`):
    # logits "last" (only the last position of each prefill sequence is projected, as serving engines
    # do) or "all" (every position, as a plain forward() does); mla None (decode absorbed, prefill
    # expanded, as DeepSeek runs it), "absorbed" or "expanded" (K and V decompressed and cached per head,
    # as Hugging Face's DeepseekV3Attention does)
    logits: Logits = Logits.LAST
    mla: MlaForm | None = None
    # expert parallel as deployed (`--dispatch-dtype`, `--dispatch-per-node`, `--redundant-experts`,
    # `--two-batch-overlap`; roofline.models.experts): the dtype dispatch sends tokens in (None: the
    # activations'; combine stays in them, as DeepEP does), each token sent once per destination node
    # and GPU instead of once per expert pick, replicas of experts stored beside the E routed ones
    # (EPLB), and the MoE all-to-all of one micro-batch run under the other's compute
    dispatch_dtype: DType | None = None
    dispatch_per_node: bool = False
    redundant_experts: int = 0
    two_batch_overlap: bool = False
    # the all-reduce algorithm asked for (`--allreduce`; None: auto, as engines choose:
    # roofline.parallel.algorithms.choose)
    allreduce: Algorithm | None = None
    # node-limited routing (DeepSeek-V3, arXiv 2412.19437 §2.1.2: each token to at most M = 4 nodes;
    # config.json's topk_group of n_group groups); 0: every node may be picked
    routing_node_limit: int = 0
    # what the checkpoint stores its weights in, read from config.json's quantization_config (FP8 with
    # block scales, GPTQ/AWQ int4 with group scales, ...; roofline.models.config); None: not stated
    # (bf16 unless --weights-dtype says otherwise). `load_warnings`: what the loader read but ignored.
    weights_dtype: DType | None = None
    load_warnings: tuple[str, ...] = ()
    # per parameter part, the fraction the checkpoint keeps in 16 bits beside weights_dtype (its
    # tables, norms, biases and the modules its quantization_config leaves out; roofline.models.quantization)
    unquantized: tuple[tuple[str, float], ...] = ()
    # per parameter part, (dtype, fraction) held in another dtype (MIXED_PRECISION; roofline.models.mixed)
    mixed_weights: tuple[tuple[str, DType, float], ...] = ()

    def __post_init__(self) -> None:
        if self.logits not in LOGITS:
            raise RooflineError(f"model {self.name}: logits must be {' or '.join(LOGITS)}, got {self.logits!r}")
        if self.mla is not None and self.mla not in MLA_MODES:
            raise RooflineError(f"model {self.name}: mla must be {' or '.join(MLA_MODES)}, got {self.mla!r}")
        for label in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "vocab_size",
                      "max_position_embeddings"):
            try:
                require_positive_int(getattr(self, label), label)
            except RooflineError as exc:
                raise RooflineError(f"model {self.name}: {exc}") from None
        if self.num_heads % self.num_kv_heads:
            raise RooflineError(f"model {self.name}: num_attention_heads ({self.num_heads}) must be a multiple "
                                f"of num_key_value_heads ({self.num_kv_heads})")
        if self.is_moe and not (0 < self.experts_per_token <= self.num_experts and self.moe_intermediate_size > 0):
            raise RooflineError(f"model {self.name}: experts_per_token must be in 1..num_experts and "
                                f"moe_intermediate_size positive")
        if self.layer_attention and (len(self.layer_attention) != self.num_layers
                                     or set(self.layer_attention) - set(AttentionKind)):
            raise RooflineError(f"model {self.name}: layer_attention must give "
                                f"{' or '.join(repr(str(k)) for k in AttentionKind)} for each of "
                                f"the {self.num_layers} layers")
        # strings in (from a caller), enum members kept
        object.__setattr__(self, "layer_attention", tuple(AttentionKind(k) for k in self.layer_attention))
        for kind, shape, label in ((AttentionKind.LINEAR, self.linear_attention, "linear_attention"),
                                   (AttentionKind.MAMBA, self.mamba, "mamba"),
                                   (AttentionKind.SPARSE, self.block_sparse, "block_sparse")):
            if (kind in self.layer_attention) != (shape is not None):
                raise RooflineError(f"model {self.name}: {kind} layers need their shape ({label}) and a {label} "
                                    f"shape needs {kind} layers")
        if self.layer_mlp and len(self.layer_mlp) != self.num_layers:
            raise RooflineError(f"model {self.name}: layer_mlp must give an MLP kind for each of the "
                                f"{self.num_layers} layers")
        object.__setattr__(self, "layer_mlp", tuple(MlpKind(k) for k in self.layer_mlp))
        if self.ffn_widths and (len(self.ffn_widths) != self.num_layers or any(
                (w > 0) != (k == MlpKind.DENSE) for w, k in zip(self.ffn_widths, self.mlp_kinds, strict=False))):
            raise RooflineError(f"model {self.name}: ffn_widths must give each of the {self.num_layers} layers its "
                                f"dense width, 0 on the layers without a dense MLP")
        if isinstance(self.redundant_experts, bool) or not isinstance(self.redundant_experts, int) \
                or self.redundant_experts < 0:
            raise RooflineError(f"model {self.name}: redundant_experts must be a whole number, 0 or more, got "
                                f"{self.redundant_experts!r}")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise RooflineError(f"model {self.name}: sliding_window must be positive, got {self.sliding_window}")
        if self.attn_res is not None and self.attn_res.layers != self.num_layers:
            raise RooflineError(f"model {self.name}: attention residuals are over its {self.num_layers} layers")
        ga = self.global_attention
        if ga is not None and (self.is_mla or ga.output_gate != self.attn_output_gate):
            raise RooflineError(f"model {self.name}: a full-attention shape of its own is read for GQA layers "
                                f"alike in their output gate, not for MLA")

    # --- the attention shape each layer kind runs --------------------------------------------------
    def attention_shape(self, kind: AttentionKind = AttentionKind.GLOBAL) -> AttentionShape:
        """The shape a softmax layer of `kind` runs at: the GLOBAL layers' own (global_attention) where
        given, else the model's H × d_qk against G K/V heads, values d_v wide (MLA: its decompressed
        heads, 192 and 128 for DeepSeek-V3)."""
        if kind == AttentionKind.GLOBAL and self.global_attention is not None:
            return self.global_attention
        return AttentionShape(self.num_heads, self.num_kv_heads, self.qk_head_dim, self.v_dim,
                              rotary_dims=0 if self.is_mla else self.rotary_dims,
                              output_gate=self.attn_output_gate, sinks=self.attention_sinks)

    @property
    def softmax_layer_kinds(self) -> tuple[tuple[AttentionKind, int], ...]:
        """(kind, layers) for each softmax kind the model runs (GLOBAL, then LOCAL), layers > 0."""
        return tuple((k, n) for k in SOFTMAX_KINDS if (n := self.attention_layers(k)))

    @property
    def uniform_attention(self) -> bool:
        """True when every softmax layer runs one shape (one qkv_proj, one o_proj for all of them)."""
        return self.global_attention is None or not self.attention_layers(AttentionKind.LOCAL) \
            or self.global_attention == self.attention_shape(AttentionKind.LOCAL)

    # --- derived shape ---------------------------------------------------------------------------
    @property
    def layer_kinds(self) -> tuple[AttentionKind, ...]:
        """Per layer, the attention it runs: GLOBAL (full causal) or LOCAL (sliding window)."""
        if self.layer_attention:
            return self.layer_attention
        return (AttentionKind.LOCAL if self.sliding_window else AttentionKind.GLOBAL,) * self.num_layers

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def gated(self) -> bool:
        return self.activation in ("swiglu", "geglu", "swiglu_clamped", "swiglu_limited", "situ", "situ_gate")

    @property
    def mlp_kinds(self) -> tuple[MlpKind, ...]:
        """Per layer, the MLP it runs: layer_mlp, or MOE after first_dense_layers (DENSE without experts)."""
        if self.layer_mlp:
            return self.layer_mlp
        return tuple(MlpKind.MOE if self.is_moe and i >= self.first_dense_layers else MlpKind.DENSE
                     for i in range(self.num_layers))

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head: head_dim, or nope + rope parts under MLA (128 + 64 = 192)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def v_dim(self) -> int:
        """Width of one value head: head_dim, or v_head_dim where given (MLA; MiMo-V2-Flash's 128 beside 192)."""
        return self.v_head_dim if self.is_mla or self.v_head_dim else self.head_dim

    @property
    def moe_layers(self) -> int:
        if self.layer_mlp:
            return sum(1 for k in self.layer_mlp if k == MlpKind.MOE)
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        if self.layer_mlp:
            return sum(1 for k in self.layer_mlp if k == MlpKind.DENSE)
        return self.num_layers - self.moe_layers

    @property
    def block_norms(self) -> int:
        """Pre-norms over the stack: one per token mixer and one per MLP a layer runs (2·L for a
        transformer; Nemotron-H's blocks hold one or the other, one norm each)."""
        return (sum(1 for k in self.layer_kinds if k != AttentionKind.NONE)
                + sum(1 for k in self.mlp_kinds if k != MlpKind.NONE))

    def mlp_groups(self) -> tuple[tuple[MlpKind, int, int, str], ...]:
        """The step's MLP groups, each one set of ops run on its layers: (kind, layers, dense width, op-name
        prefix). The dense layers (one group per width for NAS blocks, `ffn_widths`), then the MoE layers;
        a prefix names each group when there are several ("dense.", "moe.", "ffn5632.")."""
        widths: dict[int, int] = {}
        for w in self.ffn_widths or (self.intermediate_size,) * self.dense_layers:
            if w:
                widths[w] = widths.get(w, 0) + 1
        dense = [(MlpKind.DENSE, c, w) for w, c in widths.items()]
        groups = [*dense, *([(MlpKind.MOE, self.moe_layers, 0)] if self.moe_layers else [])]
        return tuple((kind, c, w, "" if len(groups) == 1 else f"ffn{w}." if len(dense) > 1 and kind == MlpKind.DENSE
                      else f"{kind}.") for kind, c, w in groups)

    def layer_counts(self) -> dict[tuple[AttentionKind, MlpKind], int]:
        """How many layers of each (attention kind, MLP kind): layers are counted, not repeated."""
        out: dict[tuple[AttentionKind, MlpKind], int] = {}
        for attn, mlp in zip(self.layer_kinds, self.mlp_kinds, strict=True):
            out[(attn, mlp)] = out.get((attn, mlp), 0) + 1
        return out

    def attention_layers(self, kind: AttentionKind) -> int:
        return self.layer_kinds.count(kind)

    def layer_groups(self) -> tuple[tuple[str, int], ...]:
        """The model as a sequence of layer kinds: (kind, layers) for each token mixer, then each MLP
        kind, in the order they first appear: (("window 128", 18), ("full attention", 18), ("MoE", 36))."""
        mla = f"MLA + DSA top-{self.indexer.topk}" if self.indexer is not None else "MLA"
        names = {AttentionKind.GLOBAL: ("gated " if self.attn_output_gate else "")
                 + (mla if self.is_mla else "full attention"),
                 AttentionKind.LOCAL: f"{'chunked' if self.attention_chunked else 'window'} {self.sliding_window}",
                 AttentionKind.LINEAR: self.linear_attention.name if self.linear_attention else "Gated DeltaNet",
                 AttentionKind.MAMBA: "Mamba2",
                 AttentionKind.SPARSE: self.block_sparse.name if self.block_sparse else "block-sparse attention"}
        if self.nope or not self.rope_global:
            names[AttentionKind.GLOBAL] += " (no RoPE)"
        if not self.is_mla and not self.uniform_attention:  # Gemma 4: the full layers' own shape
            names[AttentionKind.GLOBAL] += f" ({self.attention_shape(AttentionKind.GLOBAL).describe()})"
        out: dict[str, int] = {}
        cp = self.compressed
        for i, kind in enumerate(self.layer_kinds):
            if kind == AttentionKind.NONE:
                continue
            name = names[kind] if cp is None else cp.layer_name(cp.ratios[i])  # DeepSeek-V4: by compress ratio
            out[name] = out.get(name, 0) + 1
        if cp is not None and cp.hc_mult > 1:
            out[f"mHC ({cp.hc_mult} streams)"] = self.num_layers
        if self.attn_res is not None:
            out[f"attention residuals (a snapshot every {self.attn_res.block_size})"] = self.num_layers
        dense = "ReLU² MLP" if self.activation == "relu2" else "dense MLP"
        moe = f"LatentMoE ({self.moe_latent_size})" if self.moe_latent_size else "MoE"
        if self.hash_layers:
            moe += f" ({self.hash_layers} hash-routed)"
        for label, count in ((dense, self.dense_layers), (moe, self.moe_layers), ("MTP", self.mtp_layers)):
            if count:  # MTP: multi-token-prediction layers, in memory and not in the step (roofline.models.mtp)
                out[label] = count
        return tuple(out.items())

    @property
    def kv_layers(self) -> int:
        """Layers that keep a KV cache (full and windowed attention; not the linear-attention ones)."""
        return sum(1 for a in self.layer_kinds if a in SOFTMAX_KINDS)

    def state_bytes_per_sequence(self, activation_bytes: float = 2.0) -> float:
        """Bytes of fixed state one sequence keeps, all LINEAR layers: each its recurrent and conv
        state (LinearAttention.state_bytes_per_sequence); 0 for a model without them."""
        la, mb = self.linear_attention, self.mamba
        linear = 0.0 if la is None else self.attention_layers(AttentionKind.LINEAR) * la.state_bytes_per_sequence(
            activation_bytes)
        cp = 0.0 if self.compressed is None else self.compressed.state_bytes_per_sequence(activation_bytes)
        return cp + linear + (0.0 if mb is None else self.attention_layers(AttentionKind.MAMBA)
                              * mb.state_bytes_per_sequence(activation_bytes))

    def kv_elements_per_token_per_layer(self, kind: AttentionKind = AttentionKind.GLOBAL) -> int:
        """Values cached per token by one layer of `kind`: G·(d + d_v) for K and V (its attention_shape),
        or kv_lora_rank + qk_rope_head_dim for MLA's compressed latent (512 + 64 = 576 for DeepSeek-V3)."""
        if self.is_mla and self.mla == "expanded":  # per-head K (nope + rope) and V, as HF caches them
            return self.num_heads * (self.qk_head_dim + self.v_head_dim)
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        if self.compressed is not None:  # DeepSeek-V4: one head that is both the key and the value
            return self.num_kv_heads * self.head_dim
        return self.attention_shape(kind).kv_elements

    def kv_elements_per_token(self) -> int:
        """Values one token adds to the cache, all KV layers, uncapped: Σ_kind layers · G·(d + d_v)."""
        return sum(n * self.kv_elements_per_token_per_layer(k) for k, n in self.softmax_layer_kinds)

    def kv_elements_cached(self, context: Num) -> Num:
        """Values one sequence's KV layers keep at `context`: Σ_kind layers · values a token · cached
        tokens (min(L, W) on a windowed layer). An int for an int, a numpy array for an array."""
        return sum((n * self.kv_elements_per_token_per_layer(k) * self.cached_tokens(k, context)
                    for k, n in self.softmax_layer_kinds), 0 * context)

    def kv_elements_read(self, context: Num) -> Num:
        """Values one decode query reads at `context`: Σ_kind layers · values a token · read_tokens."""
        return sum((n * self.kv_elements_per_token_per_layer(k) * self.read_tokens(k, context)
                    for k, n in self.softmax_layer_kinds), 0 * context)

    def attention_flop_read(self, context: Num) -> Any:
        """FLOPs of one decode query's attention at `context`: Σ_kind layers · flop_per_pair · read_tokens."""
        return sum((n * self.attention_flop_per_pair(k) * self.read_tokens(k, context)
                    for k, n in self.softmax_layer_kinds), 0.0 * context)

    def kv_cache_bytes_per_token(self, bytes_per_element: float = 2.0) -> float:
        """Bytes of KV cache one token of context adds, all layers: 2·G·d·layers·bytes (Σ over the layer
        kinds where their shapes differ).

        Llama 3 70B in BF16: 2·8·128·80·2 = 327,680 B = 320 KiB, the published figure. Uncapped: a
        windowed layer counts every token here (`kv_cache_bytes` caps it at the window); linear-attention
        layers keep no KV cache (their state is per sequence: `state_bytes_per_sequence`). DeepSeek-V4:
        CompressedAttention.cache_elements_per_token (the window's row, the compressed entries, index keys)."""
        if self.compressed is not None:
            return self.compressed.cache_elements_per_token(bytes_per_element)
        return self.kv_elements_per_token() * bytes_per_element + self.index_bytes_per_token

    @property
    def index_bytes_per_token(self) -> int:
        """DeepSeek-V3.2: the indexer's FP8 key and its scale, every layer (SparseIndexer.key_bytes); MiniMax-M3:
        d_I values in the model's dtype a SPARSE layer (BlockSparse.key_bytes). Whatever the KV dtype, and never
        capped: the indexers score the whole context."""
        bs = self.block_sparse
        return ((0 if self.indexer is None else self.indexer_layers * self.indexer.key_bytes)
                + (0 if bs is None else self.attention_layers(AttentionKind.SPARSE) * bs.key_bytes))

    @property
    def indexer_layers(self) -> int:
        """Layers that run the lightning indexer: every layer but its `shared` ones (0 without DSA)."""
        return 0 if self.indexer is None else self.num_layers - len(self.indexer.shared)

    def cached_tokens(self, layer_kind: AttentionKind, context: Num) -> Num:
        """Tokens one layer keeps and reads at `context`: all of them, or min(L, W) for a windowed
        layer. `context` is an int or a numpy array of them."""
        if layer_kind == AttentionKind.LOCAL and self.sliding_window:
            return minimum(context, self.sliding_window)
        return context

    def read_tokens(self, layer_kind: AttentionKind, context: Num) -> Num:
        """Keys one decode query reads at `context`: cached_tokens, except under Llama 4's chunked
        attention, where the new token attends only its own chunk's tokens: (L − 1) mod C + 1."""
        if layer_kind == AttentionKind.LOCAL and self.sliding_window and self.attention_chunked:
            return (context - 1) % self.sliding_window + 1
        if layer_kind == AttentionKind.GLOBAL and self.indexer is not None:  # DSA: MLA reads the top-k rows
            return minimum(context, self.indexer.topk)
        if layer_kind == AttentionKind.SPARSE and self.block_sparse is not None:  # MiniMax-M3: the top-k blocks
            return self.block_sparse.keys(context)
        return self.cached_tokens(layer_kind, context)

    def decode_read_tokens(self, context: Num) -> Num:
        """Keys one decode query reads at `context`, summed over the KV layers (read_tokens per kind)."""
        out = sum((n * self.read_tokens(k, context) for k, n in self.softmax_layer_kinds), 0 * context)
        cp = self.compressed
        if cp is not None:  # DeepSeek-V4: + the compressed entries attended
            for m in cp.kinds:
                out = out + cp.layers(m) * cp.read_entries(m, context)
        return out

    def attended_tokens(self, context: Num) -> Num:
        """Tokens one sequence's layers keep and read at `context`, summed over layers: L per global
        layer, min(L, W) per windowed one. An int for an int, a numpy array for an array of lengths.

        Gemma 2 9B (21 global and 21 local layers, W = 4096) at 8192: 21·8192 + 21·4096."""
        out = sum((n * self.cached_tokens(k, context) for k, n in self.softmax_layer_kinds), 0 * context)
        cp = self.compressed
        if cp is not None:  # DeepSeek-V4: + the compressed entries kept, d wide each
            for m in cp.kinds:
                out = out + cp.layers(m) * (context // m)
        return out

    def kv_cache_bytes(self, batch: Num, context: Num, bytes_per_element: float = 2.0) -> Any:
        """KV cache for `batch` sequences of `context` tokens, windowed layers capped at the window
        (ints, or numpy arrays of them), plus each sequence's linear-attention state (its recurrent
        state in its own dtype, its conv state at `bytes_per_element`)."""
        state = self.state_bytes_per_sequence(bytes_per_element)
        index = batch * self.index_bytes_per_token * context if self.index_bytes_per_token else 0
        if self.compressed is not None:  # DeepSeek-V4: the window, the compressed entries and index keys
            return batch * self.compressed.cache_bytes(context, bytes_per_element) + (batch * state if state else 0)
        return (batch * bytes_per_element * self.kv_elements_cached(context) + (batch * state if state else 0)
                + index)

    @property
    def default_length(self) -> int:
        """DEFAULT_LENGTH, capped at the positions the model was trained for."""
        return min(DEFAULT_LENGTH, self.max_position_embeddings)

    def length(self, seq: int | None) -> int:
        """`seq`, or when None the default length (DEFAULT_LENGTH within max_position_embeddings)."""
        return self.default_length if seq is None else seq

    # --- parameter counts ------------------------------------------------------------------------
    def param_counts(self) -> ParamCounts:
        """Parameters by part; `total_params`, `active_params` and `matmul_params` are its sums."""
        return _param_counts(self)

    @property
    def total_params(self) -> int:
        return self.param_counts().total

    @property
    def active_params(self) -> int:
        """Parameters one token uses: routed experts counted at experts_per_token, not num_experts."""
        return self.param_counts().active

    @property
    def matmul_params(self) -> int:
        """Active parameters a token multiplies: active minus the embedding tables (gathered, not
        multiplied), norm gains and biases. 2 × this is a token's matmul FLOPs outside attention."""
        return self.param_counts().matmul

    def attention_flop_per_pair(self, kind: AttentionKind = AttentionKind.GLOBAL) -> float:
        """FLOPs per (query, key) pair per layer of `kind`: 2·H·(d_qk + d_v) for the two matmuls, the
        textbook 4·h when d_qk = d_v and H·d = h. Under MLA as run in decode the query and key are the
        latent (kv_lora_rank + rope = 576 wide) and the values the latent (512): 2·128·(576 + 512)."""
        if self.is_mla and self.mla != "expanded":
            return 2.0 * self.num_heads * (self.kv_lora_rank + self.qk_rope_head_dim + self.kv_lora_rank)
        return self.attention_shape(kind).flop_per_pair


def _param_counts(c: ModelConfig) -> ParamCounts:
    h = c.hidden_size
    counts: dict[str, int] = {}
    counts["embedding"] = c.vocab_size * h
    if c.learned_positions:
        counts["position_embedding"] = c.learned_positions * h
    counts["lm_head"] = 0 if c.tie_word_embeddings else c.vocab_size * h
    norm_params = 2 if c.norm == "layernorm" else 1  # LayerNorm: gain and bias
    norms = c.block_norms * (2 if c.sandwich_norm else 1) * norm_params * h + norm_params * h  # + the final norm
    biases = 0
    if c.is_mla:
        H, dn, dr, dv = c.num_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
        q = (h * c.q_lora_rank + c.q_lora_rank * H * (dn + dr)) if c.q_lora_rank else h * H * (dn + dr)
        kv = h * (c.kv_lora_rank + dr) + c.kv_lora_rank * H * (dn + dv)
        attn = q + kv + H * dv * h + (h * H * dv if c.attn_output_gate else 0)  # Kimi K3: g_proj h -> H·d_v
        # q_a_layernorm, kv_a_layernorm; on the MLA layers only (Kimi Linear's others are KDA)
        norms += c.kv_layers * (c.kv_lora_rank + (c.q_lora_rank or 0))
    else:  # per softmax layer kind, at its own shape (a gated q_proj gives the query and the gate)
        attn = c.attention_shape(AttentionKind.GLOBAL).linear_params(h)  # one full layer's, for MTP's
        for kind, A in c.softmax_layer_kinds:
            s = c.attention_shape(kind)
            if c.qkv_bias or c.linear_bias:
                biases += A * s.qkv_width
            if c.linear_bias or c.o_bias:
                biases += A * h
            if c.qk_norm:
                norms += A * ((s.heads + s.kv_heads) * s.head_dim if c.qk_norm_per_layer else 2 * s.head_dim)
    cp = c.compressed
    if cp is not None:  # DeepSeek-V4 (roofline.models.compressed): q_a_norm and kv_norm (q_b_norm has no gain)
        attn = cp.attention_params(h, c.num_heads)
        norms += c.num_layers * (cp.q_lora + cp.head_dim)
    counts["attention"] = (c.kv_layers * attn if c.is_mla or cp is not None
                           else sum(A * c.attention_shape(k).linear_params(h) for k, A in c.softmax_layer_kinds))
    if cp is not None:
        counts["compressor"] = sum(cp.layers(m) * cp.compressor_params(h, m) for m in cp.kinds)
        counts["index_query"] = cp.layers(cp.csa) * cp.index_query_params
        norms += sum(cp.layers(m) * cp.compressor_other(m) for m in cp.kinds)  # position_bias, kv_norm
        counts["mhc"], mhc_rest = cp.mhc_params(h)
        norms += mhc_rest  # mHC's base and scale: added and multiplied by, not a matmul
    if c.indexer is not None:
        counts["indexer"] = c.indexer_layers * c.indexer.linear_params(h, c.q_lora_rank)
        norms += c.indexer_layers * 2 * c.indexer.head_dim  # k_norm, a LayerNorm: gain and bias
    if c.block_sparse is not None:  # MiniMax-M3's indexer: q_proj, k_proj; q_norm and k_norm of d_I each
        counts["indexer"] = c.attention_layers(AttentionKind.SPARSE) * c.block_sparse.linear_params(h)
        norms += c.attention_layers(AttentionKind.SPARSE) * 2 * c.block_sparse.index_dim
    if c.linear_attention is not None:
        counts["linear_attention"] = c.attention_layers(AttentionKind.LINEAR) * c.linear_attention.layer_params(h)
    if c.mamba is not None:
        counts["mamba"] = c.attention_layers(AttentionKind.MAMBA) * c.mamba.linear_params(h)
        counts["mamba_conv_and_gains"] = c.attention_layers(AttentionKind.MAMBA) * c.mamba.other_params
    mlp_mats = 3 if c.gated else 2
    dense_width = sum(c.ffn_widths) if c.ffn_widths else c.dense_layers * c.intermediate_size  # NAS: each its own
    counts["mlp"] = mlp_mats * h * dense_width
    if c.linear_bias:
        biases += dense_width + c.dense_layers * h
    if c.is_moe:
        per_expert = mlp_mats * (c.moe_latent_size or h) * c.moe_intermediate_size  # LatentMoE: in the latent
        counts["router"] = c.moe_layers * h * (c.num_experts + (1 if c.shared_expert_gate else 0))
        norms += c.moe_layers * c.moe_gains  # gains and scales: not multiplied
        # DeepSeek-V3's e_score_correction_bias: added to the scores to pick experts, not multiplied
        biases += (c.moe_layers - c.hash_layers) * c.num_experts if c.router_bias else 0  # hash routers: none
        counts["shared_experts"] = c.moe_layers * c.num_shared_experts * mlp_mats * h * c.moe_intermediate_size
        if c.moe_latent_size:  # fc1_latent_proj h -> ℓ and fc2_latent_proj ℓ -> h, once a token; K3's norm's gain
            counts["latent_proj"] = c.moe_layers * 2 * h * c.moe_latent_size
            norms += c.moe_layers * c.moe_latent_size if c.moe_latent_norm else 0
        counts["experts"] = c.moe_layers * c.num_experts * per_expert
    counts["norms"] = norms
    counts["biases"] = biases
    sinks = sum(n * c.attention_shape(k).heads for k, n in c.softmax_layer_kinds if c.attention_shape(k).sinks)
    if sinks:  # per layer kind: MiMo-V2-Flash's sliding layers have them, its full layers not
        counts["sinks"] = sinks
    if c.expert_bias:
        counts["expert_biases"] = c.moe_layers * c.num_experts * (2 * c.moe_intermediate_size + h)
    if c.vision_params:
        counts["vision"] = c.vision_params
    if c.attn_res is not None:  # gains and pseudo-queries: the mix's vector work (roofline.models.attn_res)
        counts["attn_res"] = c.attn_res.params(h)
    if c.mtp_layers and cp is not None:  # DeepSeek-V4: a Block of its own kind (roofline.models.compressed)
        counts.update(compressed_mtp_parts(cp, c))
    elif c.mtp_layers:
        gqa = not c.is_mla and c.kv_layers == c.num_layers and c.uniform_attention  # MiMo-7B; GLM-4.5 with MoE
        if not (c.is_mla and c.is_moe) and c.linear_attention is None and not gqa:
            raise RooflineError(f"model {c.name}: multi-token-prediction layers are read for DeepSeek-V3's, GLM-5's, "
                                f"Qwen3-Next's and a uniform GQA stack's (MiMo's, GLM-4.5's) layouts only")
        counts.update(mtp_parts(c, attn))
    active = dict(counts)
    for part in MTP_PARTS:
        if part in active:
            active[part] = 0  # the main step runs without them (roofline.models.mtp)
    if c.vision_params:
        active["vision"] = 0  # a text token does not run the vision tower
    if c.is_moe:
        active["experts"] = c.moe_layers * c.experts_per_token * per_expert
    if c.expert_bias:
        active["expert_biases"] = c.moe_layers * c.experts_per_token * (2 * c.moe_intermediate_size + h)
    # gathered tables, norm gains and biases are not multiplied; a tied LM head is (it reuses the table)
    tied_head = c.vocab_size * h if c.tie_word_embeddings else 0
    added = counts.get("sinks", 0) + active.get("expert_biases", 0) + counts.get("attn_res", 0)  # not multiplied
    if c.linear_attention is not None:  # the conv taps, dt_bias, A_log and the gated norm's gain: not a matmul
        added += c.attention_layers(AttentionKind.LINEAR) * c.linear_attention.vector_params
    added += counts.get("mamba_conv_and_gains", 0)  # the conv taps, dt_bias, A_log, D and gain: not a matmul
    if c.mamba is not None and c.mamba.proj_bias:
        added += c.attention_layers(AttentionKind.MAMBA) * (c.mamba.in_width + h)
    matmul = (sum(active.values()) - counts["embedding"] - counts.get("position_embedding", 0) - norms - biases
              - added + tied_head)
    return ParamCounts(MappingProxyType(counts), MappingProxyType(active), matmul)


__all__ = ["DEFAULT_LENGTH", "LOGITS", "MLA_MODES", "SOFTMAX_KINDS", "AttentionKind", "BlockSparse", "LinearAttention",
           "Mamba2", "MlpKind", "ModelConfig", "ParamCounts", "SparseIndexer"]
