"""Chunked prefill as a what-if (`roofline serve --chunk C`): the prompt's prefill runs in chunks of C
tokens interleaved with the batch's decode steps, as vLLM and SGLang schedule it.

The model, every term from the same graph and placement as the rest of `serve`:

    chunks      n = ⌈P / C⌉; chunk i holds c_i = min(C, P − i·C) new tokens after s_i = i·C earlier ones
    chunk step  T(c_i, s_i) = prefill step of c_i tokens (analyze_model, phase prefill, batch 1, prompt c_i:
                its matmuls, norms and the chunk's causal attention among its own tokens)
                + the chunk's attention to its s_i earlier tokens: one flash-attention kernel per layer of
                c_i queries against s_i cached keys and values (non-causal, every pair unmasked), its KV read
                from memory, placed on the same device (windowed layers read min(s_i, W) of them)
    TTFT        Σ_i T(c_i, s_i) + (n − 1) × ITL mean: the chunks alternate with the batch's decode steps
                (chunk, decode, chunk, …, chunk); with C ≥ P one chunk, no decode step: the unchunked TTFT
    ITL impact  a decode step that carries a chunk takes ITL + T(c, s): mean over the chunks and the worst
                (the largest chunk step); unchunked, the step that admits a prompt stalls ITL + TTFT;
                steady state: every step admits batch / output requests on average (each sequence leaves
                after `output` steps), so the mean ITL = ITL + (batch / output) × Σ_i T(c_i, s_i)

Approximations, stated: the chunk's prefill and the decode step are counted as two passes (the weights
read by each; an engine fusing them into one step reads them once, so a step carrying a chunk is
overstated by at most the weights' read time); the split attention re-reads the chunk's queries and
rewrites its output once (flash-decoding's split-KV merge); multi-head latent attention is taken as its
per-head keys and values in a chunk (vLLM's chunked MLA prefill decompresses the cached latent), and runs
absorbed over the latent cache in speculative decoding's verify step, as its decode does (the up-projection
of the k + 1 latent outputs, H·r·d_v a token, is left out); DeepSeek-V4's queries read the window and the
compressed entries a decode query reads, MiniMax-M3's block-sparse layers the keys a decode query at s_i
reads (ModelConfig.read_tokens: its top-k blocks), and the indexers' scores of the chunk's queries against
the earlier index keys are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from roofline.errors import T
from roofline.frozen import frozen
from roofline.graph import FusionPlan, Graph, tensor
from roofline.kernels import attention_ops, attention_plans
from roofline.models.analysis import ALL_TO_ALL, COLLECTIVES, ModelAnalysis, analyze
from roofline.models.split import shard
from roofline.models.transformer import SOFTMAX_KINDS, AttentionKind
from roofline.placement import analyze_graph
from roofline.serving.efficiency import Band, Efficiency
from roofline.units import require_positive_int
from roofline.vocab import Phase, Plan, Role, Unit

if TYPE_CHECKING:  # pragma: no cover
    from roofline.calibration.choose import Band as KernelBand

ZERO = Band(0.0, 0.0, 0.0)


def step_band(placements: Any, eff: Efficiency, overlap: bool, overhead: bool = True,
              two_batch: bool = False, bands: Sequence[KernelBand] | None = None) -> Band:
    """Σ kernel floors (the floor) and Σ runs × each kernel's calibrated band (Efficiency.band, as
    `roofline model` gives it, or `bands`, one a placement, when the caller has them), with the
    per-step overhead; with `overlap` the collectives run under
    the rest (the larger sum); with `two_batch` (--two-batch-overlap, without --overlap) the MoE
    all-to-all of one micro-batch runs under the other's compute, max(rest, all-to-all) + the other
    collectives, as ModelAnalysis.step_time_s has it, at each end of the band."""
    floor = {"a2a": 0.0, "comm": 0.0, "rest": 0.0}
    fast = {"a2a": 0.0, "comm": 0.0, "rest": 0.0}
    slow = {"a2a": 0.0, "comm": 0.0, "rest": 0.0}
    placements = tuple(placements)
    for p, band in zip(placements, bands if bands is not None else [eff.band(p) for p in placements], strict=True):
        key = ("a2a" if two_batch and p.kind == ALL_TO_ALL else "comm") if p.kind in COLLECTIVES else "rest"
        floor[key] += p.total_time_s
        fast[key] += p.count * band.low_s
        slow[key] += p.count * band.high_s
    oh_lo, oh_hi = eff.overhead if overhead else (0.0, 0.0)

    def total(t: dict[str, float]) -> float:
        if overlap:
            return max(t["rest"], t["comm"] + t["a2a"])
        return t["comm"] + max(t["rest"], t["a2a"])  # comm + rest without two-batch overlap (a2a is 0)

    return Band(total(floor), total(fast) + oh_lo, total(slow) + oh_hi)


def _plus(*bands: Band) -> Band:
    return Band(sum(b.floor for b in bands), sum(b.low for b in bands), sum(b.high for b in bands))


@frozen
class ChunkStep:
    """One chunk: `tokens` new tokens after `earlier` ones; its prefill, its attention to the earlier
    tokens, and their sum."""

    tokens: int
    earlier: int
    prefill: Band
    earlier_attention: Band
    earlier_attention_bytes: float  # per device: the cached keys and values the chunk reads
    earlier_attention_flop: float

    @property
    def time(self) -> Band:
        return _plus(self.prefill, self.earlier_attention)

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "earlier_tokens": self.earlier, "prefill_s": self.prefill.to_dict(),
                "earlier_attention_s": self.earlier_attention.to_dict(),
                "earlier_attention_bytes": self.earlier_attention_bytes,
                "earlier_attention_flop": self.earlier_attention_flop, "step_s": self.time.to_dict()}


def earlier_attention(r: Any, batch: int, tokens: int, earlier: int, latent: bool = False
                      ) -> tuple[Band, float, float]:
    """The attention of `tokens` new queries per sequence (batch / dp sequences on a device) to
    `earlier` cached tokens: one flash kernel per attention layer on the report's device, its band
    without a step overhead (it runs inside the step). (band, FLOPs, bytes) per device."""
    if earlier <= 0:
        return ZERO, 0.0, 0.0
    cfg = shard(r.config, r.split)
    b = batch // r.split.dp
    act, kv = r.dtypes.activations, r.dtypes.kv_cache
    ops = _latent_attention(r.config, cfg, b, tokens, earlier, act, kv, latent)
    for kind in SOFTMAX_KINDS if not ops else ():
        layers = r.config.attention_layers(kind)
        if not layers:
            continue
        cached = int(r.config.read_tokens(kind, earlier) if kind == AttentionKind.SPARSE
                     else r.config.cached_tokens(kind, earlier))
        prefix = f"earlier_{kind}"
        s = cfg.attention_shape(kind)  # this device's share of the kind's own shape
        q = tensor(f"{prefix}.q", (b, s.heads, tokens, s.head_dim), act)
        k = tensor(f"{prefix}.k", (b, s.kv_heads, cached, s.head_dim), kv, Role.KV_CACHE)
        v = tensor(f"{prefix}.v", (b, s.kv_heads, cached, s.v_head_dim), kv, Role.KV_CACHE)
        o = tensor(f"{prefix}.o", (b, s.heads, tokens, s.v_head_dim), act)
        ops += [(prefix, op) for op in attention_ops(prefix, q, k, v, o, causal=False, count=layers)]
    # one flash kernel per layer kind: q·kᵀ, softmax and p·v fused, only q, k, v and out cross memory
    groups: dict[str, tuple[str, ...]] = {}
    for prefix, _ in ops:
        groups.update(attention_plans(prefix)[Plan.FLASH].groups)
    a = analyze_graph(Graph([op for _, op in ops], name="attention to the earlier tokens"), r.machine, r.dtype,
                      FusionPlan(Plan.FLASH, groups))
    band = step_band(a.placements, r.efficiency, False, overhead=False)
    return band, a.flop, a.bytes


def _latent_attention(full: Any, cfg: Any, b: int, tokens: int, earlier: int, act: Any, kv: Any,
                      latent: bool) -> list[Any]:
    """The earlier tokens' attention where the cache is not per-head K and V (empty list otherwise): MLA
    absorbed, as its decode runs (queries in the latent, q·kᵀ over kv_lora_rank + rope and p·v over the
    kv_lora_rank latent of the one shared latent row a token, read once; DSA's top-k rows), and DeepSeek-V4's
    one K = V row a token over the window plus its compressed entries (roofline.models.compressed)."""
    out: list[Any] = []
    if latent and cfg.is_mla and full.mla != "expanded":
        width, r_ = cfg.kv_lora_rank + cfg.qk_rope_head_dim, cfg.kv_lora_rank
        cached = earlier if full.indexer is None else min(earlier, full.indexer.topk)
        lat = tensor("earlier_mla.latent", (b, 1, cached, width), kv, Role.KV_CACHE)
        q = tensor("earlier_mla.q", (b, cfg.num_heads, tokens, width), act)
        o = tensor("earlier_mla.o", (b, cfg.num_heads, tokens, width), act)
        qk, sm, pv = attention_ops("earlier_mla", q, lat, lat, o, causal=False, count=full.num_layers)
        pairs = b * cfg.num_heads * tokens * cached
        out = [("earlier_mla", op) for op in (qk, sm, replace(pv, flop_by_unit={Unit.MATRIX: 2.0 * pairs * r_}))]
    cp = cfg.compressed
    if cp is not None:
        for m in (0, *cp.kinds):
            cached = min(earlier, cp.window) + (int(cp.read_entries(m, earlier)) if m else 0)
            prefix = f"earlier_v4_{m}"
            rows = tensor(f"{prefix}.rows", (b, 1, cached, cp.head_dim), kv, Role.KV_CACHE)
            q = tensor(f"{prefix}.q", (b, cfg.num_heads, tokens, cp.head_dim), act)
            o = tensor(f"{prefix}.o", (b, cfg.num_heads, tokens, cp.head_dim), act)
            out += [(prefix, op) for op in attention_ops(prefix, q, rows, rows, o, causal=False, count=cp.layers(m))
                    if cp.layers(m)]
    return out


def prefill_step(r: Any, batch: int, tokens: int) -> tuple[Band, ModelAnalysis]:
    """analyze_model's prefill step of `tokens` tokens at `batch` on the report's model, machine and split
    (its floor analyze_model's time, exactly, as serve's TTFT has it)."""
    a = analyze(replace(r.prefill.step, phase=Phase.PREFILL, batch=batch, seq=tokens), r.prefill.deployment,
                r.utilization, r.overlap)
    b = step_band(a.placements, r.efficiency, r.overlap, two_batch=a.two_batch_overlap)
    return Band(a.time_s, b.low, b.high), a


def chunk_step(r: Any, batch: int, tokens: int, earlier: int, latent: bool = False) -> ChunkStep:
    """`latent`: MLA's earlier tokens attended absorbed, as its decode runs them (the verify step)."""
    pre = r.ttft if (batch, tokens) == (r.requests_prefilled, r.prompt) else prefill_step(r, batch, tokens)[0]
    att, flop, byt = earlier_attention(r, batch, tokens, earlier, latent)
    return ChunkStep(tokens, earlier, pre, att, byt, flop)


@frozen
class ChunkedPrefill:
    """The prompt's prefill in chunks of `chunk` tokens interleaved with decode steps (module docstring)."""

    chunk: int
    prompt: int
    output: int
    batch: int
    steps: tuple[ChunkStep, ...]
    itl: Band  # the batch's decode step (ITL mean) the chunks alternate with
    unchunked_ttft: Band

    @property
    def chunks(self) -> int:
        return len(self.steps)

    @property
    def prefill_work(self) -> Band:
        """Σ_i T(c_i, s_i): the chunk steps alone."""
        return _plus(*(s.time for s in self.steps))

    @property
    def ttft(self) -> Band:
        return _plus(self.prefill_work, self.itl.scaled(self.chunks - 1))

    @property
    def itl_with_chunk(self) -> Band:
        """A decode step carrying a chunk: ITL + the mean chunk step."""
        return _plus(self.itl, self.prefill_work.scaled(1 / self.chunks))

    @property
    def itl_with_chunk_worst(self) -> Band:
        worst = max(self.steps, key=lambda s: s.time.floor)
        return _plus(self.itl, worst.time)

    @property
    def itl_unchunked_stall(self) -> Band:
        """Without chunking, the step that admits a prompt: ITL + the whole prefill."""
        return _plus(self.itl, self.unchunked_ttft)

    @property
    def itl_steady(self) -> Band:
        """Steady state: batch / output requests admitted a step, each Σ T(c_i, s_i) of prefill work."""
        return _plus(self.itl, self.prefill_work.scaled(self.batch / self.output))

    def to_dict(self) -> dict[str, Any]:
        return {"chunk": self.chunk, "chunks": self.chunks, "ttft_s": self.ttft.to_dict(),
                "unchunked_ttft_s": self.unchunked_ttft.to_dict(), "prefill_work_s": self.prefill_work.to_dict(),
                "itl_between_chunks_s": self.itl.to_dict(),
                "itl_with_chunk_s": {"mean": self.itl_with_chunk.to_dict(),
                                     "worst": self.itl_with_chunk_worst.to_dict()},
                "itl_unchunked_stall_s": self.itl_unchunked_stall.to_dict(),
                "itl_steady_state_s": self.itl_steady.to_dict(),
                "steps": [s.to_dict() for s in self.steps],
                "formulas": dict(FORMULAS), "approximation": APPROXIMATION}


APPROXIMATION = ("approximation: the chunk's prefill and the decode step are two passes, each reading the weights; "
                 "an engine fusing them into one step reads them once, so a step carrying a chunk is overstated by "
                 "at most the weights' read time")

FORMULAS = {
    "chunk_step": "prefill step of c tokens (analyze_model, batch 1) + flash attention of c queries against the "
                  "s earlier cached tokens per layer",
    "ttft_s": "sum over ceil(P/C) chunk steps + (chunks - 1) x ITL mean (decode steps between the chunks)",
    "itl_with_chunk_s": "ITL mean + chunk step (mean over the chunks; worst: the largest)",
    "itl_unchunked_stall_s": "ITL mean + the unchunked prefill (the step that admits a prompt whole)",
    "itl_steady_state_s": "ITL mean + (batch / output) x sum of the chunk steps (requests admitted per step)",
}


def check_chunk(chunk: int | None) -> int | None:
    return None if chunk is None else require_positive_int(chunk, T.chunk)


def chunked_prefill(r: Any, chunk: int) -> ChunkedPrefill:
    """Chunk the report's prompt into steps of `chunk` tokens (one request per replica, as TTFT)."""
    n = -(-r.prompt // chunk)
    prefills: dict[int, Band] = {}
    steps = []
    for i in range(n):
        c = min(chunk, r.prompt - i * chunk)
        if c not in prefills:
            prefills[c] = chunk_step(r, r.requests_prefilled, c, 0).prefill
        att, flop, byt = earlier_attention(r, r.requests_prefilled, c, i * chunk)
        steps.append(ChunkStep(c, i * chunk, prefills[c], att, byt, flop))
    return ChunkedPrefill(chunk, r.prompt, r.output, r.batch, tuple(steps), r.itl_mean, r.ttft)


__all__ = ["APPROXIMATION", "FORMULAS", "ChunkStep", "ChunkedPrefill", "check_chunk", "chunk_step", "chunked_prefill",
           "earlier_attention", "prefill_step", "step_band"]
