"""The graph of one forward step of a transformer, for prefill or decode, and its three fusion plans.

One step is a `roofline.graph.Graph` of ops over named tensors (roles: weight, kv_cache,
activation). Layers are not repeated op by op: an op carries `count`, the number of layers that run
it. Shapes, with N = batch × tokens per sequence (the prompt length in prefill, 1 in decode):

    embedding      gather N rows of the table (not a weight stream)          -> resid [N, h]
    attn_norm      RMSNorm/LayerNorm                                          -> [N, h]
    qkv_proj       one GEMM for q, k, v (as serving engines fuse them)        -> [N, (H + 2G)·d]
    rope           rotary embedding of q and k; writes the new K and V into the cache (persistent)
    attn.qk / attn.softmax / attn.pv   causal GQA attention (roofline.kernels.attention_ops);
                   decode reads the whole cache [B, G, L, d]; a sliding window caps L at the window
    o_proj, attn_residual, mlp_norm
    gate_up_proj, act, down_proj       (SwiGLU/GeGLU; GPT-2: up, GELU, down)
    or MoE: router, topk, dispatch, experts.gate_up, experts.act, experts.down, shared.*, combine
    mlp_residual, final_norm, lm_head  (prefill: only the last token of each sequence needs logits;
                   ModelConfig.logits "all" projects every position, as a plain forward() does)

MLA (DeepSeek-V3) in decode runs as DeepSeek runs it: W_UK absorbed into the query and W_UV into
the output, attention over the compressed latent cache of kv_lora_rank + qk_rope_head_dim values
per token per layer (one shared "head" of 576). Prefill decompresses K and V (kv_b_proj) and runs
ordinary multi-head attention, as DeepSeek's prefill does. ModelConfig.mla "expanded" runs decode as
Hugging Face's DeepseekV3Attention does: the new token's latent decompressed by kv_b_proj and K, V
cached and read per head (H·(d_nope + d_rope + d_v) values per token per layer instead of 576).
Gated DeltaNet (roofline.models.deltanet), Mamba2 (roofline.models.mamba), DeepSeek-V4's attention and mHC
(roofline.models.compressed_ops) and Kimi K3's attention residuals (roofline.models.attn_res_ops) are layer kinds of
their own. MoE weight traffic depends on how many
distinct experts the step's tokens hit. Default: the expectation when each of the N tokens picks k of E
experts uniformly at random and independently, E·(1 − (1 − k/E)^N), rounded to a whole expert and at
least k (`roofline.models.formulas`, shared with the numpy step model, as is the windowed pair count).
Real routers are not uniform (hot experts): the default is a stated assumption; `experts_hit` overrides it.
Fusion plans over the same graph (same FLOPs, fewer bytes):
  none   every op its own kernel; attention naive (scores and probabilities through memory)
  flash  attention's three ops one kernel (FlashAttention), the default, as serving engines run it
  fused  also each norm into the matmul that reads it, the activation into its matmul's epilogue,
         and the residual add into the epilogue of the matmul before it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from types import MappingProxyType

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.graph import FusionPlan, Graph, Op, Tensor
from roofline.kernels import FLOP_PER_ELEMENT, attention_ops, elementwise_op, matmul_op, norm_op
from roofline.models.dtypes import ModelDtypes, for_checkpoint, model_dtypes, weight_part
from roofline.models.formulas import experts_hit, experts_read_per_device
from roofline.models.split import Comm, check_moe_rows, check_split, comm_for, sequence_split, shard
from roofline.models.transformer import AttentionKind, MlpKind, ModelConfig
from roofline.models.windows import windowed
from roofline.parallel import Collective, CollectiveCall, Split, collective_op
from roofline.parallel.algorithms import AllReduceRule, all_reduce_op
from roofline.units import require_positive_int
from roofline.vocab import Level, Phase, Plan, Role, Unit

# The ops of a layer kind few models have (Gated DeltaNet and KDA, Mamba2, MLA, MiniMax-M3's block-sparse
# indexer, DeepSeek-V4's compressed attention and mHC, Kimi K3's attention residuals, MTP drafts, expert
# parallelism, LatentMoE, shared experts) are imported where the step first reaches them: a Llama step's
# graph loads none of their eleven modules (bench/bench_startup.py).

PLANS = (Plan.NONE, Plan.FLASH, Plan.FUSED)  # the plans a model step is analysed under
DEFAULT_PLAN = Plan.FLASH  # as serving engines run attention


def as_phase(phase: Phase | str) -> Phase:
    """`phase` as a Phase, or an error naming the phases."""
    if phase not in tuple(Phase):
        raise RooflineError(f"unknown phase {phase!r}; phases: {', '.join(Phase)}")
    return Phase(phase)


def as_plan(plan: Plan | str) -> Plan:
    """`plan` as one of the PLANS a model step is analysed under, or an error naming them."""
    if plan not in PLANS:
        raise RooflineError(f"unknown fusion plan {plan!r}; plans: {', '.join(PLANS)}")
    return Plan(plan)


@frozen
class StepShape:
    """One forward step: `batch` sequences; prefill runs `seq` prompt tokens of each, decode one new
    token of each against `seq` tokens of context (the new token's own K/V included)."""

    phase: Phase
    batch: int
    seq: int

    @property
    def tokens_per_sequence(self) -> int:
        return self.seq if self.phase == Phase.PREFILL else 1

    @property
    def tokens(self) -> int:
        """N: tokens the weights are applied to in this step."""
        return self.batch * self.tokens_per_sequence


@frozen
class ModelGraph:
    """A step's graph with its plans, and what it was built from."""

    config: ModelConfig
    shape: StepShape
    dtypes: ModelDtypes
    graph: Graph
    plans: Mapping[Plan, FusionPlan]
    experts_hit: int | None = None  # per MoE layer, as used
    experts_hit_override: int | None = None  # as asked for (None: the uniform-routing expectation)
    warnings: tuple[str, ...] = field(default=())
    split: Split = field(default_factory=Split)  # the graph is one device's when the split is not trivial
    comm: Comm | None = None
    collectives: Mapping[str, CollectiveCall] = field(default_factory=dict)  # by op name

    def plan(self, name: Plan | str) -> FusionPlan:
        if name not in self.plans:
            raise RooflineError(f"unknown fusion plan {name!r}; plans: {', '.join(self.plans)}")
        return self.plans[Plan(name)]


class _Builder:
    def __init__(self, cfg: ModelConfig, shape: StepShape, dtypes: ModelDtypes, hit: int | None,
                 comm: Comm | None = None, full_vocab: int | None = None) -> None:
        self.cfg = cfg  # one device's share of the widths (roofline.models.split.shard)
        self.comm = comm or Comm(Split())
        self.collectives: dict[str, CollectiveCall] = {}
        self.full_vocab = full_vocab or cfg.vocab_size
        self.shape = shape
        self.dt = dtypes
        self.hit = hit
        self.ops: list[Op] = []
        self.flash: dict[str, tuple[str, ...]] = {}
        self.fused: dict[str, tuple[str, ...]] = {}
        self.n = shape.tokens
        self.b = shape.batch
        self.t = shape.tokens_per_sequence
        self.layers = cfg.num_layers

    # --- helpers ---------------------------------------------------------------------------------
    def act(self, name: str, shape: Sequence[int]) -> Tensor:
        return Tensor(name, tuple(shape), self.dt.activations)

    def weight(self, name: str, shape: Sequence[int]) -> Tensor:
        """A weight tensor, in the dtype its parameter part is stored in (ModelDtypes.weight_dtype)."""
        return Tensor(name, tuple(shape), self.dt.weight_dtype(weight_part(name)), Role.WEIGHT)

    def gain(self, name: str, width: int) -> tuple[Tensor, ...]:
        """A norm's parameters: the gain, and for LayerNorm the bias. Kept in the activation dtype."""
        g = Tensor(f"{name}.weight", (width,), self.dt.activations, Role.WEIGHT)
        if self.cfg.norm == "layernorm":
            return g, Tensor(f"{name}.bias", (width,), self.dt.activations, Role.WEIGHT)
        return (g,)

    def bias(self, name: str, width: int, on: bool) -> tuple[Tensor, ...]:
        return (Tensor(f"{name}.bias", (width,), self.dt.activations, Role.WEIGHT),) if on else ()

    def add(self, op: Op) -> str:
        self.ops.append(op)
        return op.name

    def norm(self, name: str, x: Tensor, out: Tensor, count: int) -> str:
        g = self.gain(name, x.shape[-1])
        return self.add(norm_op(name, self.cfg.norm, x, g[0], out, count, extra=g[1:]))

    def fuse(self, *names: str) -> None:
        names = tuple(n for n in names if n)
        if len(names) > 1:
            self.fused["+".join(names)] = names

    def collective(self, name: str, kind: Collective, message: Tensor, out: Tensor, group: int, level: Level,
                   count: int = 1) -> str:
        """A collective as a kernel of its own, remembered with its group and roof for the report."""
        s = out.bytes if kind is Collective.ALL_GATHER else message.bytes  # nccl-tests' size S
        self.collectives[name] = CollectiveCall(kind, group, level, float(s))
        return self.add(collective_op(name, kind, message, out, group, level, count))

    def reduce(self, name: str, partial: Tensor, out: Tensor, count: int) -> str:
        """Tensor parallel: the partial sums all-reduced (Megatron's g) by the algorithm run for its size."""
        rule = AllReduceRule(self.cfg.allreduce, self.comm.nvls)  # --allreduce (auto: roofline.parallel.algorithms)
        op, self.collectives[name] = all_reduce_op(name, partial, out, self.comm.tp, self.comm.tp_level, rule, count)
        return self.add(op)

    def tp_out(self, name: str, out: Tensor) -> Tensor:
        """Where an op whose result is a tp partial sum writes: `out` itself on one device, else a partial."""
        return out if self.comm.tp == 1 else self.act(f"{name}.partial", out.shape)

    # --- blocks ----------------------------------------------------------------------------------
    def embedding(self, resid: Tensor) -> None:
        cfg, n, h = self.cfg, self.n, self.cfg.hidden_size
        rows = self.weight("embed_tokens.rows", (n, h))
        inputs = [rows]
        flop = 0.0
        formula = f"gather {n} rows of the {cfg.vocab_size}×{h} table: no FLOPs; only the rows are read"
        if cfg.learned_positions:
            inputs.append(self.weight("position_embeddings.rows", (n, h)))
            flop = float(n * h)
            formula += f"; + position rows: 1·N·h = {n}·{h}"
        elif cfg.sandwich_norm:  # Gemma scales the embedding by sqrt(h)
            flop = float(n * h)
            formula += f"; × sqrt(h): 1·N·h = {n}·{h}"
        if self.comm.tp > 1:
            formula += f"; vocab-parallel: this device's {cfg.vocab_size} of {self.full_vocab} rows"
        partial = self.tp_out("embedding", resid)
        self.add(Op("embedding", "embedding", tuple(inputs), (partial,), {Unit.VECTOR: flop} if flop else {}, 1,
                    formula=formula))
        if partial is not resid:
            self.reduce("embedding.all_reduce", partial, resid, 1)

    def attention_block(self, resid: Tensor, hidden: Tensor) -> None:
        """The token mixers: softmax attention on its layers, Gated DeltaNet (or KDA) and Mamba2 on theirs. Softmax
        layers of one shape share their ops (count = their layers); where a layer kind has a shape of its
        own (Gemma 4's full layers), each kind runs its own norm, projections, attention and residual."""
        cfg = self.cfg
        if linear := cfg.attention_layers(AttentionKind.LINEAR):
            from roofline.models.kda import linear_mixer

            linear_mixer(self, resid, hidden, linear)
        if ssm := cfg.attention_layers(AttentionKind.MAMBA):
            from roofline.models.mamba import mamba2

            mamba2(self, resid, hidden, ssm)
        groups = cfg.softmax_layer_kinds
        if groups and (cfg.is_mla or cfg.uniform_attention):
            self.layers = cfg.kv_layers  # the softmax-attention ops run on these layers only
            self.softmax_attention(resid, hidden, tuple(k for k, _ in groups), "")
        elif groups:
            for kind, count in groups:
                self.layers = count
                self.softmax_attention(resid, hidden, (kind,), f"{kind}.")
        self.layers = cfg.num_layers

    def softmax_attention(self, resid: Tensor, hidden: Tensor, kinds: tuple[AttentionKind, ...], p: str) -> None:
        """Softmax attention on the layers of `kinds`, at their one shape; `p` prefixes every name
        (empty when all softmax layers share one shape)."""
        cfg, n, h, layers = self.cfg, self.n, self.cfg.hidden_size, self.layers
        shape = cfg.attention_shape(kinds[0])
        x = self.act(f"{p}attn_norm.out", (n, h))
        norm = self.norm(f"{p}attn_norm", resid, x, layers)
        attn_out = self.act(f"{p}attn.out", (n, shape.out_width))
        if cfg.is_mla:
            from roofline.models.mla import mla

            mla(self, x, attn_out, norm)
        else:
            self.gqa(x, attn_out, norm, kinds, p)
        if cfg.attn_output_gate:  # out · sigmoid(gate): Qwen3-Next's gate from q_proj's second half, K3's g_proj
            gated = self.act(f"{p}attn.gated", attn_out.shape)
            per = FLOP_PER_ELEMENT["silu"] + FLOP_PER_ELEMENT["mul"]
            width = attn_out.shape[-1]
            gate = self.act(f"{p}attn.gate", (n, width))
            if cfg.is_mla:  # Kimi K3 (TensorRT-LLM KimiK3MLAAttention): g_proj h -> H·d_v from the normed input
                self.add(matmul_op(f"{p}g_proj", x, self.weight(f"{p}g_proj.weight", (h, width)), gate, layers))
            self.add(Op(f"{p}attn.output_gate", "sigmoid_gate", (attn_out, gate),
                        (gated,), {Unit.VECTOR: float(per * n * width)}, layers,
                        formula=f"out · sigmoid(gate): {per:g}·N·H·d = {per:g}·{n}·{width}"))
            attn_out = gated
        o = self.act(f"{p}o_proj.out", (n, h))
        o_part = self.tp_out(f"{p}o_proj", o)
        o_proj = self.add(matmul_op(f"{p}o_proj", attn_out, self.weight(f"{p}o_proj.weight", (shape.out_width, h)),
                                    o_part, layers,
                                    extra_inputs=self.bias(f"{p}o_proj", h, cfg.linear_bias or cfg.o_bias)))
        if o_part is not o:
            o_proj = self.reduce(f"{p}attn.all_reduce", o_part, o, layers)  # the residual add can't enter the GEMM
        if cfg.sandwich_norm:
            o_n = self.act(f"{p}post_attn_norm.out", (n, h))
            post = self.norm(f"{p}post_attn_norm", o, o_n, layers)
            res = self.add(elementwise_op(f"{p}attn_residual", "add", (resid, o_n), hidden, layers))
            self.fuse(post, res)  # a norm after a matmul reduces whole rows: fused with the add, not the GEMM
        else:
            res = self.add(elementwise_op(f"{p}attn_residual", "add", (resid, o), hidden, layers))
            if o_part is o:  # after an all-reduce the add stays a kernel of its own
                self.fuse(o_proj, res)

    def gqa(self, x: Tensor, attn_out: Tensor, norm: str, kinds: tuple[AttentionKind, ...], p: str) -> str:
        cfg, n, b, t, layers = self.cfg, self.n, self.b, self.t, self.layers
        s = cfg.attention_shape(kinds[0])  # every kind of this group runs it (ModelConfig.uniform_attention)
        H, G, d, dv = s.heads, s.kv_heads, s.head_dim, s.v_head_dim
        width = s.qkv_width  # a gated q_proj gives query and gate; K=V: one projection gives K and V
        qkv = self.act(f"{p}qkv", (n, width))
        proj = self.add(matmul_op(f"{p}qkv_proj", x, self.weight(f"{p}qkv_proj.weight", (cfg.hidden_size, width)),
                                  qkv, layers,
                                  extra_inputs=self.bias(f"{p}qkv_proj", width, cfg.qkv_bias or cfg.linear_bias)))
        self.fuse(norm, proj)
        q = self.act(f"{p}q", (b, H, t, d))
        k_new = Tensor(f"{p}k.new", (b, G, t, d), self.dt.kv_cache, Role.KV_CACHE, persistent=True)
        v_new = Tensor(f"{p}v.new", (b, G, t, dv), self.dt.kv_cache, Role.KV_CACHE, persistent=True)
        inputs: tuple[Tensor, ...] = (qkv,)
        if cfg.learned_positions or cfg.nope:  # GPT-2's positions are in the embedding; Nemotron-H has none
            self.add(Op(f"{p}kv_write", "kv_write", inputs, (q, k_new, v_new), {}, layers,
                        formula="split q, k, v and write k, v into the cache: no FLOPs"))
        else:
            rope, rd = FLOP_PER_ELEMENT["rope"], s.rotated  # partial rotary: the first rd dims
            roped = sum(c for k, c in cfg.softmax_layer_kinds if k in kinds
                        and (cfg.rope_global or k != AttentionKind.GLOBAL))  # Llama 4: NoPE
            flop = rope * n * (H + G) * rd * roped / layers
            formula = f"{rope:g}·N·(H+G)·{'d' if rd == d else 'rotary_dims'} = {rope:g}·{n}·{H + G}·{rd}"
            if roped != layers:
                formula += f" on {roped} of {layers} layers (the rest NoPE), averaged over them"
            name, kind = "rope", "rope"
            if cfg.qk_norm:
                per = FLOP_PER_ELEMENT["rmsnorm"]
                flop += per * n * (H + G) * d
                formula = f"RMSNorm {per:g}·N·(H+G)·d + RoPE {formula}"
                qn, kn = (H * d, G * d) if cfg.qk_norm_per_layer else (d, d)  # MiniMax-M2: over the whole q, k
                inputs += (Tensor(f"{p}q_norm.weight", (qn,), self.dt.activations, Role.WEIGHT),
                           Tensor(f"{p}k_norm.weight", (kn,), self.dt.activations, Role.WEIGHT))
                name, kind = "qk_norm_rope", "qk_norm+rope"
            if cfg.v_norm:  # Gemma 4: V normed without a gain
                vn = FLOP_PER_ELEMENT["rmsnorm"]
                flop += vn * n * G * dv
                formula += f" + v_norm {vn:g}·N·G·d_v = {vn:g}·{n}·{G}·{dv}"
            self.add(Op(f"{p}{name}", kind, inputs, (q, k_new, v_new), {Unit.VECTOR: float(flop)}, layers,
                        formula=formula + "; writes the new K and V into the cache"))
        if AttentionKind.SPARSE in kinds:  # MiniMax-M3: the indexer picks the key blocks its layers attend
            from roofline.models.msa import block_sparse_indexer, sparse_prefill

            block_sparse_indexer(self, x, cfg.attention_layers(AttentionKind.SPARSE))
        for kind in kinds:
            count = cfg.attention_layers(kind)
            prefix = p + self.attn_prefix(kind, kinds)
            window = cfg.sliding_window if kind == AttentionKind.LOCAL else None
            if self.shape.phase == Phase.PREFILL:
                ops = attention_ops(prefix, q, k_new, v_new, attn_out, causal=True, count=count,
                                    scores_dtype=self.dt.activations)
                ops = windowed(ops, t, window, cfg.attention_chunked)
                if kind == AttentionKind.SPARSE and cfg.block_sparse is not None:
                    ops = sparse_prefill(ops, t, cfg.block_sparse)
            else:
                cached = cfg.read_tokens(kind, self.shape.seq)  # chunked: the new token's own chunk
                kc = Tensor(f"{prefix}.k_cache", (b, G, cached, d), self.dt.kv_cache, Role.KV_CACHE)
                vc = Tensor(f"{prefix}.v_cache", (b, G, cached, dv), self.dt.kv_cache, Role.KV_CACHE)
                ops = attention_ops(prefix, q, kc, vc, attn_out, causal=True, count=count,
                                    scores_dtype=self.dt.activations)
            for op in ops:
                self.add(op)
            self.flash[prefix] = tuple(op.name for op in ops)
        return proj

    def attn_prefix(self, kind: AttentionKind, kinds: tuple[AttentionKind, ...]) -> str:
        return f"attn.{kind}" if len(kinds) > 1 else "attn"

    def mlp_block(self, hidden: Tensor, resid: Tensor, kind: MlpKind, count: int, prefix: str) -> None:
        cfg, n, h = self.cfg, self.n, self.cfg.hidden_size
        p = prefix
        x = self.act(f"{p}mlp_norm.out", (n, h))
        norm = self.norm(f"{p}mlp_norm", hidden, x, count)
        out = self.act(f"{p}mlp.out", (n, h))
        part = self.tp_out(f"{p}mlp", out) if kind == MlpKind.DENSE or self.comm.ep == 1 else out
        gathered = kind == MlpKind.MOE and sequence_split(self.comm.split)  # ends in the tp all-gather
        if kind == MlpKind.MOE:
            last = self.moe(x, part, count, p, norm)
        else:
            last = self.dense(x, part, count, p, norm)
        if part is not out:
            last = self.reduce(f"{p}mlp.all_reduce", part, out, count)
        if cfg.sandwich_norm:
            out_n = self.act(f"{p}post_mlp_norm.out", (n, h))
            post = self.norm(f"{p}post_mlp_norm", out, out_n, count)
            res = self.add(elementwise_op(f"{p}mlp_residual", "add", (hidden, out_n), resid, count))
            self.fuse(post, res)
        else:
            res = self.add(elementwise_op(f"{p}mlp_residual", "add", (hidden, out), resid, count))
            if part is out and not gathered:  # after a collective the add stays a kernel of its own
                self.fuse(last, res)

    def dense(self, x: Tensor, out: Tensor, count: int, p: str, norm: str) -> str:
        cfg, n, h, f = self.cfg, self.n, self.cfg.hidden_size, self.ffn
        a = self.act(f"{p}act.out", (n, f))
        if cfg.gated:
            gu = self.act(f"{p}gate_up", (n, 2 * f))
            mm = self.add(matmul_op(f"{p}gate_up_proj", x, self.weight(f"{p}gate_up_proj.weight", (h, 2 * f)), gu,
                                    count))
            act = self.add(elementwise_op(f"{p}act", cfg.activation, (gu,), a, count))
        else:
            up = self.act(f"{p}up", (n, f))
            mm = self.add(matmul_op(f"{p}up_proj", x, self.weight(f"{p}up_proj.weight", (h, f)), up, count,
                                    extra_inputs=self.bias(f"{p}up_proj", f, cfg.linear_bias)))
            act = self.add(elementwise_op(f"{p}act", cfg.activation, (up,), a, count))
        self.fuse(norm, mm, act)
        return self.add(matmul_op(f"{p}down_proj", a, self.weight(f"{p}down_proj.weight", (f, h)), out, count,
                                  extra_inputs=self.bias(f"{p}down_proj", h, cfg.linear_bias)))

    def moe(self, x: Tensor, out: Tensor, count: int, p: str, norm: str) -> str:
        cfg, n, h = self.cfg, self.n, self.cfg.hidden_size
        e, k, fe = cfg.num_experts, cfg.experts_per_token, cfg.moe_intermediate_size
        ep = self.comm.ep
        hit = self.hit if self.hit is not None else e
        # expert parallel: this device holds e/ep experts and reads the weights of those the group's
        # tokens hit on it (its tokens go out to the group and as many come back); with tensor-parallel
        # attention each of the tp ranks takes N/tp of the replica's N tokens (a sequence split)
        tp = self.comm.tp if sequence_split(self.comm.split) else 1
        nm = n // tp
        xm = x if tp == 1 else self.act(f"{p}mlp_norm.out.rows", (nm, h))
        local = out if tp == 1 else self.act(f"{p}mlp.out.rows", (nm, h))
        slots = e + cfg.redundant_experts  # E routed experts and R replicas over the ep group
        hit_here = experts_read_per_device(hit, e, cfg.redundant_experts, ep)
        gates = e + (1 if cfg.shared_expert_gate else 0)  # Qwen3-Next/3.5: the shared expert's gate rides along
        logits = self.act(f"{p}router.logits", (nm, gates))
        router = self.add(matmul_op(f"{p}router", xm, self.weight(f"{p}router.weight", (h, gates)), logits, count,
                                    extra_inputs=self.bias(f"{p}router", e, cfg.router_bias)))
        route = self.act(f"{p}router.topk", (nm, k))
        sm = FLOP_PER_ELEMENT["softmax"]
        topk = self.add(Op(f"{p}topk", "topk", (logits,), (route,), {Unit.VECTOR: float(sm * nm * e)}, count,
                           formula=f"softmax over the experts {sm:g}·N·E = {sm:g}·{nm}·{e}, then keep the top {k}",
                           note="the expert ids travel with the weights; their bytes are not counted"
                                + ("" if tp == 1 else f"; this tp rank's {nm} of the replica's {n} tokens")))
        self.fuse(norm if tp == 1 else "", router, topk)  # the norm runs on all N rows, the router on N/tp
        rows, lw = nm * k, cfg.moe_latent_size or h  # LatentMoE: the experts run in the latent width
        if cfg.moe_latent_size:
            from roofline.models.latent import latent_in, latent_out
        if ep > 1 or cfg.num_shared_experts:
            from roofline.models.experts import combine_ops, dispatch_ops, shared_experts
        xe = xm if not cfg.moe_latent_size else latent_in(self, xm, count, p)
        dispatch = ""
        if ep == 1:
            routed = self.act(f"{p}experts.in", (rows, lw))
            dispatch = self.add(Op(f"{p}dispatch", "gather", (xe, route), (routed,), {}, count,
                                   formula=f"copy each token's row to its {k} experts: N·k = {nm}·{k} rows, no FLOPs"))
        else:  # uniform routing: as many rows arrive from the group as leave (roofline.models.experts)
            routed = dispatch_ops(self, p, xe, route, nm, count)
        replicas = f" + {cfg.redundant_experts} replicas" if cfg.redundant_experts else ""
        where = ("" if ep == 1 else f", {slots // ep} of {e}{replicas} slots on this device ({hit_here} hit here: "
                 f"{hit} / ep {ep})")
        note = (f"reads the weights of {hit} of {e} experts{where}: the expected distinct experts "
                f"{nm * ep} tokens × {k} uniform picks hit, E·(1 − (1 − k/E)^N), rounded "
                f"(override: experts_hit)")
        m = 2 if cfg.gated else 1  # gate and up, or up alone (Nemotron-H's ReLU² experts)
        gu = self.act(f"{p}experts.gate_up", (rows, m * fe))
        w_gu = self.weight(f"{p}experts.gate_up.weight", (hit_here, lw, m * fe))
        b_gu = self.bias(f"{p}experts.gate_up", hit_here * m * fe, cfg.expert_bias)  # gpt-oss: one per expert
        egu = self.add(Op(f"{p}experts.gate_up", "grouped_matmul", (routed, w_gu, *b_gu), (gu,),
                          {Unit.MATRIX: 2.0 * rows * lw * m * fe}, count,
                          formula=f"2·(N·k)·{'ℓ' if lw != h else 'h'}·{m}f = 2·{rows}·{lw}·{m * fe}", note=note))
        ea = self.act(f"{p}experts.act.out", (rows, fe))
        eact = self.add(elementwise_op(f"{p}experts.act", cfg.activation, (gu,), ea, count))
        self.fuse(dispatch, egu, eact)
        eo = self.act(f"{p}experts.out", (rows, lw))
        w_d = self.weight(f"{p}experts.down.weight", (hit_here, fe, lw))
        b_d = self.bias(f"{p}experts.down", hit_here * h, cfg.expert_bias)
        self.add(Op(f"{p}experts.down", "grouped_matmul", (ea, w_d, *b_d), (eo,), {Unit.MATRIX: 2.0 * rows * fe * lw},
                    count, formula=f"2·(N·k)·f·{'ℓ' if lw != h else 'h'} = 2·{rows}·{fe}·{lw}", note=note))
        if ep > 1:
            eo = combine_ops(self, p, eo, count)
        if cfg.moe_latent_size:  # the weighted sum in the latent, then fc2_latent_proj back to h
            eo = latent_out(self, eo, route, count, p)
        inputs: tuple[Tensor, ...] = (eo,) if cfg.moe_latent_size else (eo, route)
        flop = 0.0 if cfg.moe_latent_size else 2.0 * k * nm * h
        formula = ("the latent experts' sum, projected" if cfg.moe_latent_size
                   else f"weighted sum of k expert rows: 2·k·N·h = 2·{k}·{nm}·{h}")
        if cfg.num_shared_experts:
            inputs += (shared_experts(self, xm, nm, m, fe, count, p),)
            flop += nm * h
            formula += f" + the shared experts' output N·h = {nm}·{h}"
        last = self.add(Op(f"{p}combine", "moe_combine", inputs, (local,), {Unit.VECTOR: flop}, count,
                           formula=formula))
        if local is not out:  # every tp rank's N/tp rows, gathered back into the replica's [N, h]
            last = self.collective(f"{p}mlp.all_gather", Collective.ALL_GATHER, local, out, self.comm.tp,
                                   self.comm.tp_level, count)
        return last

    def final(self, resid: Tensor) -> None:
        cfg, b, h = self.cfg, self.b, self.cfg.hidden_size
        # prefill: only the last token of each sequence needs logits, so only its row is normed and
        # projected; logits "all" (a plain forward()) projects every position: N rows instead of B
        every = self.shape.phase == Phase.DECODE or cfg.logits == "all"
        rows = self.n if every else b
        x = resid if every else self.act("resid.last", (b, h))
        if cfg.compressed is not None:  # DeepSeek-V4: hc_head collapses the streams first
            from roofline.models.compressed_ops import mhc_head

            x = mhc_head(self, resid, rows)
        if cfg.attn_res is not None:  # Kimi K3: the head's mix
            from roofline.models.attn_res_ops import attn_res_head

            x = attn_res_head(self, resid, rows)
        y = self.act("final_norm.out", (rows, h))
        norm = self.norm("final_norm", x, y, 1)
        head = "embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"
        logits = self.act("logits", (rows, cfg.vocab_size))
        mm = self.add(matmul_op("lm_head", y, self.weight(head, (h, cfg.vocab_size)), logits, 1))
        self.fuse(norm, mm)
        if self.comm.tp > 1:  # vocab-parallel LM head: every device's slice of the logits, gathered
            self.collective("logits.all_gather", Collective.ALL_GATHER, logits,
                            self.act("logits.gathered", (rows, self.full_vocab)), self.comm.tp, self.comm.tp_level)

    def build(self) -> tuple[list[Op], dict[Plan, FusionPlan]]:
        """The step's ops in execution order and its fusion plans (self.collectives fills as it goes)."""
        cfg, n, h = self.cfg, self.n, self.cfg.hidden_size
        resid = self.act("resid", (n, h))  # the residual stream between layers (layer input and output)
        hidden = self.act("hidden", (n, h))  # the residual stream after attention
        if cfg.mtp_draft:  # an MTP module as the draft: its input projection first (roofline.models.draft)
            from roofline.models.draft import mtp_input, mtp_streams

            self.embedding(embedded := self.act("mtp.embedded", (n, h)))
            resid = mtp_streams(self, embedded) if cfg.compressed is not None else resid  # DeepSeek-V4's streams
            if cfg.compressed is None:
                mtp_input(self, embedded, resid)
        else:
            self.embedding(resid)
        if cfg.attn_res is not None:  # Kimi K3: the mixes before each norm (roofline.models.attn_res)
            from roofline.models.attn_res_ops import attn_res_layers

            attn_res_layers(self, resid)
        if cfg.compressed is None:
            self.attention_block(resid, hidden)
        if cfg.compressed is not None:  # mHC's streams
            from roofline.models.compressed_ops import streams_step

            resid = streams_step(self, resid, not cfg.mtp_draft)
        for kind, count, width, prefix in (cfg.mlp_groups() if cfg.compressed is None else ()):
            self.ffn = width  # the dense MLP's width in this group (NAS blocks: a group per width)
            self.mlp_block(hidden, resid, kind, count, prefix)
        for level, sends in ((Level.LINK, self.comm.pp_link_sends), (Level.NETWORK, self.comm.pp_network_sends)):
            if sends:  # pipeline: each stage hands its [N, h] output to the next
                name = "pp.send_recv" + ("" if level is Level.LINK else ".network")
                self.collective(name, Collective.SEND_RECV, resid, self.act(f"{name}.received", resid.shape), 1,
                                level, sends)
        self.final(resid)
        flash = FusionPlan(Plan.FLASH, self.flash)
        fused = FusionPlan(Plan.FUSED, {**self.flash, **self.fused})
        return self.ops, {Plan.NONE: FusionPlan(Plan.NONE), Plan.FLASH: flash, Plan.FUSED: fused}


def build_graph(cfg: ModelConfig, phase: Phase | str, batch: int, seq: int, dtypes: ModelDtypes | None = None,
                experts_hit_override: int | None = None, split: Split | None = None,
                devices_per_node: int | None = None, nvls: bool = False) -> ModelGraph:
    """The graph of one step: `seq` is the prompt length (prefill) or the context length (decode); with
    a `split`, the graph of one device: its share of the widths (roofline.models.split.shard),
    batch / dp sequences, every layer (a pipeline's step time is the sum of its stages'), and the
    split's collectives on the link or the network of nodes of `devices_per_node` devices (default:
    all of the split's devices in one node); `nvls`: the system's switch reduces (`Deployment.nvls`)."""
    phase = as_phase(phase)
    require_positive_int(batch, "batch")
    require_positive_int(seq, "prompt length" if phase is Phase.PREFILL else "context length")
    dt = for_checkpoint(dtypes or model_dtypes(), cfg.weights_dtype, cfg.unquantized, cfg.mixed_weights)
    sp = split or Split()
    warnings: list[str] = [*cfg.load_warnings, *(check_split(cfg, sp, batch) if not sp.trivial else [])]
    shape = StepShape(phase, batch // sp.dp, seq)
    check_moe_rows(sp, phase, shape.batch, seq)
    if seq > cfg.max_position_embeddings:
        warnings.append(f"{'prompt' if phase is Phase.PREFILL else 'context'} of {seq} tokens is beyond "
                        f"{cfg.name}'s max_position_embeddings ({cfg.max_position_embeddings}); analysed anyway")
    if experts_hit_override is not None and not cfg.is_moe:
        warnings.append(f"--experts-hit ignored: {cfg.name} is not a mixture of experts")
    rows = shape.tokens // sp.tp if sequence_split(sp) else shape.tokens  # the tokens one device routes
    hit = (experts_hit(cfg.num_experts, cfg.experts_per_token, rows * sp.ep, experts_hit_override)
           if cfg.is_moe else None)
    comm = comm_for(sp, devices_per_node or sp.devices, nvls)
    builder = _Builder(shard(cfg, sp), shape, dt, hit, comm, cfg.vocab_size)
    ops, plans = builder.build()
    graph = Graph(ops, name=f"{cfg.name} {phase}" + (f", {sp} (one device)" if not sp.trivial else ""))
    return ModelGraph(cfg, shape, dt, graph, MappingProxyType(plans), hit, experts_hit_override, tuple(warnings),
                      sp, comm, MappingProxyType(builder.collectives))


__all__ = ["DEFAULT_PLAN", "PLANS", "ModelGraph", "StepShape", "as_phase", "as_plan", "build_graph"]
