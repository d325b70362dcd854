"""A transformer split over devices: which splits are valid, one device's share of the model, and
the roofs its collectives sit under.

Tensor parallelism (Megatron-LM, as vLLM and SGLang run it) gives each of tp devices H/tp query
heads and G/tp key/value heads (when tp exceeds G, each device holds one KV head, replicated tp/G
times, as engines do), 1/tp of every MLP's columns (gate, up) and rows (down), and 1/tp of the
vocabulary (vocab-parallel embedding and LM head). Its collectives per step: an all-reduce of the
[N, h] activation after the embedding, after each layer's attention output projection and after each
layer's MLP (two per layer), and an all-gather of the logits. Norms, the router and MLA's latent
projections and cache are replicated.

Pipeline parallelism puts ⌈L/pp⌉ layers on each of pp stages and sends the [N, h] activation from
stage to stage (pp − 1 sends per step): a token's step time is the sum of the stages', which is the
graph of all L layers plus the sends; a device holds one stage's weights and KV cache.

Expert parallelism spreads an MoE layer's experts over ep devices of a pipeline stage (E/ep each,
whole, never split by tp; ep divides tp × dp and E + R, R the redundant replicas of `--redundant-experts`,
EPLB's, stored beside the E routed ones). Two layouts, as engines run them:
- data-parallel attention (DeepSeek-V3's serving layout; tp = 1, `--dp 8 --ep 8`): each device's
  N tokens go to the experts' devices with an all-to-all and come back with another;
- tensor-parallel attention (vLLM's --enable-expert-parallel, `--tp 8 --ep 8`): the tp ranks of a
  replica hold the same N tokens after attention's all-reduce; before the MoE each rank takes its
  N/tp of them (a sequence split: N, batch/dp in decode and batch/dp × prompt in prefill, must be a
  multiple of tp), routes them, dispatches and combines its rows with all-to-alls over the ep group,
  runs the shared experts (replicated) on them, and an all-gather over the tp group rebuilds [N, h]
  (no all-reduce after the MoE).
With uniform routing each device computes as many routed rows as it sent, and reads the weights of
the experts the ep group's tokens hit on it: the uniform-routing expectation over ep × N/tp tokens
(N/tp = N when tp = 1), / ep, rounded up.

Data parallelism runs dp replicas, each with batch/dp sequences: the step time is one replica's, the
throughput dp times it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from roofline.errors import RooflineError, T
from roofline.frozen import frozen
from roofline.models.shared import shared
from roofline.models.transformer import ModelConfig
from roofline.parallel import Split, divisors, group_level, stage_boundaries_across_nodes
from roofline.vocab import Level, Phase


@frozen
class Comm:
    """What the graph builder needs to insert a split's collectives: the degrees, and the roof of each group."""

    split: Split
    tp_level: Level = Level.LINK
    ep_level: Level = Level.LINK
    pp_link_sends: int = 0  # stage-to-stage sends per step over the node's link
    pp_network_sends: int = 0  # ... and over the network
    devices_per_node: int = 0  # the nodes' devices (0: every device in one node)
    nvls: bool = False  # the system's switch reduces (NVLink SHARP): its all-reduces may run NVLS

    @property
    def tp(self) -> int:
        return self.split.tp

    @property
    def ep(self) -> int:
        return self.split.ep

    @property
    def ep_nodes(self) -> int:
        """Nodes the ep group spans (1 when it sits on one node's link)."""
        if self.ep_level is Level.LINK or not self.devices_per_node:
            return 1
        return max(1, -(-self.ep // self.devices_per_node))

    @property
    def ep_node_devices(self) -> int:
        """The ep group's devices on each of its nodes."""
        return self.ep // self.ep_nodes


def comm_for(split: Split, devices_per_node: int, nvls: bool = False) -> Comm:
    """The roofs of a split's groups on nodes of `devices_per_node` devices (tp innermost, then pp, then dp)."""
    across = stage_boundaries_across_nodes(split, devices_per_node)
    if split.ep == 1 or split.devices <= devices_per_node:
        ep_level = Level.LINK
    elif split.tp % split.ep == 0:  # the ep group: consecutive tp ranks of one replica
        ep_level = group_level(split.ep, devices_per_node, split.devices)
    else:  # replicas are the outermost placement: an ep group across them spans nodes
        ep_level = Level.NETWORK
    return Comm(split, group_level(split.tp, devices_per_node, split.devices), ep_level, split.pp - 1 - across, across,
                devices_per_node, nvls)


def check_split(cfg: ModelConfig, split: Split, batch: int) -> list[str]:
    """Errors for a split the model cannot run; warnings (returned) for what engines do about the rest."""
    warnings: list[str] = []
    tp = split.tp
    # each softmax layer kind at its own shape (ModelConfig.attention_shape): Gemma 4's full layers have 4 K/V heads
    shapes = {cfg.attention_shape(k) for k, _ in cfg.softmax_layer_kinds} or {cfg.attention_shape()}
    for H, G in sorted({(s.heads, s.kv_heads) for s in shapes}, key=lambda hg: hg[1], reverse=True):
        if H % tp:
            raise RooflineError(f"{T.tp} {tp} does not divide {cfg.name}'s {H} query heads; try one of "
                                f"{', '.join(str(d) for d in divisors(H, 64))}")
        if not cfg.is_mla and tp > G:
            if tp % G:
                raise RooflineError(f"{T.tp} {tp} exceeds {cfg.name}'s {G} key/value heads and is not a multiple "
                                    f"of them, so they cannot be replicated evenly")
            warnings.append(f"--tp {tp} exceeds the {G} key/value heads: each device holds one, replicated "
                            f"{tp // G}× (as vLLM does); the KV cache per device does not shrink past tp = {G}")
        elif not cfg.is_mla and G % tp:
            raise RooflineError(f"{T.tp} {tp} does not divide {cfg.name}'s {G} key/value heads")
    if cfg.compressed is not None and cfg.compressed.o_groups % tp:  # DeepSeek-V4's grouped output projection
        raise RooflineError(f"{T.tp} {tp} does not divide {cfg.name}'s output-projection groups (o_groups "
                            f"{cfg.compressed.o_groups}): each device runs whole groups of its query heads")
    bs = cfg.block_sparse  # MiniMax-M3's index heads: whole on each device, or one replicated (as sglang runs them)
    if bs is not None and bs.index_heads % tp and tp % bs.index_heads:
        raise RooflineError(f"{T.tp} {tp} neither divides nor is a multiple of {cfg.name}'s {bs.index_heads} index "
                            f"heads (sparse_num_index_heads)")
    for width in sorted({w for w in cfg.ffn_widths if w} or ({cfg.intermediate_size} if cfg.dense_layers else set())):
        if width % tp:
            raise RooflineError(f"{T.tp} {tp} does not divide the MLP width {width}")
    if cfg.is_moe:
        check_expert_slots(cfg, split.ep)
        if split.ep == 1 and cfg.moe_intermediate_size % tp:
            raise RooflineError(f"{T.tp} {tp} does not divide the experts' width {cfg.moe_intermediate_size}")
    elif split.ep > 1:
        raise RooflineError(f"{T.ep} {split.ep}: {cfg.name} is not a mixture of experts")
    if split.pp > cfg.num_layers:
        raise RooflineError(f"{T.pp} {split.pp} is more stages than {cfg.name}'s {cfg.num_layers} layers")
    if split.pp > 1 and cfg.num_layers % split.pp:
        warnings.append(f"{cfg.num_layers} layers over {split.pp} stages: the largest stage holds "
                        f"{math.ceil(cfg.num_layers / split.pp)} layers and sets the throughput")
    if batch % split.dp:
        raise RooflineError(f"{T.batch} {batch} is not a multiple of {T.dp} {split.dp} (each replica runs batch/dp "
                            f"sequences)")
    return warnings


def expert_slots(cfg: ModelConfig) -> int:
    """Experts stored over the EP group: the E routed ones and the redundant replicas (EPLB)."""
    return cfg.num_experts + cfg.redundant_experts


def check_expert_slots(cfg: ModelConfig, ep: int) -> None:
    """The E + R expert slots spread evenly over ep devices (DeepSeek-V3 decode: 256 + 32 = 288 over EP 144,
    2 a device); redundant experts only under expert parallel."""
    e, r = cfg.num_experts, cfg.redundant_experts
    if ep == 1:
        return  # one device holds every expert: replicas are not stored (require_expert_parallel)
    if (e + r) % ep:
        fix = (-(e + r)) % ep
        if r:
            raise RooflineError(f"{T.redundant_experts} {r}: {cfg.name}'s {e} experts + {r} replicas = {e + r} slots "
                                f"do not divide over {T.ep} {ep}; try {T.redundant_experts} {r + fix}")
        raise RooflineError(f"{T.ep} {ep} does not divide {cfg.name}'s {e} experts (or add {T.redundant_experts} "
                            f"{fix}: {e} + {fix} = {e + fix} slots, {(e + fix) // ep} a device)")


def require_expert_parallel(cfg: ModelConfig, split: Split) -> None:
    """The expert-parallel options need --ep > 1 (replicas, per-node dispatch and the overlap of the
    all-to-all are about the expert-parallel group)."""
    if split.ep > 1:
        return
    asked = [(cfg.redundant_experts, f"{T.redundant_experts} {cfg.redundant_experts}"),
             (cfg.dispatch_per_node, T.dispatch_per_node), (cfg.two_batch_overlap, T.two_batch_overlap),
             (cfg.dispatch_dtype is not None, T.dispatch_dtype)]
    for on, name in asked:
        if on:
            raise RooflineError(f"{name} needs {T.ep} > 1: it is about the expert-parallel group's all-to-all and "
                                "experts (e.g. --dp 8 --ep 8)")


def sequence_split(split: Split) -> bool:
    """Whether the MoE splits a replica's tokens over its tp ranks (expert parallel with tensor-parallel
    attention): each rank routes N/tp of them."""
    return split.ep > 1 and split.tp > 1


def check_moe_rows(split: Split, phase: Phase, batch_per_replica: int, seq: int) -> None:
    """Under a sequence split, a replica's N tokens must be a multiple of tp (one clear error)."""
    if not sequence_split(split):
        return
    tp = split.tp
    if phase is Phase.PREFILL:
        n = batch_per_replica * seq
        what = f"prefill: batch / dp × prompt = {batch_per_replica} × {seq} = {n}"
    else:
        n = batch_per_replica
        what = f"decode: batch / dp = {n}"
    if n % tp:
        raise RooflineError(f"{T.ep} {split.ep} with {T.tp} {tp}: each of the {tp} tensor-parallel ranks routes 1/{tp} "
                            f"of a replica's tokens, so they must be a multiple of {tp} ({what})")


def shard(cfg: ModelConfig, split: Split) -> ModelConfig:
    """One device's share of the model's widths under tensor (and expert) parallelism: H/tp heads,
    max(1, G/tp) KV heads, MLP and (without T.ep) expert widths / tp, ⌈V/tp⌉ vocabulary rows. Layer
    counts are the model's: the step graph runs every layer; pipeline stages are accounted apart.
    Within a search (roofline.models.shared) once a model and split: each graph of a layout asks."""
    if split.tp == 1:
        return cfg
    return shared(("shard", id(cfg), split), lambda: _shard(cfg, split), cfg)


def _shard(cfg: ModelConfig, split: Split) -> ModelConfig:
    tp = split.tp
    la = cfg.linear_attention
    if la is not None and (la.key_heads % tp or la.value_heads % tp):
        heads = (f"linear_attn_config num_heads {la.key_heads}" if la.name == "KDA" else
                 f"linear_num_key_heads {la.key_heads}, linear_num_value_heads {la.value_heads}")
        raise RooflineError(f"{T.tp} {tp} does not divide {cfg.name}'s linear-attention heads ({heads})")
    mb = cfg.mamba
    if mb is not None and (mb.heads % tp or mb.groups % tp):  # vLLM's MambaMixer2 shards heads and groups
        raise RooflineError(f"{T.tp} {tp} does not divide {cfg.name}'s Mamba2 heads and groups "
                            f"(mamba_num_heads {mb.heads}, n_groups {mb.groups})")
    cp = cfg.compressed  # check_split has held tp to its o_groups
    return replace(
        cfg,
        compressed=None if cp is None else replace(cp, o_groups=cp.o_groups // tp),  # the KV head stays whole
        # MiniMax-M3: the index heads split with the query heads (max(1, H_I/tp)), the one index key whole
        block_sparse=None if cfg.block_sparse is None else cfg.block_sparse.sharded(tp),
        linear_attention=None if la is None else replace(la, key_heads=la.key_heads // tp,
                                                         value_heads=la.value_heads // tp),
        mamba=None if mb is None else replace(mb, heads=mb.heads // tp, groups=mb.groups // tp),
        num_heads=cfg.num_heads // tp,
        global_attention=None if cfg.global_attention is None else cfg.global_attention.sharded(tp),
        # MLA's key/value "heads" go with the query heads; its cache is the shared latent, replicated
        num_kv_heads=cfg.num_kv_heads // tp if cfg.is_mla else max(1, cfg.num_kv_heads // tp),
        intermediate_size=cfg.intermediate_size // tp,
        ffn_widths=tuple(w // tp for w in cfg.ffn_widths),
        moe_intermediate_size=cfg.moe_intermediate_size // tp if split.ep == 1 else cfg.moe_intermediate_size,
        vocab_size=math.ceil(cfg.vocab_size / tp),
    )


def stage_layers(cfg: ModelConfig, split: Split) -> int:
    """Layers on the fullest pipeline stage: ⌈L/pp⌉."""
    return math.ceil(cfg.num_layers / split.pp)


def stage_share(cfg: ModelConfig, split: Split) -> float:
    """The fullest stage's share of the layers, ⌈L/pp⌉ / L (what a stage's time is of the step's)."""
    return stage_layers(cfg, split) / cfg.num_layers


def valid_splits(cfg: ModelConfig, devices: int, tp_most: int, batch: int = 1, phase: Phase = Phase.DECODE,
                 seq: int = 1, even_stages: bool = True, experts: bool = True, tp: int | None = None) -> list[Split]:
    """Every split of at most `devices` devices the model can run: tp ≤ `tp_most` (a node's devices)
    dividing the heads (only `tp` when given); pp dividing the layers (with `even_stages`; else any pp
    up to the layers, the largest stage holding ⌈L/pp⌉); ep (with `experts`, MoE only) dividing the
    experts and tp × dp; dp dividing the batch; each accepted by check_split and, for expert parallel
    with tensor parallel, check_moe_rows (a replica's tokens a multiple of tp). In order of devices,
    then tp, pp, ep, dp."""
    out: list[Split] = []
    eps = divisors(expert_slots(cfg), devices) if cfg.is_moe and experts else [1]
    tps = divisors(cfg.num_heads, min(tp_most, devices)) if tp is None else [tp]
    for tp in tps:
        stages = (divisors(cfg.num_layers, devices // tp) if even_stages
                  else range(1, min(cfg.num_layers, devices // tp) + 1))
        for pp in stages:
            for dp in divisors(batch, devices // (tp * pp)):
                for ep in eps:
                    if ep > 1 and (tp * dp) % ep:
                        continue  # the experts are spread over the tp × dp devices of a stage
                    sp = Split(tp=tp, pp=pp, ep=ep, dp=dp)
                    try:
                        check_split(cfg, sp, batch)
                        check_moe_rows(sp, phase, batch // dp, seq)
                    except RooflineError:
                        continue
                    out.append(sp)
    return sorted(out, key=lambda s: (s.devices, s.tp, s.pp, s.ep, s.dp))


__all__ = ["Comm", "check_expert_slots", "check_moe_rows", "check_split", "comm_for", "expert_slots",
           "require_expert_parallel", "sequence_split", "shard", "stage_layers",
           "stage_share", "valid_splits"]
