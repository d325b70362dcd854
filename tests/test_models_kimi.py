"""Kimi K2.5 (`kimi_k25`) from its own config.json files (tests/fixtures/configs, hub pages in its README): the
DeepSeek-V3 language model of text_config analysed, the MoonViT vision tower counted in memory by hand
from vision_config (transformers models/kimi_k25: Kimi_K25VisionModel, Kimi_K25MultimodalProjection), the
INT4 experts of moonshotai's compressed-tensors checkpoint exactly, NVIDIA's NVFP4 export, and a hostile
config per field the parser reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import analyze_model, build_graph, config_from_dict, load_config

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
K25 = str(CONFIGS / "Kimi-K2.5")
H = 7168

# MoonViT (vision_config): w 1152, I 4304, 27 blocks, patch 14, a 64 × 64 learned position grid, 2 × 2 merge
W, I = 1152, 4304
TOWER = (3 * 14 * 14 * W + W  # patch Conv2d with its bias
         + 64 * 64 * W  # spatial positions (the temporal sinusoid is a buffer)
         + 27 * (4 * W + 4 * (W * W + W) + 2 * W * I + I + W)  # LayerNorms, q k v proj, fc1 fc2
         + 2 * W)  # final LayerNorm
PROJECTOR = 2 * W + (4 * W) ** 2 + 4 * W + 4 * W * H + H  # LayerNorm, in_proj, out_proj to the text width


def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / "Kimi-K2.5" / "config.json").read_text())
    return data


def test_language_model_is_kimi_k2s_and_the_tower_is_counted() -> None:
    cfg = load_config(K25)
    assert cfg.param_counts().parts["vision"] == TOWER + PROJECTOR == 471_143_920
    # NVIDIA's Kimi K2.5 page (developer.nvidia.com, "Build with Kimi K2.5 multimodal VLM"): 1T total,
    # 32.86B active; the vision tower is not in a text token's active count
    assert cfg.active_params / 1e9 == pytest.approx(32.86, abs=0.005)
    assert round(cfg.total_params / 1e12, 2) == 1.03
    kimi_k2 = load_config(str(CONFIGS / "Kimi-K2-Instruct"))  # the same language model
    assert cfg.total_params - TOWER - PROJECTOR == kimi_k2.total_params
    assert cfg.layer_groups() == (("MLA", 61), ("dense MLP", 1), ("MoE", 60))
    # MLA's latent: (512 + 64) · 61 layers · 2 bytes
    assert cfg.kv_cache_bytes_per_token() == 576 * 61 * 2


def test_int4_experts_exactly() -> None:
    # text_config.quantization_config (compressed-tensors, pack-quantized): the routed experts' Linear layers
    # in 4-bit integers with one 16-bit scale per 32 (symmetric: no zero point), 4 + 16/32 bits; its ignore
    # list keeps attention (re:.*self_attn.*), the shared experts and the dense MLP in BF16, and the router
    # (a Parameter, no Linear) and the tables are never quantized; the vision tower is outside the text
    # model's quantization_config
    cfg = load_config(K25)
    assert cfg.weights_dtype is not None and cfg.weights_dtype.bytes_per_element == (4 + 16 / 32) / 8
    parts = cfg.param_counts().parts
    kept = dict(cfg.unquantized)
    assert all(kept.get(p) == 1.0 for p in ("attention", "shared_experts", "mlp", "router", "vision"))
    assert "experts" not in kept and not cfg.load_warnings
    a = analyze_model(K25, "h200", "decode", 1, 4096)
    expected = parts["experts"] * 4.5 / 8 + (cfg.total_params - parts["experts"]) * 2
    assert a.memory.weights_bytes == pytest.approx(expected, rel=1e-12)
    assert round(expected / 1e9) == 595


def test_nvfp4_export() -> None:
    # nvidia/Kimi-K2.6-NVFP4: NVFP4 (4 + 8/16 bits) but for its exclude list: lm_head, layer 0, every
    # layer's attention and shared experts, the vision tower and projector
    cfg = load_config(str(CONFIGS / "Kimi-K2.6-NVFP4"))
    assert cfg.weights_dtype is not None and cfg.weights_dtype.name == "nvfp4"
    kept = dict(cfg.unquantized)
    assert all(kept.get(p) == 1.0 for p in ("attention", "shared_experts", "mlp", "vision", "lm_head"))
    assert not any("not read" in w for w in cfg.load_warnings)


def test_the_step_is_the_language_models() -> None:
    cfg = load_config(K25)
    step = build_graph(cfg, "decode", 1, 4096).graph
    assert not any("vision" in t.name for op in step.ops for t in op.inputs)


@pytest.mark.parametrize(("change", "says"), [
    ({"text_config": None}, "'text_config' must be an object"),
    ({"vision_config": None}, "'vision_config' must be an object"),
    ({"text_config": {"model_type": "qwen3"}}, "text_config's model_type 'qwen3' is not read"),
])
def test_a_hostile_wrapper_is_refused_by_name(change: dict[str, Any], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**raw(), **change})


@pytest.mark.parametrize(("change", "says"), [
    ({"pos_emb_type": "rope"}, "'pos_emb_type' 'rope' is not read"),
    ({"mm_projector_type": "mlp"}, "'mm_projector_type' 'mlp' is not read"),
    ({"merge_kernel_size": [2]}, "'merge_kernel_size' must be two positive integers"),
    ({"vt_hidden_size": None}, "missing field 'vt_hidden_size'"),
    ({"vt_num_attention_heads": 7}, "'vt_num_attention_heads' .* must divide vt_hidden_size"),
    ({"mm_hidden_size": 1024}, "'mm_hidden_size' .* differs from vt_hidden_size"),
    ({"text_hidden_size": 4096}, "'text_hidden_size' differs from text_config's hidden_size"),
])
def test_a_hostile_vision_field_is_refused_by_name(change: dict[str, Any], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**raw(), "vision_config": {**raw()["vision_config"], **change}})


def test_an_unreadable_ignore_pattern_is_named() -> None:
    text = raw()["text_config"]
    q = {**text["quantization_config"], "ignore": ["re:(unclosed"]}
    cfg = config_from_dict({**raw(), "text_config": {**text, "quantization_config": q}})
    assert any("re:(unclosed" in w and "not read" in w for w in cfg.load_warnings)
