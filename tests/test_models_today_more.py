"""Today's models, second part (issue 22): Qwen3-VL and Llama 4's vision towers, MiniMax M2,
LatentMoE (Nemotron 3 Super/Ultra), MIXED_PRECISION checkpoints, the phi3 and olmo2 aliases, and the
decode limit with per-sequence recurrent state. Every expected figure is derived here by hand from the
config (tests/fixtures/configs, sources in its README) or taken from the model card cited beside it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from flopcount import hf_param_count, hf_prefill_flop, masked_pairs, our_prefill_matrix_flop
from roofline.errors import RooflineError
from roofline.models import analyze_model, config_from_dict, load_config
from roofline.parallel import Split
from roofline.vocab import Role, Unit

# --- the decode limit counts the recurrent state ---------------------------------------------------

def test_decode_limit_reads_and_writes_each_sequences_recurrent_state() -> None:
    # Qwen3.5-397B-A17B (its config.json): 45 Gated DeltaNet layers (64 value heads, 16 key heads of
    # dk = dv = 128, conv of 4 taps) and 15 gated full-attention layers (32 heads, 2 KV heads of 256)
    a = analyze_model("qwen3.5-397b-a17b", "h200", "decode", 8, 8192)
    lim = a.decode_limit
    state = 45 * (64 * 128 * 128 * 4 + (2 * 16 * 128 + 64 * 128) * 3 * 2)  # fp32 state + bf16 conv state
    assert state == 192_061_440
    kv = 15 * 2 * 2 * 256 * 2 * 8192  # K and V, 2 heads of 256, BF16, 8192 tokens, 15 layers
    recurrent = 45 * 7 * 128 * 128 * 64  # 7·dk·dv per value head and token
    attention = 15 * 2 * 32 * (256 + 256) * 8192
    expected = (2 * a.config.matmul_params + attention + recurrent) / (kv + 2 * state)
    assert lim.flop_per_byte == pytest.approx(expected, rel=1e-12)
    # it was 145.8 FLOP/B without the state (issue 22); the graph's totals, activations included, are
    # within 10% below the formula's (the activations are per sequence too)
    assert lim.flop_per_byte == pytest.approx(58.22, abs=0.01)
    assert 0.9 * lim.flop_per_byte < a.crossover.limit_flop_per_byte < lim.flop_per_byte


def test_the_decode_step_reads_and_writes_the_state() -> None:
    # the delta rule reads S [B, 64, 128, 128] fp32 and writes it back: 2·8·4,194,304 B plus its inputs
    a = analyze_model("qwen3.5-397b-a17b", "h200", "decode", 8, 8192, plan="none")
    rule = next(p for p in a.placements if p.name == "linear_attn.delta_rule")
    state = 8 * 64 * 128 * 128 * 4
    assert 2 * state < rule.bytes < 2 * state * 1.01
    # prefill writes the final state once, never reads one
    a = analyze_model("qwen3.5-397b-a17b", "h200", "prefill", 1, 4096, plan="none")
    rule = next(p for p in a.placements if p.name == "linear_attn.delta_rule")
    assert state / 8 < rule.bytes < state / 8 + 4096 * 64 * 128 * 2 * 8


def test_nemotron_h_decode_limit_counts_mamba_state() -> None:
    cfg = load_config("nemotron-3-nano")
    mb = cfg.mamba
    assert mb is not None
    a = analyze_model("nemotron-3-nano", "h200", "decode", 8, 8192)
    lim = a.decode_limit
    layers = cfg.attention_layers("mamba")
    assert lim.recurrent_flop_per_token == 5 * mb.head_dim * mb.state_dim * mb.heads * layers
    assert lim.state_bytes_per_sequence == 2 * cfg.state_bytes_per_sequence(2.0)
    assert lim.state_bytes_per_sequence == 2 * 49_082_368  # Nemotron 3 Nano's state (test_models_nemotron_h)


# --- Qwen3-VL: the language model analysed, the vision tower counted -------------------------------

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
NVFP4 = (4 + 8 / 16) / 8  # NVIDIA: 16 E2M1 values share one FP8 E4M3 scale: 4.5 bits


def raw(folder: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / folder / "config.json").read_text())
    return data


def qwen3_vl_vision(w: int, inter: int, depth: int, out: int, deep: int) -> int:
    """Qwen3VLVisionModel (transformers models/qwen3_vl): Conv3d patch embedding 3·2·16²·w + w, 2304
    learned positions, per block two LayerNorms 4w, qkv 3w² + 3w, proj w² + w, MLP 2·w·I + I + w;
    the merger over 2x2 patches (m = 4w): LayerNorm 2w, fc1 m² + m, fc2 m·out + out; each DeepStack
    merger the same with its LayerNorm over m."""
    m = 4 * w
    merger = m * m + m + m * out + out
    return (3 * 2 * 16 * 16 * w + w + 2304 * w + depth * (4 * w + 4 * w * w + 4 * w + 2 * w * inter + inter + w)
            + merger + 2 * w + deep * (merger + 2 * m))


def test_qwen3_vl_8b_against_its_model_card() -> None:
    # Qwen/Qwen3-VL-8B-Instruct's hub page: 8.77B params (safetensors, BF16), vision tower included
    cfg = load_config(str(CONFIGS / "Qwen3-VL-8B-Instruct"))
    assert cfg.total_params / 1e9 == pytest.approx(8.77, abs=0.005)
    # the tower from its vision_config (depth 27, hidden 1152, MLP 4304, out 4096, 3 DeepStack mergers)
    assert cfg.param_counts().parts["vision"] == qwen3_vl_vision(1152, 4304, 27, 4096, 3)
    # the text model alone is Qwen3-8B's shape: 36 layers, 32 heads, 8 KV heads of 128, SwiGLU 12288
    h, L = 4096, 36
    text = 2 * 151_936 * h + L * (h * (32 + 2 * 8) * 128 + 32 * 128 * h + 3 * h * 12_288 + 2 * h + 2 * 128) + h
    assert cfg.total_params - cfg.param_counts().parts["vision"] == text
    # the tower is in memory, not in a text token's active parameters
    assert cfg.active_params == text
    # KV per token: 36 layers · K and V · 8 heads · 128 · 2 bytes
    assert cfg.kv_cache_bytes_per_token() == 36 * 2 * 8 * 128 * 2 == 147_456
    assert cfg.layer_groups() == (("full attention", 36), ("dense MLP", 36))


def test_qwen3_vl_moe_against_their_model_cards() -> None:
    # hub pages: Qwen3-VL-30B-A3B-Instruct 31.1B params, Qwen3-VL-235B-A22B-Instruct 236B (safetensors)
    small = load_config(str(CONFIGS / "Qwen3-VL-30B-A3B-Instruct"))
    assert small.total_params / 1e9 == pytest.approx(31.1, abs=0.05)
    assert small.param_counts().parts["vision"] == qwen3_vl_vision(1152, 4304, 27, 2048, 3)
    big = load_config(str(CONFIGS / "Qwen3-VL-235B-A22B-Instruct"))
    assert big.total_params / 1e9 == pytest.approx(236, abs=0.5)
    # 48 layers · 2 · 4 KV heads · 128 · 2 bytes; 94 layers for the 235B
    assert small.kv_cache_bytes_per_token() == 48 * 2 * 4 * 128 * 2
    assert big.kv_cache_bytes_per_token() == 94 * 2 * 4 * 128 * 2


def test_qwen3_vl_memory_holds_the_tower_and_a_text_step_does_not_run_it() -> None:
    a = analyze_model(str(CONFIGS / "Qwen3-VL-8B-Instruct"), "h200", "decode", 1, 1024)
    cfg = a.config
    assert a.memory.weights_bytes == pytest.approx(cfg.total_params * 2, rel=1e-12)  # BF16, tower included
    # the step reads the text model's weights (its embedding rows gathered, not the whole table)
    weights = a.bytes_by_role()[Role.WEIGHT]
    text_read = (cfg.active_params - 151_936 * 4096 + 4096) * 2
    assert weights == pytest.approx(text_read, rel=1e-3)


@pytest.mark.parametrize("section, why", [([24, 20, 21], "summing to head_dim/2 = 64"),
                                          ("24,20,20", "a list of positive integers"),
                                          ([64, 0], "a list of positive integers")])
def test_hostile_mrope_section(section: Any, why: str) -> None:
    bad = raw("Qwen3-VL-8B-Instruct")
    bad["text_config"]["rope_scaling"] = {"mrope_section": section, "rope_type": "default"}
    with pytest.raises(RooflineError, match=f"rope_scaling.mrope_section' must be .*{why}"):
        config_from_dict(bad)


@pytest.mark.parametrize("where, value, match", [
    ("text_config", [1], "field 'text_config' must be an object"),
    ("vision_config", "big", "field 'vision_config' must be an object"),
    ("vision_config.depth", -1, "field 'depth' must be a positive integer"),
    ("text_config.model_type", "qwen3_moe",
     "text_config's model_type 'qwen3_moe' is not read \\(read: 'qwen3_vl_text'\\)"),
])
def test_hostile_qwen3_vl_fields(where: str, value: Any, match: str) -> None:
    bad = raw("Qwen3-VL-8B-Instruct")
    head, _, tail = where.partition(".")
    if tail:
        bad[head][tail] = value
    else:
        bad[head] = value
    with pytest.raises(RooflineError, match=match):
        config_from_dict(bad)


TINY_QWEN3_VL = {
    "model_type": "qwen3_vl", "tie_word_embeddings": False,
    "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 64, "intermediate_size": 96,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                    "vocab_size": 256, "max_position_embeddings": 128,
                    "rope_scaling": {"mrope_interleaved": True, "mrope_section": [4, 2, 2], "rope_type": "default"}},
    "vision_config": {"depth": 1, "hidden_size": 32, "intermediate_size": 48, "num_heads": 2, "out_hidden_size": 64,
                      "num_position_embeddings": 16, "deepstack_visual_indexes": [0], "in_channels": 3,
                      "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}}


@pytest.mark.torch
@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
def test_qwen3_vl_flops_against_flop_counter(moe: bool) -> None:
    pytest.importorskip("torch")
    tiny = copy.deepcopy(TINY_QWEN3_VL)
    if moe:
        tiny["model_type"] = "qwen3_vl_moe"
        tiny["text_config"].update(model_type="qwen3_vl_moe_text", num_experts=4, num_experts_per_tok=2,
                                   moe_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[])
    tokens = 16
    # FlopCounterMode's whole square less the masked pairs: 2·(16 + 16) per pair, 4 heads, 2 layers
    expected = hf_prefill_flop(tiny, tokens) - 2 * (16 + 16) * 4 * 2 * masked_pairs(tokens)
    assert our_prefill_matrix_flop(tiny, tokens) == pytest.approx(expected, rel=1e-9)


@pytest.mark.torch
def test_qwen3_vl_vision_tower_against_transformers() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers", minversion="5")
    from transformers.models.qwen3_vl import modeling_qwen3_vl

    vision = raw("Qwen3-VL-8B-Instruct")["vision_config"]
    with torch.device("meta"):  # the real shape, no memory
        tower = modeling_qwen3_vl.Qwen3VLVisionModel(transformers.Qwen3VLVisionConfig(**vision))
    assert sum(p.numel() for p in tower.parameters()) == load_config(
        str(CONFIGS / "Qwen3-VL-8B-Instruct")).param_counts().parts["vision"]


# --- Llama 4: the vision tower counted ---------------------------------------------------------------

# Llama-4-Scout-17B-16E-Instruct's vision_config as published on its hub page (aiconfigurator-core 0.12.0
# ships the text_config only; ai-dynamo/aiconfigurator's later tests assert this vision_config for both
# Scout and Maverick)
LLAMA4_VISION = {"attention_dropout": 0.0, "hidden_act": "gelu", "hidden_size": 1408, "image_size": 336,
                 "initializer_range": 0.02, "intermediate_size": 5632, "model_type": "llama4_vision_model",
                 "multi_modal_projector_bias": False, "norm_eps": 1e-5, "num_attention_heads": 16,
                 "num_channels": 3, "num_hidden_layers": 34, "patch_size": 14, "pixel_shuffle_ratio": 0.5,
                 "projector_dropout": 0.0, "projector_input_dim": 4096, "projector_output_dim": 4096,
                 "rope_theta": 10000, "vision_feature_layer": -1, "vision_feature_select_strategy": "default",
                 "vision_output_dim": 4096}


def scout_with_vision() -> dict[str, Any]:
    return {**json.loads((CONFIGS / "Llama-4-Scout-17B-16E-Instruct" / "config.json").read_text()),
            "vision_config": LLAMA4_VISION}


def test_llama4_scout_counts_its_vision_tower() -> None:
    cfg = config_from_dict(scout_with_vision())
    w, inter = 1408, 5632
    # class embedding, 577 positions ((336/14)² + 1), unfold patch embedding 3·14²·w, two LayerNorms,
    # 34 layers (q, k, v, o with biases, fc1/fc2 with biases, two LayerNorms), the pixel-shuffle adapter
    # 5632·4096 + 4096², the projector 4096·5120 (transformers Llama4VisionModel, Llama4MultiModalProjector)
    vision = (w + 577 * w + 3 * 14 * 14 * w + 4 * w + 34 * (4 * (w * w + w) + 2 * w * inter + inter + w + 4 * w)
              + inter * 4096 + 4096 * 4096 + 4096 * 5120)
    assert cfg.param_counts().parts["vision"] == vision == 871_932_416
    text = load_config(str(CONFIGS / "Llama-4-Scout-17B-16E-Instruct")).total_params
    # the hub page: 109B params with the vision encoder (108.64B rounds there; the text alone is 107.8B)
    assert (text + vision) / 1e9 == pytest.approx(109, abs=0.5)
    assert cfg.total_params == text + vision
    assert not [w for w in cfg.load_warnings if "vision" in w]  # counted now, no longer warned about


@pytest.mark.torch
def test_llama4_vision_tower_against_transformers() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers", minversion="5")
    text = json.loads((CONFIGS / "Llama-4-Scout-17B-16E-Instruct" / "config.json").read_text())["text_config"]
    with torch.device("meta"):
        model = transformers.Llama4ForConditionalGeneration(
            transformers.Llama4Config(vision_config=LLAMA4_VISION, text_config=text, tie_word_embeddings=False))
    counted = {"vision": 0, "text": 0}
    for name, p in model.named_parameters():
        counted["vision" if "vision_model" in name or "multi_modal_projector" in name else "text"] += p.numel()
    cfg = config_from_dict(scout_with_vision())
    assert counted["vision"] == cfg.param_counts().parts["vision"]
    assert counted["text"] + counted["vision"] == cfg.total_params


@pytest.mark.parametrize("key, value, match", [
    ("image_size", 335, "field 'image_size' \\(335\\) must be a multiple of patch_size"),
    ("multi_modal_projector_bias", True, "field 'multi_modal_projector_bias' true is not read"),
    ("projector_input_dim", 0, "field 'projector_input_dim' must be a positive integer")])
def test_hostile_llama4_vision_fields(key: str, value: Any, match: str) -> None:
    bad = scout_with_vision()
    bad["vision_config"] = {**LLAMA4_VISION, key: value}
    with pytest.raises(RooflineError, match=match):
        config_from_dict(bad)


# --- MiniMax-M2.5 (minimax_m2) ------------------------------------------------------------------------

def test_minimax_m2_5_against_its_model_card() -> None:
    # MiniMaxAI/MiniMax-M2.5's model card: 230B total parameters, 10B active; its report gives 229.9B and
    # 9.8B activated per token (without the embedding tables: 2·200,064·3,072 = 1.23B)
    cfg = load_config(str(CONFIGS / "MiniMax-M2.5"))
    h, L, E, f = 3072, 62, 256, 1536
    tables = 2 * 200_064 * h
    attention = L * (h * (48 + 2 * 8) * 128 + 48 * 128 * h)
    experts = L * E * 3 * h * f
    norms = L * (2 * h + (48 + 8) * 128) + h  # two block norms, q_norm over 48·128 and k_norm over 8·128
    routers = L * h * E + L * E  # the router and its e_score_correction_bias
    assert cfg.total_params == tables + attention + experts + norms + routers
    assert cfg.total_params / 1e9 == pytest.approx(230, abs=1.5)
    active_body = cfg.active_params - tables
    assert active_body == attention + L * 8 * 3 * h * f + norms + routers
    assert active_body / 1e9 == pytest.approx(9.8, abs=0.05)
    # KV per token: 62 layers · K and V · 8 heads · 128 · 2 bytes; partial RoPE over 64 of 128 dims
    assert cfg.kv_cache_bytes_per_token() == 62 * 2 * 8 * 128 * 2 == 253_952
    assert cfg.rotary_dims == 64
    assert any("num_mtp_modules" in w for w in cfg.load_warnings)  # 3 MTP modules named, not counted


def test_minimax_m2_5_fp8_keeps_its_routers_in_bf16() -> None:
    # modules_to_not_convert ["gate", "e_score_correction_bias", "lm_head"]: the bare "gate" is every
    # layer's block_sparse_moe.gate (transformers matches it as a suffix); the bias is never quantized
    cfg = load_config(str(CONFIGS / "MiniMax-M2.5"))
    assert dict(cfg.unquantized)["router"] == 1.0 and dict(cfg.unquantized)["lm_head"] == 1.0
    assert not [w for w in cfg.load_warnings if "not read" in w]


def test_minimax_m2_5_nvfp4_reads_its_exclusions() -> None:
    # nvidia/MiniMax-M2.5-NVFP4's hf_quant_config.json: NVFP4, every layer's self_attn and router excluded
    cfg = load_config(str(CONFIGS / "MiniMax-M2.5-NVFP4"))
    assert cfg.weights_dtype is not None and cfg.weights_dtype.name == "nvfp4"
    kept = dict(cfg.unquantized)
    assert kept["attention"] == 1.0 and kept["router"] == 1.0


@pytest.mark.parametrize("key, value, match", [
    ("attn_type_list", [0] * 62, "field 'attn_type_list' must give 1"),
    ("qk_norm_type", "per_head", "field 'qk_norm_type' other than per_layer"),
    ("use_qk_norm", False, "field 'qk_norm_type' other than per_layer \\(with use_qk_norm true\\)"),
    ("rotary_dim", 63, "field 'rotary_dim' must be an even number"),
    ("partial_rotary_factor", 0.25, "field 'partial_rotary_factor' \\(0.25\\) disagrees with rotary_dim"),
    ("shared_intermediate_size", 1536, "field 'shared_intermediate_size' is not read"),
    ("sliding_window", 4096, "field 'sliding_window' is not read"),
    ("scoring_func", "tanh", "field 'scoring_func' must be 'sigmoid' or 'softmax'")])
def test_hostile_minimax_m2_fields(key: str, value: Any, match: str) -> None:
    with pytest.raises(RooflineError, match=match):
        config_from_dict({**raw("MiniMax-M2.5"), key: value})


@pytest.mark.torch
def test_minimax_m2_flops_against_flop_counter() -> None:
    pytest.importorskip("torch")
    tiny = {"model_type": "minimax_m2", "hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rotary_dim": 8,
            "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 256, "max_position_embeddings": 128,
            "qk_norm_type": "per_layer", "use_qk_norm": True, "use_routing_bias": True, "scoring_func": "sigmoid",
            "tie_word_embeddings": False}
    tokens = 16
    expected = hf_prefill_flop(tiny, tokens) - 2 * (16 + 16) * 4 * 2 * masked_pairs(tokens)
    assert our_prefill_matrix_flop(tiny, tokens) == pytest.approx(expected, rel=1e-9)
    assert config_from_dict(tiny).total_params == hf_param_count(tiny)  # q_norm over H·d, k_norm over G·d


# --- LatentMoE: Nemotron 3 Super and Ultra --------------------------------------------------------------

def test_nemotron_3_super_latent_moe_by_hand() -> None:
    # nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8's config: h 4096, 88 blocks (40 Mamba2, 8 attention,
    # 40 LatentMoE), 512 ReLU² experts of 2688 in the latent ℓ = 1024, top 22, a shared ReLU² MLP of 5376
    cfg = load_config(str(CONFIGS / "NVIDIA-Nemotron-3-Super-120B-A12B-FP8"))
    parts = cfg.param_counts().parts
    h, lat, f, E = 4096, 1024, 2688, 512
    assert parts["experts"] == 40 * E * 2 * lat * f  # up ℓ -> f and down f -> ℓ (transformers NemotronHExperts)
    assert parts["latent_proj"] == 40 * 2 * h * lat  # fc1_latent_proj and fc2_latent_proj
    assert parts["shared_experts"] == 40 * 2 * h * 5376  # in h, beside the latent
    assert parts["router"] == 40 * h * E  # the router scores in h
    # the model card: 120B total, 12B active (its name; active without the two tables)
    assert cfg.total_params / 1e9 == pytest.approx(120, abs=1)
    body = cfg.active_params - parts["embedding"] - parts["lm_head"]
    assert body / 1e9 == pytest.approx(12, abs=0.5)
    assert ("LatentMoE (1024)", 40) in cfg.layer_groups()


def test_nemotron_3_ultra_against_its_name() -> None:
    # nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16: 550B total, 55B active (the name; whole tens and units)
    cfg = load_config(str(CONFIGS / "NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"))
    parts = cfg.param_counts().parts
    assert cfg.total_params / 1e9 == pytest.approx(550, abs=2)
    assert (cfg.active_params - parts["embedding"] - parts["lm_head"]) / 1e9 == pytest.approx(55, abs=2)


def test_latent_moe_step_runs_its_experts_in_the_latent() -> None:
    # one decode token: the experts' FLOPs 2·k·(2·ℓ·f) = 2·22·2·1024·2688 a MoE layer, the projections
    # 2·2·h·ℓ, the sum in the latent; the rows dispatched are ℓ wide
    a = analyze_model("nemotron-3-super", "h200", "decode", 1, 1024, plan="none")
    ops = {op.name: op for op in a.model.graph.ops}
    k, h, lat, f = 22, 4096, 1024, 2688
    assert ops["experts.gate_up"].flop_by_unit[Unit.MATRIX] == 2 * k * lat * f
    assert ops["experts.down"].flop_by_unit[Unit.MATRIX] == 2 * k * f * lat
    assert ops["latent_proj.fc1"].flop_by_unit[Unit.MATRIX] == 2 * h * lat
    assert ops["latent_proj.fc2"].flop_by_unit[Unit.MATRIX] == 2 * lat * h
    assert ops["latent.combine"].flop_by_unit[Unit.VECTOR] == 2 * k * lat
    assert ops["dispatch"].outputs[0].shape == (k, lat)


def test_latent_moe_under_expert_parallelism_sends_latent_rows() -> None:
    # TP 8 with EP 8: the all-to-all carries each routed row in ℓ = 1024, a quarter of h
    a = analyze_model("nemotron-3-super", "h200", "decode", 64, 1024, split=Split(tp=8, ep=8), plan="none")
    ops = {op.name: op for op in a.model.graph.ops}
    assert ops["dispatch.all_to_all"].inputs[0].shape[1] == 1024


@pytest.mark.torch
def test_latent_moe_flops_and_parameters_against_transformers() -> None:
    pytest.importorskip("torch")
    # attention, a LatentMoE block and a ReLU² MLP (no Mamba2 block: FlopCounterMode's count of its torch
    # fallback is not our chunked SSD's convention); ℓ = 16 of h = 64
    tiny = {"model_type": "nemotron_h", "hidden_size": 64, "num_hidden_layers": 3, "hybrid_override_pattern": "*E-",
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 48,
            "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
            "moe_shared_expert_intermediate_size": 64, "n_shared_experts": 1, "moe_latent_size": 16,
            "vocab_size": 256, "max_position_embeddings": 128, "tie_word_embeddings": False, "mamba_num_heads": 4,
            "mamba_head_dim": 16, "n_groups": 1, "ssm_state_size": 16, "conv_kernel": 4, "chunk_size": 16,
            "n_group": 1, "topk_group": 1}
    tokens = 16
    expected = hf_prefill_flop(tiny, tokens) - 2 * (16 + 16) * 4 * 1 * masked_pairs(tokens)  # one attention layer
    assert our_prefill_matrix_flop(tiny, tokens) == pytest.approx(expected, rel=1e-9)
    assert config_from_dict(tiny).total_params == hf_param_count(tiny)


# --- aliases: phi3 (Phi-4) and olmo2 (OLMo 2, its q/k norms) ------------------------------------------

def test_phi_4_against_its_model_card() -> None:
    # microsoft/phi-4's hub page: 14.7B params (BF16 safetensors)
    cfg = load_config(str(CONFIGS / "phi-4"))
    h, L, f, V = 5120, 40, 17920, 100_352
    layer = h * (40 + 2 * 10) * 128 + 40 * 128 * h + 3 * h * f + 2 * h  # fused qkv_proj and gate_up_proj
    assert cfg.total_params == 2 * V * h + L * layer + h == 14_659_507_200
    assert cfg.total_params / 1e9 == pytest.approx(14.7, abs=0.05)
    assert cfg.kv_cache_bytes_per_token() == 40 * 2 * 10 * 128 * 2  # 10 KV heads of 128, BF16


def test_olmo_2_13b_against_its_checkpoint() -> None:
    # allenai/OLMo-2-1124-13B's model.safetensors.index.json: total_size 54,864,793,600 bytes in float32
    # (its torch_dtype) = 13,716,198,400 parameters; q_norm and k_norm each over 40·128
    cfg = load_config(str(CONFIGS / "OLMo-2-1124-13B"))
    assert cfg.total_params == 54_864_793_600 // 4
    assert cfg.param_counts().parts["norms"] == 40 * (2 * 5120 + 2 * 40 * 128) + 5120
    assert cfg.kv_cache_bytes_per_token() == 40 * 2 * 40 * 128 * 2


def test_olmo_2_7b_against_its_model_card() -> None:
    # allenai/OLMo-2-1124-7B's hub page: 7.3B params; by hand: 2·100,352·4,096 tables + 32 layers of
    # attention 4·4096², SwiGLU 3·4096·11008, norms 2·4096 + q/k norms 2·4096, + the final norm
    cfg = load_config(str(CONFIGS / "OLMo-2-1124-7B"))
    h = 4096
    assert cfg.total_params == 2 * 100_352 * h + 32 * (4 * h * h + 3 * h * 11_008 + 4 * h) + h
    assert cfg.total_params / 1e9 == pytest.approx(7.3, abs=0.05)


@pytest.mark.parametrize("key, value, match", [
    ("attention_bias", True, "field 'attention_bias' true is not read"),
    ("partial_rotary_factor", 0.3, "field 'partial_rotary_factor' must be a number in \\(0, 1\\] giving an even"),
    ("partial_rotary_factor", "half", "field 'partial_rotary_factor' must be"),
    ("sliding_window", -5, "field 'sliding_window' must be a positive integer")])
def test_hostile_phi3_fields(key: str, value: Any, match: str) -> None:
    with pytest.raises(RooflineError, match=match):
        config_from_dict({**raw("phi-4"), key: value})


def test_hostile_olmo2_field() -> None:
    with pytest.raises(RooflineError, match="field 'attention_bias' must be true or false"):
        config_from_dict({**raw("OLMo-2-1124-7B"), "attention_bias": "no"})


TINY_DENSE = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128,
              "tie_word_embeddings": False}


@pytest.mark.torch
@pytest.mark.parametrize("extra", [{"model_type": "phi3", "partial_rotary_factor": 0.5, "pad_token_id": 0,
                                    "bos_token_id": 1, "eos_token_id": 2},
                                   {"model_type": "olmo2"}], ids=["phi3", "olmo2"])
def test_phi3_and_olmo2_against_transformers(extra: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    tiny = {**TINY_DENSE, **extra}
    tokens = 16
    expected = hf_prefill_flop(tiny, tokens) - 2 * (16 + 16) * 4 * 2 * masked_pairs(tokens)
    assert our_prefill_matrix_flop(tiny, tokens) == pytest.approx(expected, rel=1e-9)
    assert config_from_dict(tiny).total_params == hf_param_count(tiny)


# --- MIXED_PRECISION: a quant_algo per module, applied exactly ---------------------------------------

def test_mixed_precision_qwen3_6_27b_byte_for_byte() -> None:
    # nvidia/Qwen3.6-27B-NVFP4's quantized_layers: every self_attn q/k/v/o_proj and every linear_attn
    # in_proj_qkv, in_proj_z and out_proj in FP8; every mlp gate/up/down_proj and the lm_head in
    # W4A16_NVFP4 (4.5 bits a weight); everything unlisted (embedding, norms, in_proj_b/a, the conv, the
    # vision tower) stays BF16
    cfg = load_config(str(CONFIGS / "Qwen3.6-27B-NVFP4"))
    parts = cfg.param_counts().parts
    h, v, ch, hv = 5120, 48 * 128, 2 * 16 * 128 + 48 * 128, 48
    fp8_linear = 48 * (h * ch + h * v + v * h)  # 48 Gated DeltaNet layers
    assert parts["attention"] + fp8_linear + parts["mlp"] + parts["lm_head"] < cfg.total_params
    bf16 = cfg.total_params - parts["attention"] - fp8_linear - parts["mlp"] - parts["lm_head"]
    # the multi-token-prediction layer (mtp_num_hidden_layers 1) is in exclude_modules ("mtp*"): BF16
    assert bf16 == (parts["embedding"] + parts["norms"] + parts["vision"] + parts["mtp"] + parts["mtp_norms"]
                    + 48 * (2 * h * hv + ch * 4 + 2 * hv + 128))  # in_proj_b, in_proj_a, conv taps, dt_bias/A_log, gain
    expected = (parts["attention"] + fp8_linear) * 1 + (parts["mlp"] + parts["lm_head"]) * NVFP4 + bf16 * 2
    a = analyze_model(str(CONFIGS / "Qwen3.6-27B-NVFP4"), "h200", "decode", 8, 8192)
    assert a.memory.weights_bytes == pytest.approx(expected, rel=1e-9)
    # the step reads the attention weights at FP8 and the MLP at NVFP4
    dt = a.model.dtypes
    assert dt.weight_dtype("attention").name == "fp8_e4m3" and dt.weight_dtype("mlp").name == "nvfp4"


@pytest.mark.parametrize("change, match", [
    ({"model.language_model.layers.0.mlp.gate_proj": {"quant_algo": "INT4_AWQ"}},
     "'quantized_layers' gives 'model.language_model.layers.0.mlp.gate_proj' quant_algo 'INT4_AWQ', not read"),
    ({"model.language_model.layers.0.mlp.mystery_proj": {"quant_algo": "FP8"}},
     "module 'model.language_model.layers.0.mlp.mystery_proj' is not read"),
    ({"model.language_model.layers.99.mlp.gate_proj": {"quant_algo": "FP8"}},
     "module 'model.language_model.layers.99.mlp.gate_proj' is not read"),
    ({"model.language_model.layers.0.mlp.up_proj": {"quant_algo": "NVFP4", "group_size": 32}},
     "NVFP4 with group_size 32"),
    ({"model.language_model.layers.0.mlp.up_proj": "FP8"}, "quant_algo None, not read")])
def test_hostile_mixed_precision_modules(change: dict[str, Any], match: str) -> None:
    bad = raw("Qwen3.6-27B-NVFP4")
    bad["quantization_config"]["quantized_layers"] = {**bad["quantization_config"]["quantized_layers"], **change}
    with pytest.raises(RooflineError, match=match):
        config_from_dict(bad)


def test_hostile_mixed_precision_without_its_table() -> None:
    bad = raw("Qwen3.6-27B-NVFP4")
    bad["quantization_config"]["quantized_layers"] = []
    with pytest.raises(RooflineError, match="'quantized_layers' must be an object"):
        config_from_dict(bad)
