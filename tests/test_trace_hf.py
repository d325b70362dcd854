"""Tracing Hugging Face transformers 5 models on CPU: tiny random Llama, Qwen2, Mixtral, DeepSeek-V3.

Each model (2 layers, hidden 64, 4 experts where it has experts) runs a 16-token prefill and a
1-token decode step under the tracer and under torch.utils.flop_counter.FlopCounterMode. Two checks:

- FLOPs. FlopCounterMode counts matmuls only (mm, addmm, bmm and the attention kernels it knows), so
  we compare our matrix-unit FLOPs. Conventions matched: FlopCounterMode has no formula for
  aten::_grouped_mm (the MoE experts path) nor for CPU flash attention
  (aten::_scaled_dot_product_flash_attention_for_cpu); we give it one each, 2·rows·K·N and its own
  full-square attention count, 2·B·H·Nq·Nkv·(d + dv). The one remaining difference is our attention
  convention (roofline.tracing.registry): we count only the (query, key) pairs the mask keeps, it counts
  the whole square; the test subtracts the masked pairs, 2·(d + dv)·B·H·masked, computed here from the
  prompt length. Within 0.1% (the numbers agree exactly).
- Weight bytes, exactly: every parameter the step reads, each once, at its dtype: the whole tensor,
  except the embedding table (only the rows gathered: tokens × hidden) and the experts (only those
  the router picked: their share of the stacked [E, ...] tensors). The router's picks are read from the
  experts module's own input (top-k indices), not from the tracer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", minversion="5")

from roofline.tracing import Trace, trace  # noqa: E402
from roofline.vocab import Role, Unit  # noqa: E402

pytestmark = pytest.mark.torch

PROMPT = 16  # prefill tokens
HIDDEN, HEADS, LAYERS, VOCAB = 64, 4, 2, 256
COMMON = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=LAYERS,
              num_attention_heads=HEADS, max_position_embeddings=128, tie_word_embeddings=False)


@dataclass(frozen=True)
class Case:
    name: str
    config: Callable[[], Any]
    qk_dim: int  # per-head q/k size
    v_dim: int  # per-head v size


CASES = [
    Case("llama", lambda: transformers.LlamaConfig(**COMMON, num_key_value_heads=2), 16, 16),
    Case("qwen2", lambda: transformers.Qwen2Config(**COMMON, num_key_value_heads=2), 16, 16),
    Case("mixtral", lambda: transformers.MixtralConfig(**COMMON, num_key_value_heads=2, num_local_experts=4,
                                                       num_experts_per_tok=2), 16, 16),
    # MLA: q/k heads of 16 + 8 (nope + rope) and v heads of 16 differ, so PyTorch runs the math fallback
    Case("deepseek-v3", lambda: transformers.DeepseekV3Config(
        **COMMON, num_key_value_heads=HEADS, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2,
        n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8,
        qk_nope_head_dim=16, v_head_dim=16, n_group=1, topk_group=1), 24, 16),
]


def _grouped_mm_flop(a: Any, b: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """a [M, K] @ b [G, K, N]: 2·M·K·N (every row belongs to one group)."""
    return 2 * a[0] * a[1] * b[-1]


def _cpu_flash_flop(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """torch.utils.flop_counter's own attention count (the whole square): 2·B·H·Nq·Nkv·(d + dv)."""
    b, h, nq, d = q
    return 2 * b * h * nq * k[-2] * (d + v[-1])


def flop_counter_total(fn: Callable[[], Any]) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    custom = {torch.ops.aten._grouped_mm: _grouped_mm_flop,
              torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_flop}
    with torch.inference_mode(), FlopCounterMode(display=False, custom_mapping=custom) as counter:
        fn()
    return int(counter.get_total_flops())


@dataclass
class Run:
    model: Any
    trace: Trace
    reference: int  # FlopCounterMode's FLOPs
    tokens: int
    keys: int  # keys each query could see (the cache's length after the step)
    queries: int
    routed: list[set[int]]  # per MoE layer, the experts the router picked


def _routed_picks(model: Any) -> tuple[list[set[int]], list[Any]]:
    """A pre-forward hook on each experts module records the experts its input's top-k indices name."""
    picks: list[set[int]] = []
    handles = []
    for path, module in model.named_modules():
        if path.endswith("mlp.experts"):
            def hook(_m: Any, args: tuple[Any, ...], path: str = path) -> None:
                picks.append({int(e) for e in args[1].flatten().tolist()})
            handles.append(module.register_forward_pre_hook(hook))
    return picks, handles


def run_steps(case: Case) -> tuple[Run, Run]:
    """Prefill of PROMPT tokens, then one decode step, each traced and counted by FlopCounterMode."""
    torch.manual_seed(0)
    cfg = case.config()
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ids = torch.randint(0, VOCAB, (1, PROMPT))
    nxt = torch.randint(0, VOCAB, (1, 1))
    with torch.inference_mode():
        cache = transformers.DynamicCache(config=cfg)
        ref_prefill = flop_counter_total(lambda: model(ids, cache=transformers.DynamicCache(config=cfg)))
        picks, handles = _routed_picks(model)
        with trace(model) as t_prefill:
            model(ids, cache=cache)
        prefill_picks = list(picks)
        picks.clear()
        decode_cache = copy.deepcopy(cache)
        position = torch.tensor([[PROMPT]])
        ref_decode = flop_counter_total(lambda: model(nxt, cache=decode_cache, position_ids=position))
        picks.clear()
        with trace(model) as t_decode:
            model(nxt, cache=cache, position_ids=position)
        for h in handles:
            h.remove()
    return (Run(model, t_prefill, ref_prefill, PROMPT, PROMPT, PROMPT, prefill_picks),
            Run(model, t_decode, ref_decode, 1, PROMPT + 1, 1, list(picks)))


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def steps(request: pytest.FixtureRequest) -> tuple[Case, Run, Run]:
    case = request.param
    return (case, *run_steps(case))


def matrix_flop(t: Trace) -> float:
    return sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in t.ops)


def masked_pairs(run: Run) -> int:
    """Causal pairs the mask removes per head and layer: the queries are the last Nq of Nkv keys, so
    query i (of Nq) sees Nkv − Nq + i + 1 keys; the square is Nq·Nkv."""
    kept = sum(run.keys - run.queries + i + 1 for i in range(run.queries))
    return run.queries * run.keys - kept


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_matrix_flops_match_flop_counter_with_matched_conventions(steps: tuple[Case, Run, Run], phase: str) -> None:
    case, prefill, decode = steps
    run = prefill if phase == "prefill" else decode
    assert not run.trace.errors
    # FlopCounterMode's whole square less the masked pairs: 2·(d + dv) FLOPs per pair, per head and layer
    # (prefill: 16·15/2 = 120 pairs of 256; decode: none, one query sees all 17 keys)
    masked = 2 * (case.qk_dim + case.v_dim) * HEADS * LAYERS * masked_pairs(run)
    expected = run.reference - masked
    assert matrix_flop(run.trace) == pytest.approx(expected, rel=1e-3)


def parameter_bytes_read(run: Run) -> float:
    """The trace's weight bytes: each op's parameter inputs (a gathered or routed part of one
    included), buffers (RoPE's inv_freq, a router's bias) left out."""
    params = {n for n, _ in run.model.named_parameters()}
    total = 0.0
    for op in run.trace.ops:
        for t in op.inputs:
            base = t.name.split(".rows#")[0].split(".groups#")[0]
            if t.role is Role.WEIGHT and base in params:
                total += t.bytes
    return total


def expected_parameter_bytes(run: Run) -> float:
    """Every parameter once, the embedding table's gathered rows only, and only the routed experts."""
    def layer(name: str) -> int:
        return int(name.split(".layers.")[1].split(".")[0])

    params = dict(run.model.named_parameters())
    moe_layers = sorted({layer(n) for n in params if ".mlp.experts." in n})  # run.routed is in this order
    total = 0.0
    for name, p in params.items():
        size = p.numel() * p.element_size()
        if name.endswith("embed_tokens.weight"):
            size = run.tokens * p.shape[1] * p.element_size()  # tokens × hidden
        elif ".mlp.experts." in name:
            picked = run.routed[moe_layers.index(layer(name))]
            size = size * len(picked) // p.shape[0]  # the picked experts' share of [E, ...]
        total += size
    return total


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_weight_bytes_are_the_parameters_the_step_reads(steps: tuple[Case, Run, Run], phase: str) -> None:
    _, prefill, decode = steps
    run = prefill if phase == "prefill" else decode
    assert parameter_bytes_read(run) == expected_parameter_bytes(run)


def test_mixtral_decode_reads_only_the_routed_experts() -> None:
    """One token, top-2 of 4 experts: the experts' bytes are 2/4 of theirs (the issue's case: all 4 were read)."""
    _, decode = run_steps(CASES[2])
    experts = sum(p.numel() * 4 for n, p in decode.model.named_parameters() if ".mlp.experts." in n)
    read = sum(t.bytes for op in decode.trace.ops for t in op.inputs if ".mlp.experts." in t.name
               and t.role is Role.WEIGHT)
    assert [len(p) for p in decode.routed] == [2, 2]
    assert read == experts // 2
    assert sum(op.flop for op in decode.trace.ops if op.kind == "grouped_matmul") > 0


def test_static_cache_decode_charges_the_kv_rows_it_writes() -> None:
    """A StaticCache decode writes one position per layer into K and V (index_copy_): the rows, not the
    whole [1, 2, 64, 16] cache read and written again (three times the cache's traffic before)."""
    torch.manual_seed(0)
    cfg = CASES[0].config()
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.inference_mode():
        cache = transformers.StaticCache(config=cfg, max_cache_len=64)
        model(torch.randint(0, VOCAB, (1, PROMPT)), cache=cache)
        with trace(model) as t:
            model(torch.randint(0, VOCAB, (1, 1)), cache=cache, position_ids=torch.tensor([[PROMPT]]))
    writes = [op for op in t.ops if op.kind == "index_copy"]
    assert len(writes) == 2 * LAYERS  # K and V of each layer
    row = 1 * 2 * 1 * 16 * 4  # [B, kv heads, 1 position, head dim] fp32 = 128 bytes
    for op in writes:
        assert sum(x.bytes for x in op.outputs) == row
        assert sum(x.bytes for x in op.inputs) == row + 8  # the new row and its int64 position
    # attention reads the whole cache once (64 slots), and counts only the 17 keys the mask keeps
    attention = [op for op in t.ops if op.kind == "attention_qk"]
    assert len(attention) == LAYERS
    assert sum(op.flop for op in attention) == LAYERS * 2 * HEADS * (PROMPT + 1) * 16  # 2·H·17·d per layer
    cache_bytes = 1 * 2 * 64 * 16 * 4
    assert any(x.bytes == cache_bytes for x in attention[0].inputs)


def test_eager_and_sdpa_attention_count_alike() -> None:
    """transformers' eager attention (matmul, + causal mask, softmax, matmul) and its SDPA path give the
    same FLOPs per kind, prefill and decode: the one attention convention on both paths."""
    by_kind = {}
    for impl in ("sdpa", "eager"):
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(**COMMON, num_key_value_heads=2, attn_implementation=impl)
        model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
        ids = torch.randint(0, VOCAB, (1, PROMPT))
        with torch.inference_mode():
            cache = transformers.DynamicCache(config=cfg)
            with trace(model) as prefill:
                model(ids, cache=cache)
            with trace(model) as decode:
                model(ids[:, :1], cache=cache, position_ids=torch.tensor([[PROMPT]]))
        by_kind[impl] = (prefill.flop_by_kind(), decode.flop_by_kind())
    kinds = ("attention_qk", "softmax", "attention_pv", "matmul")
    for sdpa, eager in zip(by_kind["sdpa"], by_kind["eager"], strict=True):
        assert {k: eager[k] for k in kinds} == {k: sdpa[k] for k in kinds}
    # prefill q·kᵀ: 2·H·pairs·d per layer, 136 of 256 pairs kept: 2 layers·2·4·136·16 = 34,816
    assert by_kind["eager"][0]["attention_qk"] == LAYERS * 2 * HEADS * (PROMPT * (PROMPT + 1) // 2) * 16
