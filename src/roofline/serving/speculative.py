"""Speculative decoding as a what-if (`roofline serve --draft MODEL --draft-tokens k --acceptance a`).

A draft model proposes k tokens, the target verifies them in one step and keeps the accepted prefix
plus one token of its own. With every drafted token accepted independently with probability a, the
expected tokens a target step yields are (Leviathan, Kalman and Matias, "Fast Inference from
Transformers via Speculative Decoding", ICML 2023, eq. 1):

    E[tokens per step] = (1 − a^(k+1)) / (1 − a)          (a = 1: the limit, k + 1)

The model, every term from the same graph and placement as the rest of `serve`:

    draft step   the draft model's decode step at the batch over the generation's contexts (serve's ITL
                 mean for the draft), on the same split and devices as the target (the draft runs
                 tensor parallel with it, as vLLM's default)
    memory       both models live on the same devices: the largest batch that fits is
                 (usable − target weights − draft weights − the larger workspace) / (target KV + draft KV
                 per sequence), each per device and each sequence of prompt + output tokens (the draft's k extra
                 positions are within a step's workspace); a batch above it is flagged, not refused
    verify step  the target's step over k + 1 tokens per sequence: a prefill of k + 1 tokens at the batch
                 (analyze_model, phase prefill, prompt k + 1) + the attention of those k + 1 queries to
                 the s cached tokens (one flash kernel per layer, as the chunked prefill's; MLA absorbed over
                 its latent cache, as its decode runs), at the generation's middle context s = prompt + ⌊output / 2⌋
    net ITL      (k × draft step + verify step) / E[tokens per step]; throughput = batch / net ITL;
                 speed-up = ITL mean / net ITL

Bad input: k < 1 or a outside (0, 1] is a one-line error (exit 2 on the command line).

The model's own multi-token-prediction layers as the draft (`roofline serve --mtp k --acceptance a`;
DeepSeek-V3 technical report, arXiv 2412.19437 §5.4.3: the second token predicted by its MTP module is
accepted 85–90% of the time): the draft is one MTP module (its eh_proj input projection, one layer of the
model's last kind, the model's head; roofline.models.draft), run k times a step, each run one decode
step over the generation's contexts; a model with fewer MTP modules than k reuses its last, as vLLM's MTP
proposer does. Its weights are already in the target's memory (roofline.models.mtp): the fit adds only
its own KV cache, one layer's.

serve() calls this module and hands it a way to serve the draft.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from roofline.errors import RooflineError, T
from roofline.frozen import frozen
from roofline.models.config import load_config
from roofline.models.split import check_split
from roofline.models.transformer import MlpKind, ModelConfig
from roofline.parallel import Split
from roofline.serving.chunked import ChunkStep, chunk_step
from roofline.serving.efficiency import Band, Rate, per_rate
from roofline.units import MIN_SHARE

FORMULAS = {
    "expected_tokens_per_step": "(1 - a^(k+1)) / (1 - a); k + 1 at a = 1 (Leviathan et al., 2023)",
    "draft_step_s": "the draft's decode step at the batch, ITL mean over the generation, same split",
    "verify_step_s": "prefill of k+1 tokens at the batch + their attention to the cached context "
                     "(prompt + floor(output/2))",
    "net_itl_s": "(k x draft step + verify step) / expected tokens per step",
    "throughput_tokens_per_s": "batch / net ITL",
    "max_batch_memory": "(usable - target weights - draft weights - larger workspace) / (target KV + draft KV per "
                        "sequence), per device, in multiples of the batch unit",
}


def expected_tokens(acceptance: float, k: int) -> float:
    """(1 − a^(k+1)) / (1 − a), and its limit k + 1 at a = 1."""
    if acceptance == 1:
        return float(k + 1)
    return (1 - acceptance ** (k + 1)) / (1 - acceptance)


def check(draft_tokens: int | None, acceptance: float | None) -> tuple[int, float]:
    """k ≥ 1 an integer; a in (0, 1]."""
    if acceptance is None:
        raise RooflineError(f"{T.draft} needs {T.acceptance} a, the chance a drafted token is accepted, in (0, 1]")
    k = 4 if draft_tokens is None else draft_tokens
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise RooflineError(f"{T.draft_tokens} must be a positive integer, got {k!r}")
    if (isinstance(acceptance, bool) or not isinstance(acceptance, int | float) or not math.isfinite(acceptance)
            or not MIN_SHARE <= acceptance <= 1):  # 1e-320 is a typo, not a chance: refused, as shares are
        raise RooflineError(f"{T.acceptance} must be in (0, 1] and at least {MIN_SHARE:g} (the chance a drafted "
                            f"token is accepted), got {acceptance!r}")
    return k, float(acceptance)


def check_draft(draft: str | ModelConfig, k: int, prompt: int, output: int, split: Split | None) -> ModelConfig:
    """Everything about the draft that can be known before anything is computed (serve checks it first,
    so a draft that cannot run is named in a second, not after the target's whole serving report): the
    draft's config, its context (prompt + output within its max_position_embeddings), the split it runs
    on beside the target (an MTP draft on the last stage alone), and k + 1 verified tokens within the
    mid-generation context. `split` None: not chosen yet (serve's search), checked on one device. Returns
    the draft's config."""
    cfg = load_config(draft)
    name = draft if isinstance(draft, str) else draft.name
    given = split or Split()
    sp = replace(given, pp=1) if cfg.mtp_draft else given
    where = "" if split is None else f" on {sp}"
    try:
        if prompt + output > cfg.max_position_embeddings:
            raise RooflineError(f"{T.prompt} {prompt} + {T.output} {output} = {prompt + output} tokens exceeds "
                                f"{cfg.name}'s context of {cfg.max_position_embeddings} (max_position_embeddings)")
        check_split(cfg, sp, sp.dp)
    except RooflineError as exc:
        raise RooflineError(f"{T.draft} {name} runs beside the target{where}, and {exc.marked}") from None
    check_verify(k, prompt + output // 2)
    return cfg


def check_verify(k: int, context: int) -> None:
    """The verify step's k + 1 queries attend to at most the context's keys (mid-generation: prompt + output/2)."""
    if k + 1 > context:
        advice = f"draft at most {context - 1} tokens" if context > 1 else "too short a request to draft for"
        raise RooflineError(f"{T.draft_tokens} {k}: the verify step checks k + 1 = {k + 1} tokens at the "
                            f"mid-generation context of {context} (prompt + output/2); {advice}")


_MTP_PARTS = {"attention": "mtp", "indexer": "mtp", "router": "mtp", "shared_experts": "mtp", "experts": "mtp_experts"}


def mtp_draft(cfg: ModelConfig, mtp: int, draft: object, draft_tokens: int | None,
              acceptance: float | None) -> tuple[ModelConfig, int]:
    """(the draft, k) of `--mtp k`: the model's MTP module as a one-layer model (mtp_draft) whose weights
    keep the checkpoint's MTP dtypes (its parts' 16-bit fractions, ModelConfig.unquantized)."""
    if draft is not None or draft_tokens is not None:
        raise RooflineError(f"{T.mtp} drafts with the model's own multi-token-prediction layers: give it or "
                            f"{T.draft} MODEL ({T.draft_tokens}), not both")
    if not cfg.mtp_layers and any("compress ratios are not given" in w for w in cfg.load_warnings):  # DeepSeek-V4
        raise RooflineError(f"{T.mtp}: {cfg.name}'s multi-token-prediction layers are not read (their compress "
                            f"ratios are not given); give {T.draft} MODEL for a separate draft model")
    if not cfg.mtp_layers:
        raise RooflineError(f"{cfg.name} has no multi-token-prediction layers (num_nextn_predict_layers is 0 or "
                            f"absent): {T.mtp} needs them; give {T.draft} MODEL for a separate draft model")
    if isinstance(mtp, bool) or not isinstance(mtp, int) or mtp < 1:
        raise RooflineError(f"{T.mtp} must be a positive integer (the MTP module's runs a step), got {mtp!r}")
    if acceptance is None:
        raise RooflineError(f"{T.mtp} needs {T.acceptance} a, the chance a drafted token is accepted, in (0, 1]")
    k, _ = check(mtp, acceptance)
    kept = dict(cfg.unquantized)
    cp = cfg.compressed  # DeepSeek-V4: its MTP Block keeps the main layers' dtypes part by part
    unquantized = kept if cp is not None else {**kept, **{p: kept.get(m, 0.0) for p, m in _MTP_PARTS.items()}}
    ix = cfg.indexer
    one = replace(cfg, name=f"{cfg.name} MTP", num_layers=1, layer_attention=(), first_dense_layers=0,
                  layer_mlp=(MlpKind.MOE,) if cfg.is_moe else (), mtp_layers=0, mtp_tables=False, mtp_draft=True,
                  vision_params=0, indexer=None if ix is None else replace(ix, shared=()), linear_attention=None,
                  mamba=None,  # Qwen3-Next's MTP layers are full attention
                  # DeepSeek-V4: its first MTP layer's ratio; past num_hash_layers, a learned router
                  compressed=None if cp is None else replace(cp, ratios=cp.mtp_ratios[:1], mtp_ratios=()),
                  hash_layers=0,
                  unquantized=tuple(sorted((p, f) for p, f in unquantized.items() if f)),
                  load_warnings=() if ix is None or not ix.mtp_shares_index else (
                      f"{cfg.name}: index_share_for_mtp_iteration is true (its MTP iterations reuse a top-k rather "
                      f"than run the indexer; which one is not pinned here): the draft step runs its indexer every "
                      f"time, an upper bound",))
    return one, k


@frozen
class Speculative:
    draft: str
    draft_tokens: int
    acceptance: float
    batch: int
    draft_step: Band
    verify: ChunkStep
    target_itl: Band  # the plain decode step (ITL mean) it replaces
    draft_weights_bytes: float = 0.0  # per device
    draft_kv_bytes_per_sequence: float = 0.0  # per device, prompt + output tokens
    max_batch_memory: int | None = None  # both models' weights and KV caches on the same devices
    workspace_bytes: float = 0.0  # the larger of the two models' step workspaces (they run in turn)
    shares_weights: bool = False  # --mtp: the draft's weights are the target's own MTP layers, already in memory

    @property
    def fits(self) -> bool | None:
        return None if self.max_batch_memory is None else self.batch <= self.max_batch_memory

    @property
    def expected_tokens(self) -> float:
        return expected_tokens(self.acceptance, self.draft_tokens)

    @property
    def verify_step(self) -> Band:
        return self.verify.time

    @property
    def round(self) -> Band:
        """k draft steps + one verify step."""
        k, d, v = self.draft_tokens, self.draft_step, self.verify_step
        return Band(k * d.floor + v.floor, k * d.low + v.low, k * d.high + v.high)

    @property
    def net_itl(self) -> Band:
        return self.round.scaled(1 / self.expected_tokens)

    @property
    def throughput(self) -> Rate:
        return per_rate(float(self.batch), self.net_itl)

    @property
    def speedup(self) -> float:
        return self.target_itl.floor / self.net_itl.floor

    def to_dict(self) -> dict[str, Any]:
        return {"draft": self.draft, "draft_tokens": self.draft_tokens, "acceptance": self.acceptance,
                "expected_tokens_per_step": self.expected_tokens, "draft_step_s": self.draft_step.to_dict(),
                "verify_step_s": self.verify_step.to_dict(), "verify": self.verify.to_dict(),
                "round_s": self.round.to_dict(), "net_itl_s": self.net_itl.to_dict(),
                "target_itl_s": self.target_itl.to_dict(), "speedup": self.speedup,
                "throughput_tokens_per_s": self.throughput.to_dict(),
                "draft_weights_bytes": self.draft_weights_bytes, "draft_is_mtp": self.shares_weights,
                "draft_kv_bytes_per_sequence": self.draft_kv_bytes_per_sequence,
                "max_batch_memory": self.max_batch_memory, "fits": self.fits, "formulas": dict(FORMULAS)}


def speculative(r: Any, draft_name: str, k: int, a: float, run_draft: Callable[[int], Any],
                shares_weights: bool = False) -> Speculative:
    """The what-if on the report `r`: `run_draft(batch)` serves the draft model on the same split;
    `shares_weights`: the draft is the target's own MTP module, its weights counted in the target's."""
    dr = run_draft(r.batch)
    weights = 0.0 if shares_weights else dr.weights_bytes
    context = r.prompt + r.output // 2
    check_verify(k, context)
    verify = chunk_step(r, r.batch, k + 1, context, latent=True)  # MLA absorbed, as decode
    return Speculative(dr.config.name if dr.config.name else draft_name, k, a, r.batch, dr.itl_mean, verify,
                       r.itl_mean, weights, dr.kv_bytes_per_sequence, _max_batch(r, dr, weights),
                       max(r.workspace_bytes, dr.workspace_bytes), shares_weights)


def _max_batch(r: Any, dr: Any, draft_weights: float) -> int | None:
    """Target and draft on the same devices: (usable − both weights − workspace) / both KV caches a sequence,
    rounded down to the batch unit; None without a memory capacity."""
    if r.usable_bytes is None:
        return None
    room = r.usable_bytes - r.weights_bytes - draft_weights - max(r.workspace_bytes, dr.workspace_bytes)
    unit = r.batch_unit
    per_replica = int(room // (r.kv_bytes_per_sequence + dr.kv_bytes_per_sequence)) if room > 0 else 0
    return per_replica // (unit // r.split.dp) * unit


__all__ = ["FORMULAS", "Speculative", "check", "check_draft", "check_verify", "expected_tokens", "mtp_draft",
           "speculative"]
