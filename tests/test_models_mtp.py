"""Multi-token prediction layers (roofline.models.mtp): counted in the checkpoint's memory, left out of
the main step, by hand from DeepSeek-V3's config and its README_WEIGHTS.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import analyze_model, build_graph, config_from_dict, load_config, model_dtypes
from roofline.models.memory import device_weights_bytes
from roofline.parallel import Split

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
H, V, E, F = 7168, 129_280, 256, 2048  # DeepSeek-V3: hidden, vocab, routed experts, expert width


def deepseek_v3() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(__file__).parents[1] / "src" / "roofline" / "models" / "presets"
                                       / "deepseek-v3.json").read_text())
    return data


def mtp_total(cfg: Any) -> int:
    return sum(n for p, n in cfg.param_counts().parts.items() if p.startswith("mtp"))


def test_deepseek_v3_mtp_layer_by_hand_and_against_its_readme() -> None:
    # model.layers.61: eh_proj 2h·h; MLA q_a h·1536, q_b 1536·128·192, kv_a h·576, kv_b 512·128·256,
    # o 128·128·h; the router h·256, one shared expert 3·h·2048; 256 routed experts 3·h·2048 each
    cfg = load_config("deepseek-v3")
    parts = cfg.param_counts().parts
    attention = H * 1536 + 1536 * 128 * 192 + H * 576 + 512 * 128 * 256 + 128 * 128 * H
    assert parts["mtp"] == 2 * H * H + attention + H * E + 3 * H * F
    assert parts["mtp_experts"] == E * 3 * H * F
    # enorm, hnorm, shared_head.norm, the block's two norms, q_a and kv_a norms, the correction bias
    assert parts["mtp_norms"] == 5 * H + 1536 + 512 + E
    # its own embed_tokens and shared_head.head (README_WEIGHTS.md: "excluding the shared 0.9B Embedding
    # and 0.9B output Head")
    assert parts["mtp_tables"] == 2 * V * H
    # README_WEIGHTS.md: "11.5B unique parameters"; README: 685B = 671B main + 14B MTP
    assert (mtp_total(cfg) - parts["mtp_tables"]) / 1e9 == pytest.approx(11.5, abs=0.15)
    assert round((cfg.total_params - mtp_total(cfg)) / 1e9) == 671
    assert cfg.total_params / 1e9 == pytest.approx(685, abs=1)


def test_not_in_the_main_step() -> None:
    # the main forward never runs it: active parameters, the step's FLOPs and its weights are the main model's
    cfg = load_config("deepseek-v3")
    without = config_from_dict({**deepseek_v3(), "num_nextn_predict_layers": 0}, "deepseek-v3")
    assert cfg.active_params == without.active_params and cfg.matmul_params == without.matmul_params
    a, b = build_graph(cfg, "decode", 8, 4096).graph, build_graph(without, "decode", 8, 4096).graph
    assert [(op.name, op.flop_by_unit, op.count) for op in a.ops] == [(op.name, op.flop_by_unit, op.count)
                                                                      for op in b.ops]
    assert [t.bytes for op in a.ops for t in op.inputs] == [t.bytes for op in b.ops for t in op.inputs]
    assert cfg.total_params - without.total_params == mtp_total(cfg)


def test_in_memory_on_the_last_stage_and_its_experts_over_ep() -> None:
    cfg = load_config("deepseek-v3")
    without = config_from_dict({**deepseek_v3(), "num_nextn_predict_layers": 0}, "deepseek-v3")
    bf16 = model_dtypes("bf16")
    assert device_weights_bytes(cfg, Split(), bf16) - device_weights_bytes(without, Split(), bf16) \
        == 2 * mtp_total(cfg)
    # pp 2: the last stage holds the head and the MTP layer (its tables too), the first the embedding
    p = cfg.param_counts().parts
    two = device_weights_bytes(cfg, Split(pp=2), bf16) - device_weights_bytes(without, Split(pp=2), bf16)
    assert two == 2 * mtp_total(cfg)
    # ep 8 divides the MTP layer's routed experts too
    ep = device_weights_bytes(cfg, Split(dp=8, ep=8), bf16) - device_weights_bytes(without, Split(dp=8, ep=8), bf16)
    assert ep == pytest.approx(2 * (mtp_total(cfg) - p["mtp_experts"] * 7 / 8), rel=1e-12)


def test_fp8_checkpoint_keeps_the_mtp_tables_and_norms_in_bf16() -> None:
    # DeepSeek-V3's FP8 quantization_config converts nn.Linear only: the MTP layer's linear weights at
    # 8 + 32/16384 bits, its tables, norms and router (a Parameter of DeepseekV3TopkRouter, no nn.Linear:
    # h·256) at 2 bytes
    a = analyze_model("deepseek-v3", "h200", "decode", 1, 4096)
    b = analyze_model(config_from_dict({**deepseek_v3(), "num_nextn_predict_layers": 0}, "deepseek-v3"),
                      "h200", "decode", 1, 4096)
    p = a.config.param_counts().parts
    fp8 = (8 + 32 / 16384) / 8
    router = H * E
    assert a.memory.weights_bytes - b.memory.weights_bytes == pytest.approx(
        (p["mtp"] - router + p["mtp_experts"]) * fp8 + (p["mtp_tables"] + p["mtp_norms"] + router) * 2, rel=1e-12)


def test_nvfp4_export_excluding_the_mtp_layer_keeps_it_in_bf16() -> None:
    # nvidia/DeepSeek-V3.2-NVFP4's hf_quant_config.json: model.layers.61* among its exclude_modules
    cfg = load_config(str(CONFIGS / "DeepSeek-V3.2-NVFP4"))
    quant = json.loads((CONFIGS / "DeepSeek-V3.2-NVFP4" / "hf_quant_config.json").read_text())
    assert "model.layers.61*" in quant["quantization"]["exclude_modules"]
    kept = dict(cfg.unquantized)
    assert kept["mtp"] == kept["mtp_experts"] == 1.0
    assert not any("not read" in w for w in cfg.load_warnings)


def test_a_hostile_mtp_count_is_refused_by_name() -> None:
    with pytest.raises(RooflineError, match="'num_nextn_predict_layers' must be an integer of at least 0"):
        config_from_dict({**deepseek_v3(), "num_nextn_predict_layers": 1.5})


def test_qwen3_5_mtp_layer_by_hand() -> None:
    # Qwen3.5-397B-A17B's mtp_num_hidden_layers 1 (vLLM qwen3_next_mtp.py): fc 2h -> h; one full-attention
    # layer, gated (q_proj 2·32·256 wide), 2 KV heads of 256; the router h·512 and the shared expert's gate
    # h·1; the shared expert 3·h·1024; 512 routed experts 3·h·1024; the embedding and head are the main
    # model's (mtp_use_dedicated_embeddings false)
    cfg = load_config(str(CONFIGS / "Qwen3.5-397B-A17B"))
    h = 4096
    parts = cfg.param_counts().parts
    attention = h * (2 * 32 + 2 * 2) * 256 + 32 * 256 * h
    assert parts["mtp"] == 2 * h * h + attention + h * 513 + 3 * h * 1024 == 153_096_192
    assert parts["mtp_experts"] == 512 * 3 * h * 1024
    # pre_fc_norm_embedding, pre_fc_norm_hidden, norm, the block's two, q and k norms over head_dim
    assert parts["mtp_norms"] == 5 * h + 2 * 256
    assert "mtp_tables" not in parts and not cfg.load_warnings
    with pytest.raises(RooflineError, match="'mtp_use_dedicated_embeddings' is true"):
        raw = json.loads((CONFIGS / "Qwen3.5-397B-A17B" / "config.json").read_text())
        config_from_dict({**raw, "text_config": {**raw["text_config"], "mtp_use_dedicated_embeddings": True}})


def test_qwen3_5_nvfp4_keeps_its_mtp_module_in_bf16() -> None:
    # nvidia/Qwen3.5-397B-A17B-NVFP4's exclude list names mtp.layers.0*: the whole MTP layer in BF16
    folder = CONFIGS / "Qwen3.5-397B-A17B-NVFP4"
    quant = json.loads((folder / "hf_quant_config.json").read_text())
    assert "mtp.layers.0*" in quant["quantization"]["exclude_modules"]
    cfg = load_config(str(folder))
    kept = dict(cfg.unquantized)
    assert kept["mtp"] == kept["mtp_experts"] == 1.0
    assert not any("not read" in w for w in cfg.load_warnings)
