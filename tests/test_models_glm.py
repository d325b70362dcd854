"""GLM-5 (`glm_moe_dsa`) from its own config.json files (tests/fixtures/configs, hub pages in its README):
DeepSeek-V3.2's layout at GLM's widths, GLM-5.2's shared indexer layers, the MTP layer in memory only,
the FP8 and NVFP4 exports' 16-bit modules, and a hostile config per field the parser reads
(transformers models/glm_moe_dsa: GlmMoeDsaConfig, GlmMoeDsaAttention)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import build_graph, config_from_dict, load_config, model_dtypes
from roofline.models.memory import device_weights_bytes
from roofline.parallel import Split
from roofline.vocab import Unit

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
GLM5, GLM52 = str(CONFIGS / "GLM-5"), str(CONFIGS / "GLM-5.2")
H, V, E, F = 6144, 154_880, 256, 2048  # hidden, vocab, routed experts, expert width (the config)


def raw(folder: str = "GLM-5") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / folder / "config.json").read_text())
    return data


# one layer's MLA: q_a h·2048, q_b 2048·64·(192 + 64), kv_a h·(512 + 64), kv_b 512·64·(192 + 256), o 64·256·h
ATTENTION = H * 2048 + 2048 * 64 * 256 + H * 576 + 512 * 64 * 448 + 64 * 256 * H
INDEXER = 2048 * 32 * 128 + H * 128 + H * 32  # wq_b, wk, weights_proj
MOE = H * E + 3 * H * F + E * 3 * H * F  # router, the shared expert, the routed experts


def test_parameters_against_the_technical_report() -> None:
    # GLM-5 technical report (arXiv 2602.15763), its architecture table: 744B total, 40B activated, 3 dense
    # layers, 75 MoE layers, 1 MTP layer
    cfg = load_config(GLM5)
    parts = cfg.param_counts().parts
    assert parts["attention"] == 78 * ATTENTION == 12_871_532_544
    assert parts["indexer"] == 78 * INDEXER
    assert cfg.layer_groups() == (("MLA + DSA top-2048", 78), ("dense MLP", 3), ("MoE", 75), ("MTP", 1))
    mtp = sum(v for k, v in parts.items() if k.startswith("mtp"))
    assert round((cfg.total_params - mtp) / 1e9) == 744
    # activated: 41.8B with the embedding table and the head (0.95B each); 39.9B without them, the report's 40B
    assert cfg.active_params == pytest.approx(41.78e9, abs=0.01e9)
    assert round((cfg.active_params - 2 * V * H) / 1e9) == 40


def test_the_mtp_layer_is_in_memory_not_in_the_step() -> None:
    # model.layers.78: eh_proj 2h·h, one MoE layer (MLA, its indexer, router, shared and routed experts), its
    # norms (enorm, hnorm, shared_head.norm, the block's two, q_a and kv_a, the indexer's k_norm LayerNorm, the
    # router's correction bias); no copy of the embedding or head (GLM-5-FP8's modules_to_not_convert names none)
    cfg = load_config(GLM5)
    parts = cfg.param_counts().parts
    assert parts["mtp"] == 2 * H * H + ATTENTION + INDEXER + H * E + 3 * H * F
    assert parts["mtp_experts"] == E * 3 * H * F
    assert parts["mtp_norms"] == 5 * H + 2048 + 512 + 2 * 128 + E
    assert "mtp_tables" not in parts
    assert cfg.param_counts().active_parts["mtp_experts"] == 0
    # memory holds it: every parameter at 2 bytes; the step's weights do not
    assert device_weights_bytes(cfg, Split(), model_dtypes()) == 2 * cfg.total_params
    step = build_graph(cfg, "decode", 1, 4096).graph
    assert not any("eh_proj" in t.name for op in step.ops for t in op.inputs)
    # under ep 8 the MTP layer's routed experts are divided like the main ones
    ep = device_weights_bytes(cfg, Split(dp=8, ep=8), model_dtypes())
    assert ep == pytest.approx(2 * (cfg.total_params - 7 / 8 * (parts["experts"] + parts["mtp_experts"])), rel=1e-12)


def test_kv_cache_per_token_by_hand() -> None:
    # the latent 512 + 64 in bf16 and the indexer's FP8 key (128 values and one float32 scale) on 78 layers
    assert load_config(GLM5).kv_cache_bytes_per_token() == 78 * ((512 + 64) * 2 + 128 + 4) == 100_152
    # GLM-5.2: indexer_types runs the indexer on layers 0, 1, 2 and every 4th from 6 (21 layers); the 57
    # "shared" layers reuse the previous full layer's top-k and cache no index key
    cfg = load_config(GLM52)
    assert cfg.indexer_layers == 3 + (74 - 6) // 4 + 1 == 21
    assert cfg.kv_cache_bytes_per_token() == 78 * 576 * 2 + 21 * 132 == 92_628


def test_shared_indexer_layers_run_no_indexer() -> None:
    cfg = load_config(GLM52)
    assert cfg.param_counts().parts["indexer"] == 21 * INDEXER
    ops = {op.name: op for op in build_graph(cfg, "decode", 4, 32_768).graph.ops}
    assert ops["indexer.scores"].count == 21
    assert ops["indexer.scores"].flop_by_unit[Unit.MATRIX] == 2 * 32 * 128 * 4 * 32_768
    # MLA on every one of the 78 layers over min(L, 2048) latent rows, 64 heads of 576
    assert ops["attn.qk"].count == 78
    assert ops["attn.qk"].flop_by_unit[Unit.MATRIX] == 2 * 4 * 64 * 2048 * 576


def test_the_schedule_from_index_topk_freq_as_transformers_derives_it() -> None:
    # GlmMoeDsaConfig: layer i full when max(i − offset + 1, 0) % freq == 0; GLM-5.2 gives its list and the
    # freq 4 / offset 3 that make it; without the list the same layers come out
    given = raw("GLM-5.2")
    derived = {k: v for k, v in given.items() if k != "indexer_types"}
    assert config_from_dict(derived).indexer == config_from_dict(given).indexer
    pattern = {**derived, "index_topk_pattern": "F" * 40 + "FS" * 19}
    assert config_from_dict(pattern).indexer_layers == 40 + 19


def test_fp8_export_keeps_its_listed_modules_in_16_bits() -> None:
    # GLM-5-FP8's modules_to_not_convert: every layer's indexer weights_proj (as 'indexers_proj') and router,
    # and of the MTP layer eh_proj and the router too; the routed experts and the rest are FP8
    cfg = load_config(str(CONFIGS / "GLM-5-FP8"))
    kept = dict(cfg.unquantized)
    assert kept["indexer"] == pytest.approx(H * 32 / INDEXER, rel=1e-12)
    assert kept["router"] == 1.0
    mtp = cfg.param_counts().parts["mtp"]
    assert kept["mtp"] == pytest.approx((2 * H * H + H * E + H * 32) / mtp, rel=1e-12)
    assert "mtp_experts" not in kept
    assert not any("not read" in w for w in cfg.load_warnings)


def test_nvfp4_export_keeps_the_mtp_layer_whole_in_16_bits() -> None:
    # nvidia/GLM-5-NVFP4's hf_quant_config.json excludes model.layers.78* (the MTP layer) and every indexer
    cfg = load_config(str(CONFIGS / "GLM-5-NVFP4"))
    kept = dict(cfg.unquantized)
    assert kept["mtp"] == kept["mtp_experts"] == kept["indexer"] == 1.0
    assert not any("not read" in w for w in cfg.load_warnings)


@pytest.mark.parametrize(("change", "says"), [
    ({"indexer_types": ["full"] * 77}, "'indexer_types' must be a list of 78"),
    ({"indexer_types": ["shared"] + ["full"] * 77}, "'indexer_types' starts with a 'shared' layer"),
    ({"indexer_types": ["full"] * 77 + ["sparse"]}, "'indexer_types' must be a list of 78"),
    ({"index_topk_pattern": "FS"}, "'index_topk_pattern' must be a string of 78"),
    ({"index_topk_freq": 0}, "'index_topk_freq' must be a positive integer"),
    ({"index_skip_topk_offset": -1}, "'index_skip_topk_offset' must be an integer of at least 0"),
    ({"qk_head_dim": 192}, "'qk_head_dim' .* must be qk_nope_head_dim \\+ qk_rope_head_dim"),
    ({"num_experts": 128}, "'num_experts' .* differs from n_routed_experts"),
    ({"layer_types": ["full_attention"] * 78}, "'layer_types' must be a list of 78"),
    ({"mlp_layer_types": ["dense"] * 3 + ["moe"] * 75}, "'mlp_layer_types' must be a list of 78"),
    ({"attention_bias": True}, "'attention_bias' is true"),
    ({"num_nextn_predict_layers": -1}, "'num_nextn_predict_layers' must be an integer of at least 0"),
    ({"index_n_heads": None}, "missing field 'index_n_heads'"),
])
def test_a_hostile_glm_field_is_refused_by_name(change: dict[str, Any], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**raw(), **change})


def test_head_dim_is_not_read() -> None:
    # transformers overwrites head_dim with qk_rope_head_dim; GLM-5.2 writes 192, GLM-5 64: the same model
    assert config_from_dict({**raw(), "head_dim": 192}).total_params == config_from_dict(raw()).total_params
