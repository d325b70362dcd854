"""Today's checkpoints from their own config.json (tests/fixtures/configs, sources in its README):
quantized weights exactly (every FP8 spelling, the modules a checkpoint keeps in BF16, MXFP4 on
gpt-oss's experts only, NVFP4 from hf_quant_config.json), gpt-oss and Kimi K2 against their model
cards, KV cache per token by hand from the config, and a hostile config per new field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import analyze_model, config_from_dict, load_config, model_dtypes
from roofline.models.config import preset_dict
from roofline.models.dtypes import for_checkpoint

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
FP8_BLOCK = (8 + 32 / (128 * 128)) / 8  # E4M3 + one FP32 scale per 128x128 block, bytes a weight
MXFP4 = (4 + 8 / 32) / 8  # OCP MX: 32 E2M1 values share one E8M0 scale: 4.25 bits
NVFP4 = (4 + 8 / 16) / 8  # NVIDIA: 16 E2M1 values share one FP8 E4M3 scale: 4.5 bits


def raw(folder: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / folder / "config.json").read_text())
    return data


def checkpoint_bytes(folder: str) -> float:
    cfg = load_config(str(CONFIGS / folder))
    return for_checkpoint(model_dtypes(), cfg.weights_dtype, cfg.unquantized).weights_bytes(cfg.param_counts().parts)


# --- quantized checkpoints ---------------------------------------------------------------------------

@pytest.mark.parametrize("spelling", ["e4m3", "e4m3fn", "float8_e4m3fn", "float8_e4m3"])
def test_every_fp8_spelling_is_read(spelling: str) -> None:
    # MiniMax-M2.5's config.json writes fmt "float8_e4m3fn" (torch's name); Qwen3's writes "e4m3"
    q = {"quant_method": "fp8", "fmt": spelling, "weight_block_size": [128, 128]}
    cfg = config_from_dict({**preset_dict("qwen3-32b"), "quantization_config": q})
    assert cfg.weights_dtype is not None and cfg.weights_dtype.bytes_per_element == FP8_BLOCK


def test_qwen3_30b_a3b_fp8_keeps_its_tables_routers_and_norms_in_bf16() -> None:
    # Qwen3-30B-A3B-FP8's modules_to_not_convert: lm_head, every layer's mlp.gate (the router) and
    # norms; the embedding is an nn.Embedding, never converted. Tables 2·151,936·2,048, routers
    # 48·2,048·128, all at 2 bytes; the rest at FP8 with block scales
    cfg = load_config(str(CONFIGS / "Qwen3-30B-A3B-FP8"))
    parts = cfg.param_counts().parts
    tables, routers = 2 * 151_936 * 2_048, 48 * 2_048 * 128
    assert parts["embedding"] + parts["lm_head"] == tables and parts["router"] == routers
    kept = tables + routers + parts["norms"]
    expected = kept * 2 + (cfg.total_params - kept) * FP8_BLOCK
    assert checkpoint_bytes("Qwen3-30B-A3B-FP8") == pytest.approx(expected, rel=1e-12)
    # all of it at FP8 was 2.0% too few bytes (issue 22)
    assert cfg.total_params * FP8_BLOCK / expected == pytest.approx(1 - 0.0204, abs=5e-4)
    a = analyze_model(str(CONFIGS / "Qwen3-30B-A3B-FP8"), "h200", "decode", 8, 8192)
    assert a.memory.weights_bytes == pytest.approx(expected, rel=1e-12)
    # the step reads the LM head at 2 bytes a weight: 151,936·2,048·2
    lm = [t for op in a.model.graph.ops for t in op.inputs if t.name == "lm_head.weight"]
    assert lm and lm[0].bytes == 151_936 * 2_048 * 2


def test_the_same_model_in_bf16_has_the_same_parameters() -> None:
    assert load_config(str(CONFIGS / "Qwen3-30B-A3B")).total_params == \
        load_config(str(CONFIGS / "Qwen3-30B-A3B-FP8")).total_params


def test_nvfp4_reads_the_hf_quant_config_beside_the_config() -> None:
    # nvidia/Qwen3-235B-A22B-NVFP4: config.json has no quantization_config; hf_quant_config.json beside it
    # says quant_algo NVFP4, group_size 16, and excludes every layer's mlp.gate (the router)
    assert "quantization_config" not in raw("Qwen3-235B-A22B-NVFP4")
    cfg = load_config(str(CONFIGS / "Qwen3-235B-A22B-NVFP4"))
    assert cfg.weights_dtype is not None and cfg.weights_dtype.bytes_per_element == NVFP4
    parts = cfg.param_counts().parts
    kept = parts["embedding"] + parts["router"] + parts["norms"]
    excluded = json.loads((CONFIGS / "Qwen3-235B-A22B-NVFP4" / "hf_quant_config.json").read_text())
    head_kept = "lm_head" in excluded["quantization"]["exclude_modules"]
    kept += parts["lm_head"] if head_kept else 0
    assert checkpoint_bytes("Qwen3-235B-A22B-NVFP4") == pytest.approx(kept * 2 + (cfg.total_params - kept) * NVFP4,
                                                                    rel=1e-12)


def test_modelopt_fp8_keeps_the_lm_head_it_excludes() -> None:
    # nvidia/Llama-3.1-70B-Instruct-FP8 hf_quant_config.json: quant_algo FP8, exclude_modules [lm_head]
    cfg = load_config(str(CONFIGS / "Llama-3.1-70B-Instruct-FP8"))
    assert cfg.weights_dtype is not None and cfg.weights_dtype.name == "fp8_e4m3"
    parts = cfg.param_counts().parts
    kept = parts["embedding"] + parts["lm_head"] + parts["norms"]
    assert parts["lm_head"] == 128_256 * 8_192
    assert checkpoint_bytes("Llama-3.1-70B-Instruct-FP8") == pytest.approx(kept * 2 + (cfg.total_params - kept),
                                                                         rel=1e-12)


@pytest.mark.parametrize(("q", "says"), [
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}, "'quantized_layers' must be an object"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 32}, "'group_size' of NVFP4 must be 16"),
    ({"quant_method": "fp8", "modules_to_not_convert": "lm_head"}, "'modules_to_not_convert' must be a list"),
    ({"quant_method": "fp8", "fmt": 5}, "'fmt' must be one of"),
])
def test_hostile_quantization_fields_are_refused_by_name(q: dict[str, Any], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**preset_dict("qwen3-32b"), "quantization_config": q})


def test_an_excluded_module_that_is_not_read_is_named() -> None:
    q = {"quant_method": "fp8", "modules_to_not_convert": ["model.layers.0.mystery_block"]}
    cfg = config_from_dict({**preset_dict("qwen3-32b"), "quantization_config": q})
    assert any("model.layers.0.mystery_block" in w for w in cfg.load_warnings)


# --- gpt-oss ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("folder", "total", "active", "layers", "experts"), [
    # OpenAI, gpt-oss model card (arXiv 2508.10925), table 1: total 116.83B and 20.91B; active per
    # token 5.13B and 3.61B, which count the unembedding and not the embedding table
    ("gpt-oss-120b", 116.83e9, 5.13e9, 36, 128),
    ("gpt-oss-20b", 20.91e9, 3.61e9, 24, 32),
])
def test_gpt_oss_parameters_match_the_model_card(folder: str, total: float, active: float, layers: int,
                                                 experts: int) -> None:
    cfg = load_config(str(CONFIGS / folder))
    assert (cfg.num_layers, cfg.num_experts, cfg.experts_per_token) == (layers, experts, 4)
    assert cfg.total_params == pytest.approx(total, abs=0.005e9)  # the card gives two decimals
    embedding = 201_088 * 2_880
    assert cfg.active_params - embedding == pytest.approx(active, abs=0.005e9)
    parts = cfg.param_counts().parts
    # per layer: 64 sinks; q, k, v biases (64 + 2·8)·64 and o's 2,880; router E·h + E; expert biases E·(2f + h)
    assert parts["sinks"] == layers * 64
    assert parts["expert_biases"] == layers * experts * (2 * 2_880 + 2_880)
    assert parts["router"] == layers * 2_880 * experts


def test_gpt_oss_120b_checkpoint_is_65_gb_with_mxfp4_experts_only() -> None:
    # the experts' projections in MXFP4 (4.25 bits), everything else BF16: the published checkpoint
    # is 65.3 GB (issue 22, from the hub page's file sizes)
    cfg = load_config(str(CONFIGS / "gpt-oss-120b"))
    assert cfg.weights_dtype is not None and cfg.weights_dtype.name == "mxfp4"
    parts = cfg.param_counts().parts
    expected = parts["experts"] * MXFP4 + (cfg.total_params - parts["experts"]) * 2
    assert checkpoint_bytes("gpt-oss-120b") == pytest.approx(expected, rel=1e-12)
    assert 65.0e9 < expected < 65.3e9 * 1.005
    a = analyze_model(str(CONFIGS / "gpt-oss-120b"), "h200", "decode", 8, 8192)
    weights = {t.name: t for op in a.model.graph.ops for t in op.inputs if t.role == "weight"}
    assert weights["qkv_proj.weight"].dtype.name == "bf16"
    assert weights["experts.gate_up.weight"].dtype.name == "mxfp4"


def test_gpt_oss_kv_cache_windows_every_other_layer() -> None:
    # 8 KV heads · 64 · K and V · 2 bytes = 2,048 B per layer per token; 36 layers uncapped: 73,728 B.
    # At 8,192 tokens the 18 sliding layers keep 128 tokens each, the 18 full layers 8,192
    cfg = load_config(str(CONFIGS / "gpt-oss-120b"))
    assert cfg.kv_cache_bytes_per_token() == 2 * 8 * 64 * 36 * 2 == 73_728
    assert cfg.kv_cache_bytes(1, 8192) == 2 * 8 * 64 * 2 * (18 * 8192 + 18 * 128)
    # read as Mixtral (the window on every layer) it would be 36 · 128 tokens: 97% less
    assert cfg.sliding_window == 128 and cfg.attention_layers(cfg.layer_kinds[1]) == 18


def test_gpt_oss_experts_run_the_clamped_swiglu() -> None:
    a = analyze_model(str(CONFIGS / "gpt-oss-20b"), "h200", "decode", 1, 1024)
    act = next(op for op in a.model.graph.ops if op.name == "experts.act")
    # 11 FLOPs per element (kernels.FLOP_PER_ELEMENT swiglu_clamped), 4 experts × 2,880 wide, one token
    assert sum(act.flop_by_unit.values()) == 11 * 4 * 2_880


@pytest.mark.parametrize(("change", "says"), [
    ({"layer_types": None}, "'layer_types' is missing"),
    ({"layer_types": ["sliding_attention"] * 3}, "'layer_types' must be a list of 24"),
    ({"swiglu_limit": "seven"}, "'swiglu_limit' must be a positive number"),
    ({"experts_per_token": 2}, "'experts_per_token' \\(2\\) disagrees with num_experts_per_tok \\(4\\)"),
    ({"hidden_act": "gelu"}, "'hidden_act' 'gelu' is not gpt-oss's"),
    ({"sliding_window": 0}, "'sliding_window' must be a positive integer"),
])
def test_a_hostile_gpt_oss_field_is_refused_by_name(change: dict[str, Any], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**raw("gpt-oss-20b"), **change})


# --- aliases ----------------------------------------------------------------------------------------

def test_kimi_k2_is_deepseek_v3_and_matches_its_model_card() -> None:
    # moonshotai/Kimi-K2-Instruct model card: "1 trillion total parameters, 32 billion activated"
    # (rounded); 61 layers, 384 experts of which 8 routed and 1 shared, MLA 512 + 64
    cfg = load_config(str(CONFIGS / "Kimi-K2-Instruct"))
    assert cfg.is_mla and (cfg.num_experts, cfg.experts_per_token, cfg.num_shared_experts) == (384, 8, 1)
    assert 1.0e12 <= cfg.total_params < 1.05e12
    # activated, the embedding table left out, to the nearest billion
    assert 31.5e9 <= cfg.active_params - 163_840 * 7_168 < 32.5e9
    assert cfg.kv_cache_bytes_per_token() == (512 + 64) * 61 * 2


# --- which KV figure it is (issue 22 item 8) ---------------------------------------------------------

def test_the_kv_figures_are_each_named() -> None:
    # Gemma 2 9B: 8 KV heads · 256 · K and V · 2 bytes = 8,192 B per layer per token; 42 layers uncapped
    # 344,064 B; at 8,192 tokens the 21 windowed layers keep 4,096: 8,192 · (21 · 8,192 + 21 · 4,096) / 8,192
    a = analyze_model("gemma-2-9b", "h200", "decode", 8, 8192)
    assert a.kv_cache == {"bytes_per_token_uncapped": 344_064, "bytes_per_token_at_length": 8_192 * (21 + 21 / 2),
                          "window_tokens": 4096, "state_bytes_per_sequence": 0}
    assert a.to_dict()["kv_cache"] == a.kv_cache
    from roofline.explain import explain_model
    from roofline.report.text.model import model_text

    assert "344,064 B per token uncapped; at 8,192 tokens 258,048 B per token" in model_text(a)
    assert "the figure above is uncapped (every layer, every token); at 8,192 tokens" in explain_model(a)


def test_excluded_attention_projections_count_by_their_share() -> None:
    # nvidia/DeepSeek-V3.1-NVFP4 excludes every layer's q_a, q_b, kv_a and kv_b projections but not o_proj:
    # per layer q_a 7,168·1,536, q_b 1,536·128·192, kv_a 7,168·(512 + 64), kv_b 512·128·(128 + 128), o 128·128·7,168
    cfg = load_config(str(CONFIGS / "DeepSeek-V3.1-NVFP4"))
    kept = 7_168 * 1_536 + 1_536 * 128 * 192 + 7_168 * 576 + 512 * 128 * 256
    assert dict(cfg.unquantized)["attention"] == pytest.approx(kept / (kept + 128 * 128 * 7_168), rel=1e-12)
    assert any("keeps part of its attention in 16 bits" in w for w in cfg.load_warnings)


def test_a_malformed_hf_quant_config_beside_the_config_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(raw("Qwen3-30B-A3B")))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}}))
    with pytest.raises(RooflineError, match=r"hf_quant_config\.json: expected a 'quantization' object"):
        load_config(str(tmp_path))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "W4A8_AWQ"}}))
    with pytest.raises(RooflineError, match="'quant_algo' 'W4A8_AWQ' is not read"):
        load_config(str(tmp_path))
    # beside X_config.json, X_hf_quant_config.json (as aiconfigurator-core's model_configs names them)
    (tmp_path / "m_config.json").write_text(json.dumps(raw("Qwen3-30B-A3B")))
    (tmp_path / "m_hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "NVFP4"}}))
    cfg = load_config(str(tmp_path / "m_config.json"))
    assert cfg.weights_dtype is not None and cfg.weights_dtype.bytes_per_element == NVFP4
