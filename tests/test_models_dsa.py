"""DeepSeek-V3.2 (`deepseek_v32`) from its own config.json (tests/fixtures/configs, hub page in its
README): DeepSeek Sparse Attention. The lightning indexer's cached FP8 key and its FLOPs over the whole
context, MLA over the top-k = 2048 tokens only, by hand from the config (DeepSeek-V3.2-Exp inference
code's Indexer; vLLM deepseek_v2.py), under TP, the step model against the graph, and a hostile config
per new field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import StepModel, analyze_model, build_graph, config_from_dict, load_config, model_dtypes
from roofline.parallel import Split, deploy
from roofline.vocab import Unit

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
V32 = str(CONFIGS / "DeepSeek-V3.2")


def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / "DeepSeek-V3.2" / "config.json").read_text())
    return data


def _op(cfg: Any, phase: str, batch: int, seq: int, name: str, split: Split | None = None) -> Any:
    return next(op for op in build_graph(cfg, phase, batch, seq, split=split).graph.ops if op.name == name)


def test_parameters_are_v3s_and_the_indexer() -> None:
    # DeepSeek-V3's main model is 671B (its technical report, arXiv 2412.19437; checked in test_models);
    # V3.2 adds per layer the indexer's wq_b q_lora·64·128, wk h·128, weights_proj h·64 and its k_norm
    # LayerNorm 2·128, and so does its multi-token-prediction layer (model.layers.61, roofline.models.mtp).
    cfg, v3 = load_config(V32), load_config("deepseek-v3")
    h, q_lora = 7168, 1536
    one = q_lora * 64 * 128 + h * 128 + h * 64
    assert cfg.param_counts().parts["indexer"] == 61 * one
    assert cfg.total_params == v3.total_params + 62 * one + 62 * 2 * 128
    # the main model 672B; with the 14B MTP layer, the hub page's "685B params" (deepseek-ai/DeepSeek-V3.2)
    mtp = sum(v for k, v in cfg.param_counts().parts.items() if k.startswith("mtp"))
    assert round((cfg.total_params - mtp) / 1e9) == 672
    assert round(cfg.total_params / 1e9) == 685
    assert cfg.layer_groups() == (("MLA + DSA top-2048", 61), ("dense MLP", 3), ("MoE", 58), ("MTP", 1))


def test_kv_cache_per_token_holds_the_fp8_index_key() -> None:
    cfg = load_config(V32)
    # the latent 512 + 64 in bf16, and the index key: 128 FP8 values and one float32 scale per 128
    assert cfg.kv_cache_bytes_per_token() == 61 * ((512 + 64) * 2 + 128 + 4) == 78_324
    # never capped: MLA reads 2048 rows, but the cache holds every token for the indexer to score
    assert cfg.kv_cache_bytes(2, 32_768) == 2 * 32_768 * 78_324
    # read as V3 (no indexer) it would be 61·576·2 = 70,272 B per token: 10% less
    assert load_config("deepseek-v3").kv_cache_bytes_per_token() == 70_272


def test_indexer_scores_the_whole_context_and_mla_attends_top_k() -> None:
    cfg = load_config(V32)
    b, ctx = 4, 32_768
    scores = _op(cfg, "decode", b, ctx, "indexer.scores")
    # every cached token scored: 2·H_I·d_I per (query, key) on the matrix units, 3·H_I on the vector lanes
    assert scores.flop_by_unit[Unit.MATRIX] == 2 * 64 * 128 * b * ctx
    assert scores.flop_by_unit[Unit.VECTOR] == 3 * 64 * b * ctx
    cache = next(t for t in scores.inputs if t.name == "indexer.k_cache")
    assert cache.bytes == b * ctx * 132  # the FP8 keys and their scales
    # absorbed MLA decode: q·c over 576 dims against min(L, 2048) = 2048 latent rows, per head
    qk = _op(cfg, "decode", b, ctx, "attn.qk")
    assert qk.flop_by_unit[Unit.MATRIX] == 2 * b * 128 * 2048 * 576
    # prefill 8192: the indexer over the T(T+1)/2 causal pairs, MLA over Σ min(i, 2048)
    p = _op(cfg, "prefill", 1, 8192, "indexer.scores")
    assert p.flop_by_unit[Unit.MATRIX] == 2 * 64 * 128 * 8192 * 8193 // 2
    full = load_config("deepseek-v3")
    sparse_pairs = 2048 * 2049 // 2 + (8192 - 2048) * 2048
    ratio = sparse_pairs / (8192 * 8193 / 2)
    assert _op(cfg, "prefill", 1, 8192, "attn.qk").flop_by_unit[Unit.MATRIX] == pytest.approx(
        ratio * _op(full, "prefill", 1, 8192, "attn.qk").flop_by_unit[Unit.MATRIX], rel=1e-12)


def test_tensor_parallel_shards_mla_heads_and_replicates_the_indexer() -> None:
    # vLLM's indexer projections are ReplicatedLinear: every device runs it whole
    cfg = load_config(V32)
    one, eight = _op(cfg, "decode", 8, 8192, "indexer.scores"), _op(cfg, "decode", 8, 8192, "indexer.scores",
                                                                     Split(tp=8))
    assert eight.flop_by_unit == one.flop_by_unit
    qk1, qk8 = _op(cfg, "decode", 8, 8192, "attn.qk"), _op(cfg, "decode", 8, 8192, "attn.qk", Split(tp=8))
    assert qk8.flop_by_unit[Unit.MATRIX] * 8 == qk1.flop_by_unit[Unit.MATRIX]
    with pytest.raises(RooflineError, match=r"does not divide .*128 query heads"):
        build_graph(cfg, "decode", 8, 8192, split=Split(tp=48))


@pytest.mark.parametrize("phase", ["prefill", "decode"])
@pytest.mark.parametrize("split", [None, Split(tp=8)])
def test_step_model_agrees_with_the_graph(phase: str, split: Split | None) -> None:
    cfg, dt = load_config(V32), model_dtypes()
    nvls = deploy("dgx-h100", split).nvls  # its NVSwitch reduces: the graph's all-reduces may run NVLS
    fitted = StepModel.fit(cfg, phase, dt, split=split, devices_per_node=8, nvls=nvls)  # checks its own fit
    for b, s in ((8, 700), (16, 3000), (64, 9000)):
        a = analyze_model(cfg, "dgx-h100", phase, b, s, dtypes=dt, split=split)
        r = fitted.evaluate([b], [s], a.machine, a.dtype)
        assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)
        assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)


@pytest.mark.parametrize(("change", "says"), [
    ({"index_n_heads": 0}, "'index_n_heads' must be a positive integer"),
    ({"index_head_dim": None}, "missing field 'index_head_dim'"),
    ({"index_topk": "2048"}, "'index_topk' must be a positive integer"),
    ({"q_lora_rank": None}, "'q_lora_rank' is needed by the indexer"),
])
def test_a_hostile_dsa_field_is_refused_by_name(change: dict[str, Any], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**raw(), **change})


def test_nvfp4_keeps_the_indexer_in_16_bits() -> None:
    # nvidia/DeepSeek-V3.2-NVFP4's hf_quant_config.json excludes model.layers.<i>.self_attn.indexer* on every layer
    cfg = load_config(str(CONFIGS / "DeepSeek-V3.2-NVFP4"))
    assert dict(cfg.unquantized)["indexer"] == 1.0
    assert not any("not read" in w for w in cfg.load_warnings)


def test_decode_limit_counts_the_indexer() -> None:
    # (2·P + MLA over min(L, 2048) + the indexer's (2·128 + 3)·64 per cached token) / (the latent rows read
    # + the whole index cache), 61 layers, at L = 32,768
    a = analyze_model(V32, "h100", "decode", 8, 32_768)
    cfg = a.config
    flop = 2 * cfg.matmul_params + 2 * 128 * (576 + 512) * 2048 * 61 + (2 * 128 + 3) * 64 * 32_768 * 61
    kv = 576 * 2 * 2048 * 61 + 132 * 32_768 * 61
    assert a.decode_limit.flop_per_byte == pytest.approx(flop / kv, rel=1e-12)


def test_fp8_checkpoint_keeps_the_indexer_weights_proj_in_bf16() -> None:
    # DeepSeek-V3.2's inference code builds weights_proj (h -> 64) in the default dtype, and vLLM's loader
    # notes FP8 checkpoints store it in BF16 beside an FP8 wk: its share of each layer's indexer stays 16-bit
    cfg = load_config(V32)
    h, q_lora = 7168, 1536
    assert dict(cfg.unquantized)["indexer"] == pytest.approx(h * 64 / (q_lora * 64 * 128 + h * 128 + h * 64),
                                                             rel=1e-12)
    assert not any("indexer" in w for w in cfg.load_warnings)  # always so: no news
