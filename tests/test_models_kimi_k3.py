"""Kimi K3 (issue 22) from its config.json as published (tests/fixtures/configs/Kimi-K3, the hub's
https://huggingface.co/moonshotai/Kimi-K3): 69 KDA layers with a full-rank output gate and a lower-bounded decay,
24 NoPE MLA layers with an output gate, attention residuals (test_models_attn_res.py), SiTU MLPs, 896 latent
experts in 3584 with their norm, 2 shared experts, a MoonViT3d tower, MXFP4 experts. Every figure is derived
here by hand from the config and the reference implementations cited beside it (TensorRT-LLM@000a860
tensorrt_llm/_torch/models/modeling_kimi_linear.py and modules/kimi_k3_*; fla's kda gate kernels; ROCm/ATOM's
port of the checkpoint's vision tower); transformers 5.24 has no K3, so no FlopCounterMode check."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import build_graph, config_from_dict, load_config, model_dtypes
from roofline.models.dtypes import for_checkpoint
from roofline.vocab import Unit

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
K3 = CONFIGS / "Kimi-K3"
h, V, L = 7168, 163840, 93
H, d = 96, 128  # KDA heads and head_dim (linear_attn_config); MLA: 96 heads too
hd = H * d  # 12288
E, k, f, lat, f_dense = 896, 16, 3072, 3584, 33792  # experts, per token, moe_intermediate_size, latent, dense MLP


def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((K3 / "config.json").read_text())
    return data


@pytest.fixture(scope="module")
def k3() -> Any:
    return load_config(str(K3))


# --- the parameter count, part by part ----------------------------------------------------------------
# KDA (TensorRT-LLM KimiKDARuntime, full-rank gate): q, k, v and g_proj h -> H·d; conv 3·H·d × 4 taps; f_a h -> d,
# f_b d -> H·d; dt_bias H·d; A_log H; b_proj h -> H; o_norm d; o_proj H·d -> h
KDA = 4 * h * hd + 3 * hd * 4 + h * d + d * hd + hd + H + h * H + d + hd * h
# MLA (KimiK3MLAAttention): q_a h -> 1536, q_b 1536 -> 96·(128 + 64), kv_a h -> 512 + 64, kv_b 512 -> 96·(128 + 128),
# o_proj 96·128 -> h, g_proj h -> 96·128; q_a and kv_a norms 1536 + 512
MLA = h * 1536 + 1536 * 96 * 192 + h * 576 + 512 * 96 * 256 + 96 * 128 * h + h * 96 * 128 + 1536 + 512
# a MoE layer (KimiK3MoERuntime): router h·896 and its correction bias 896, shared experts (2 × 3072 in h, gate
# up down), routed_expert_down_proj and _up_proj h·3584 each, 896 experts in the latent, routed_expert_norm 3584
MOE_REST = h * E + E + 2 * 3 * h * f + 2 * h * lat + lat
EXPERTS = E * 3 * lat * f
# the tower (MoonViT3d) and projector (PatchMergerMLPV2), ROCm/ATOM's port of modeling_kimi_k3.py: patch Conv2d
# 3·14²·1024 (no bias), positions 64·64·1024, 27 blocks of two RMSNorms, wqkv 1024 -> 3·1536, wo 1536 -> 1024,
# fc0 1024 -> 4096, fc1 4096 -> 1024 (no biases), a final RMSNorm; projector (4·1024)², 4·1024 -> h, post-norm h
VISION = (3 * 14 * 14 * 1024 + 64 * 64 * 1024 + 27 * (2 * 1024 + 1024 * 4608 + 1536 * 1024 + 2 * 1024 * 4096)
          + 1024 + 4096 * 4096 + 4096 * h + h)
ATTN_RES = 4 * h * L + 2 * h  # two gains and two pseudo-queries a layer, the head's pair


def test_parameters_by_hand_and_against_the_hub(k3: Any) -> None:
    # embedding and head; 69 KDA and 24 MLA layers; the dense layer 0 (SiTU, 33792); 92 MoE layers; two block
    # norms a layer and the final one; attention residuals; the vision tower
    total = (2 * V * h + 69 * KDA + 24 * MLA + 3 * h * f_dense + 92 * (MOE_REST + EXPERTS) + (2 * L + 1) * h
             + ATTN_RES + VISION)
    assert k3.total_params == total == 2_779_931_834_976
    assert k3.param_counts().parts["vision"] == VISION == 447_358_976  # the port's "~0.45B"
    # the hub (huggingface.co/moonshotai/Kimi-K3, its collection page: "2.8T"; Moonshot's launch: 2.8 trillion)
    assert round(k3.total_params / 1e11) == 28
    # a token: 16 of 896 experts, everything else but the vision tower
    active = total - VISION - 92 * EXPERTS + 92 * k * 3 * lat * f
    assert k3.active_params == active


def test_mxfp4_experts_beside_bf16_everything_else(k3: Any) -> None:
    # quantization_config: compressed-tensors, float 4 bits, group 32, a uint8 (UE8M0) scale: MXFP4, 4 + 8/32 bits,
    # on the routed experts only (its ignore list keeps self_attn, shared_experts, the dense MLP, lm_head and the
    # tower; TensorRT-LLM loads the latent projections and the router in BF16 and the experts as W4A8_MXFP4)
    assert k3.weights_dtype.name == "mxfp4"
    dt = for_checkpoint(model_dtypes(), k3.weights_dtype, k3.unquantized, k3.mixed_weights)
    parts = k3.param_counts().parts
    expected = parts["experts"] * 4.25 / 8 + (k3.total_params - parts["experts"]) * 2
    assert dt.weights_bytes(parts) == pytest.approx(expected, rel=1e-12)
    # ≈ 1.56 TB: TensorRT-LLM's loader "streams the 1.5TB checkpoint"
    assert 1.5e12 < expected < 1.6e12
    assert not k3.load_warnings


def test_cache_per_token_and_state_per_sequence_by_hand(k3: Any) -> None:
    # the 24 MLA layers cache the latent 512 + 64 (TensorRT-LLM: head_dim = kv_lora_rank + qk_rope_head_dim, 576)
    assert k3.kv_cache_bytes_per_token(2.0) == 24 * 576 * 2 == 27_648
    # each of the 69 KDA layers: the state H·d·d in FP32 and the conv's last 3 inputs of 3·H·d channels in BF16
    assert k3.state_bytes_per_sequence(2.0) == 69 * (H * d * d * 4 + 3 * 3 * hd * 2) == 449_372_160


def _ops(cfg: Any, phase: str, batch: int, seq: int) -> dict[str, Any]:
    return {op.name: op for op in build_graph(cfg, phase, batch, seq).graph.ops}


def test_situ_gated_mla_full_rank_kda_and_latent_norm_flops_by_hand(k3: Any) -> None:
    n = 4  # decode, batch 4
    ops = _ops(k3, "decode", n, 8192)
    # SiTU (SituAndMul): β·tanh(g/β)·sigmoid(g) 8 and β_l·tanh(u/β_l) 3, their product 1: 12 an element
    assert ops["dense.act"].flop_by_unit[Unit.VECTOR] == 12 * n * f_dense
    assert ops["moe.experts.act"].flop_by_unit[Unit.VECTOR] == 12 * n * k * f
    # MLA's output gate: g_proj 2·N·h·H·d_v, then out · sigmoid(gate) 5 an element, on the 24 MLA layers
    assert ops["g_proj"].flop_by_unit[Unit.MATRIX] == 2 * n * h * 96 * 128 and ops["g_proj"].count == 24
    assert ops["attn.output_gate"].flop_by_unit[Unit.VECTOR] == 5 * n * 96 * 128
    # KDA's full-rank gate rides with q, k, v: h -> 4·H·d; gate_a_proj gives β and f_a only (H + d); no g_b
    assert ops["linear_attn.qkvg_proj"].flop_by_unit[Unit.MATRIX] == 2 * n * h * 4 * hd
    assert ops["linear_attn.gate_a_proj"].flop_by_unit[Unit.MATRIX] == 2 * n * h * (H + d)
    assert "linear_attn.g_b_proj" not in ops
    # the safe gate lower_bound·sigmoid(exp(A_log)·(f + dt_bias)): 8 a channel; the recurrent update 7·d·d a head
    assert ops["linear_attn.delta_rule"].flop_by_unit[Unit.VECTOR] == (7 * d * d + 8 * d) * H * n
    # the latent experts: down h -> 3584, the experts in 3584, their sum normed (RMSNorm 6 an element), up -> h
    assert ops["moe.latent_proj.fc1"].flop_by_unit[Unit.MATRIX] == 2 * n * h * lat
    assert ops["moe.experts.gate_up"].flop_by_unit[Unit.MATRIX] == 2 * n * k * lat * 2 * f
    assert ops["moe.latent_norm"].flop_by_unit[Unit.VECTOR] == 6 * n * lat and ops["moe.latent_norm"].count == 92


def test_without_the_linear_beta_situ_leaves_the_up_half_alone() -> None:
    text = raw()
    text["text_config"]["activation_situ_linear_beta"] = None
    ops = _ops(config_from_dict(text, "k3"), "decode", 2, 1024)
    assert ops["dense.act"].flop_by_unit[Unit.VECTOR] == 9 * 2 * f_dense  # 8 + the product


@pytest.mark.parametrize(("where", "change", "field"), [
    ("text", {"activation_situ_beta": -4.0}, "activation_situ_beta"),
    ("text", {"activation_situ_linear_beta": "25"}, "activation_situ_linear_beta"),
    ("text", {"mla_use_output_gate": "yes"}, "mla_use_output_gate"),
    ("text", {"routed_expert_hidden_size": 8192}, "routed_expert_hidden_size"),  # wider than hidden_size
    ("text", {"routed_expert_hidden_size": None}, "latent_moe_use_norm"),  # a norm with no latent to norm
    ("linear", {"use_full_rank_gate": 1}, "use_full_rank_gate"),
    ("linear", {"gate_lower_bound": 5.0}, "gate_lower_bound"),  # a lower bound on a log-decay is negative
    ("vision", {"mm_projector_type": "patchmerger"}, "mm_projector_type"),
    ("vision", {"norm_type": "layernorm"}, "norm_type"),
    ("vision", {"merge_type": "sd2"}, "merge_type"),
    ("vision", {"qkv_hidden_size": 1000}, "vt_num_attention_heads"),  # 12 heads do not divide it
    ("vision", {"text_hidden_size": 4096}, "text_hidden_size"),
])
def test_hostile_k3_fields_are_refused_naming_them(where: str, change: dict[str, Any], field: str) -> None:
    data = copy.deepcopy(raw())
    target = {"text": data["text_config"], "linear": data["text_config"]["linear_attn_config"],
              "vision": data["vision_config"]}[where]
    target.update(change)
    with pytest.raises(RooflineError, match=field):
        config_from_dict(data, "k3")


@pytest.mark.parametrize("command", [
    ["model", str(K3), "--machine", "h200", "--phase", "decode", "--batch", "8", "--context", "8192"],
    ["serve", str(K3), "--machine", "dgx-b200", "--prompt", "4096", "--output", "256"],
    ["plan", str(K3), "--machine", "dgx-b200", "--batch", "64", "--context", "8192", "--devices", "16"],
    ["sweep", str(K3), "--machine", "b200", "--batch", "1,64", "--context", "8192"],
])
def test_k3_is_analysed_by_every_command(command: list[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "roofline.cli", *command], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "Kimi-K3" in out.stdout and "Traceback" not in out.stderr


def test_roofline_models_lists_its_layer_kinds(k3: Any) -> None:
    assert k3.layer_groups() == (("KDA", 69), ("gated MLA (no RoPE)", 24),
                                 ("attention residuals (a snapshot every 12)", 93), ("dense MLP", 1),
                                 ("LatentMoE (3584)", 92))
