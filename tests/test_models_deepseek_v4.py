"""DeepSeek-V4 (issue 22): compressed attention (the sliding window, CSA with its lightning indexer, HCA), mHC's
residual streams, hash-routed MoE layers and FP4 experts beside FP8 blocks. Every expected figure is derived
here by hand from the config (tests/fixtures/configs/DeepSeek-V4-Flash and -Pro, the hub's config.json) or
taken from the model card cited beside it; the FLOPs against transformers are test_models_deepseek_v4_torch.py."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from roofline.errors import RooflineError
from roofline.hardware import get_machine
from roofline.models import StepModel, analyze_model, build_graph, config_from_dict, load_config, model_dtypes
from roofline.models.dtypes import for_checkpoint
from roofline.parallel import Split
from roofline.vocab import Unit

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
FLASH = CONFIGS / "DeepSeek-V4-Flash" / "config.json"
PRO = CONFIGS / "DeepSeek-V4-Pro" / "config.json"

# DeepSeek-V4-Flash: h 4096, 43 layers (2 window-only, 21 CSA at 4, 20 HCA at 128), 64 heads of d = 512, one K = V
# head, q_lora 1024, 8 output groups of o_lora 1024, indexer 64 heads of 128 with top-512, window 128, mHC n = 4,
# 256 experts of 2048 (6 a token) and one shared, 3 hash layers, vocabulary 129,280
H_, L, HEADS, D, QL, G, OL, V = 4096, 43, 64, 512, 1024, 8, 1024, 129_280
CSA, HCA, DI, HI, N, E, F = 21, 20, 128, 64, 4, 256, 2048


def _raw(path: Path = FLASH) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_flash_parameters_by_hand() -> None:
    cfg = load_config(str(FLASH))
    parts = cfg.param_counts().parts
    attention = L * (H_ * QL + QL * HEADS * D + H_ * D + HEADS * D * OL + G * OL * H_)  # q_a, q_b, kv, o_a, o_b
    compressor = CSA * (2 * H_ * 2 * D + 2 * H_ * 2 * DI + H_ * HI) + HCA * 2 * H_ * D  # kv and gate; weights_proj
    index_query = CSA * QL * HI * DI
    mix = (2 + N) * N  # pre, post and the n×n comb
    mhc = 2 * L * mix * N * H_ + N * N * H_  # two hyper-connections a layer, and hc_head
    norms = (2 * L * H_ + H_ + L * (QL + D) + CSA * (4 * 2 * D + D + 4 * 2 * DI + DI) + HCA * (128 * D + D)
             + 2 * L * (mix + 3) + N + 1)  # block norms, q_a/kv norms, position_bias + kv_norm, mHC base/scale
    assert parts["attention"] == attention
    assert parts["compressor"] == compressor and parts["index_query"] == index_query
    assert parts["mhc"] == mhc and parts["norms"] == norms
    assert parts["experts"] == L * E * 3 * H_ * F and parts["shared_experts"] == L * 3 * H_ * F
    assert parts["router"] == L * E * H_ and parts["sinks"] == L * HEADS
    assert parts["biases"] == (L - 3) * E  # e_score_correction_bias on the 40 learned routers, none on hash ones
    mtp = sum(n for p, n in parts.items() if p.startswith("mtp"))  # its MTP layer (test_the_mtp_layer_by_hand)
    assert cfg.total_params - mtp == (2 * V * H_ + attention + compressor + index_query + mhc + norms
                                      + L * E * 3 * H_ * F + L * 3 * H_ * F + L * E * H_ + L * HEADS + (L - 3) * E)
    # transformers 5.24's DeepseekV4ForCausalLM on the meta device counts 284,332,230,231 parameters (it skips
    # mtp.*); it keeps the correction bias as a buffer, which the checkpoint stores: + 40 · 256
    assert cfg.total_params - mtp == 284_332_230_231 + 40 * 256


@pytest.mark.parametrize(("path", "total", "active", "embedding"), [
    # deepseek-ai/DeepSeek-V4-Flash model card: 284B total, 13B activated; DeepSeek-V4-Pro: 1.6T, 49B. The
    # totals are the main model's (284.33B without its MTP layer, as transformers counts it); the activated
    # figures leave out the embedding table (129,280 · h), which ours includes (whole billions)
    (FLASH, 284e9, 13e9, V * 4096), (PRO, 1.6e12, 49e9, V * 7168)])
def test_totals_and_active_match_the_model_card(path: Path, total: float, active: float, embedding: int) -> None:
    cfg = load_config(str(path))
    main = cfg.total_params - sum(n for p, n in cfg.param_counts().parts.items() if p.startswith("mtp"))
    assert main == pytest.approx(total, abs=0.05 * total if total > 1e12 else 1e9)
    assert cfg.active_params == pytest.approx(active + embedding, abs=1e9)


def test_kv_cache_and_state_by_hand() -> None:
    cfg = load_config(str(FLASH))
    # uncapped, BF16: d per layer + d/4 per CSA layer + d/128 per HCA layer + d_I/4 per CSA layer
    assert cfg.kv_cache_bytes_per_token(2.0) == (L * D + CSA * D // 4 + HCA * D // 128 + CSA * DI // 4) * 2 == 50_912
    # one sequence at 32,768 tokens: the window's 128 rows a layer, 8192 CSA entries (512 + 128 wide), 256 HCA ones
    state = (HCA * 127 * 2 * D + CSA * ((4 - 1) * 2 * 2 * (D + DI) + 2 * 4 * (D + DI))) * 2
    assert cfg.state_bytes_per_sequence(2.0) == state == 5_739_520
    cache = (L * 128 * D + CSA * 8192 * (D + DI) + HCA * 256 * D) * 2
    assert cfg.kv_cache_bytes(1, 32768, 2.0) == cache + state == 231_079_936 + 5_739_520
    kv = analyze_model(str(FLASH), "h200", "decode", 8, 32768).to_dict()["kv_cache"]
    assert kv["bytes_per_token_uncapped"] == 50_912
    assert kv["bytes_per_token_at_length"] == pytest.approx(cache / 32768, rel=1e-12)
    assert kv["state_bytes_per_sequence"] == state


def test_checkpoint_weights_fp4_experts_beside_fp8_blocks() -> None:
    cfg = load_config(str(FLASH))
    parts = {p: n for p, n in cfg.param_counts().parts.items() if not p.startswith("mtp")}  # the MTP's: below
    dt = for_checkpoint(model_dtypes(), cfg.weights_dtype, cfg.unquantized, cfg.mixed_weights)
    fp8 = 1 + 1 / (128 * 128)  # E4M3 with one UE8M0 (one-byte) scale per 128x128 block
    mxfp4 = (4 + 8 / 32) / 8  # E2M1 with one UE8M0 scale per 32 (transformers' FP8Experts for expert_dtype fp4)
    bf16 = ("embedding", "lm_head", "router", "compressor", "norms", "biases", "sinks")
    expected = (parts["experts"] * mxfp4 + (parts["attention"] + parts["index_query"] + parts["shared_experts"]) * fp8
                + sum(parts[p] for p in bf16) * 2 + parts["mhc"] * 4)
    assert dt.weights_bytes(parts) == pytest.approx(expected, rel=1e-12)
    assert dt.weight_dtype("experts").name == "mxfp4" and dt.weight_dtype("mhc").name == "fp32"
    # sgl-project's FP8 requant writes no expert_dtype: its experts are FP8 blocks too
    sgl = config_from_dict({**{k: v for k, v in _raw().items() if k != "expert_dtype"}, "model_type": "deepseek_ref"})
    assert all(p != "experts" for p, _, _ in sgl.mixed_weights)


def test_decode_reads_the_window_and_the_compressed_entries() -> None:
    cfg = load_config(str(FLASH))
    ops = {op.name: op for op in build_graph(cfg, "decode", 4, 32768).graph.ops}
    # one query's keys: min(L, 128) window rows + min(⌊L/4⌋, 512) CSA entries, or + ⌊L/128⌋ HCA entries
    assert ops["attn.CSA.qk"].inputs[1].shape == (4, 1, 128 + 512, D)
    assert ops["attn.HCA.qk"].inputs[1].shape == (4, 1, 128 + 256, D)
    assert ops["attn.window.qk"].inputs[1].shape == (4, 1, 128, D) and ops["attn.window.qk"].count == 2
    # the indexer scores every one of the ⌊L/4⌋ = 8192 index keys: 2·H_I·d_I a pair on the matrix units
    assert ops["compressor.CSA.indexer.scores"].flop_by_unit[Unit.MATRIX] == 2 * HI * DI * 4 * 8192
    # mHC's fn: 2·N·n·h·(2 + n)·n a hyper-connection
    assert ops["mhc.attn.pre"].flop_by_unit[Unit.MATRIX] == 2 * 4 * N * H_ * (2 + N) * N


@pytest.mark.parametrize("phase", ["prefill", "decode"])
@pytest.mark.parametrize("plan", ["none", "flash", "fused"])
def test_step_model_reproduces_the_graph_between_its_samples(phase: str, plan: str) -> None:
    # the sweep's numpy model (roofline.models.stepmodel) with the compressed entries' columns, at points it
    # was not fitted on: past the top-k's 4·512, between the ratios, under the window
    cfg = load_config(str(FLASH))
    m = get_machine("h100")
    dt = model_dtypes("bf16", "bf16", "fp8")
    fitted = StepModel.fit(cfg, phase, dt, plan)
    for b, s in ((3, 3000), (7, 700), (2, 65)):
        a = analyze_model(cfg, m, phase, b, s, plan, dt)
        r = fitted.evaluate([b], [s], m, a.dtype)
        assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)
        assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)
        assert float(r["time_s"][0]) == pytest.approx(a.time_s, rel=1e-9)


def _mutated(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(_raw())
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    return raw


@pytest.mark.parametrize(("changes", "field"), [
    ({"compress_ratios": [0, 4] * 10}, "compress_ratios"),  # not one a layer
    ({"compress_ratios": [8] * 43}, "compress_ratios"),  # a ratio neither CSA's nor HCA's
    ({"compress_ratios": [0, 0, *([4, 128] * 20), 4, 7]}, "compress_ratios"),  # the MTP layer's entry: 7
    ({"compress_ratios": None}, "compress_ratios"),  # which layers compress: not a default's to say
    ({"num_key_value_heads": 2}, "num_key_value_heads"),
    ({"o_groups": 6}, "o_groups"),  # does not divide the 64 heads
    ({"expert_dtype": "int4"}, "expert_dtype"),
    ({"compress_rates": {"compressed_sparse_attention": 4}}, "compress_rates"),
    ({"mlp_layer_types": ["dense"] * 43}, "mlp_layer_types"),
    ({"num_hash_layers": 50}, "num_hash_layers"),
    ({"n_group": 8}, "n_group"),  # V3's group routing: not a V4 field
    ({"swiglu_limit": -1}, "swiglu_limit"),
    ({"topk_method": "greedy"}, "topk_method"),
    ({"hc_mult": 0}, "hc_mult"),
    ({"index_head_dim": 1024}, "index_head_dim"),  # wider than head_dim
    ({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128],
                              "scale_fmt": "e5m2"}}, "scale_fmt"),
])
def test_hostile_field_is_refused_naming_it(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(RooflineError, match=field):
        config_from_dict(_mutated(**changes), "v4")


def test_nvidia_nvfp4_export_is_an_expert_only_requant() -> None:
    # nvidia/DeepSeek-V4-Flash-NVFP4: quantized_layers lists layers.0..42.ffn.experts NVFP4 (group 16) beside the
    # base checkpoint's quant_method fp8 with 128x128 blocks, which stays the non-expert weights' (as
    # aiconfigurator-core 0.12.0 reads these expert-only requants)
    cfg = load_config(str(CONFIGS / "DeepSeek-V4-Flash-NVFP4" / "config.json"))
    parts = cfg.param_counts().parts
    dt = for_checkpoint(model_dtypes(), cfg.weights_dtype, cfg.unquantized, cfg.mixed_weights)
    native = load_config(str(FLASH))
    dt_native = for_checkpoint(model_dtypes(), native.weights_dtype, native.unquantized, native.mixed_weights)
    # only the experts differ: E2M1 with one E4M3 scale per 16 (4.5 bits) against one UE8M0 per 32 (4.25 bits)
    # (the MTP layer's experts too: the export does not name them, and says they are counted as the main ones)
    difference = (parts["experts"] + parts["mtp_experts"]) * ((4 + 8 / 16) - (4 + 8 / 32)) / 8
    assert any("names no MTP layer's experts" in w for w in cfg.load_warnings)
    assert dt.weights_bytes(parts) - dt_native.weights_bytes(parts) == pytest.approx(difference, rel=1e-9)
    # any other MIXED_PRECISION is refused naming the field
    raw = _mutated(quantization_config={"quant_method": "fp8", "quant_algo": "MIXED_PRECISION",
                                        "weight_block_size": [128, 128],
                                        "quantized_layers": {"layers.0.ffn.experts": {"quant_algo": "NVFP4"}}})
    with pytest.raises(RooflineError, match=r"quantization_config.*MIXED_PRECISION.*not pinned"):
        config_from_dict(raw, "v4")


def test_the_mtp_layer_by_hand_in_memory_not_in_the_step() -> None:
    # num_nextn_predict_layers 1 and compress_ratios' 44th entry 0: one more Block at layer 43 (DeepSeek's reference
    # MTPBlock, ROCm/ATOM@22da013 atom/models/deepseek_v4_mtp.py; the checkpoint's 1,575 mtp.0.* tensors), its
    # attention over the window only (no compressor: ratio 0), its gate learned (43 ≥ num_hash_layers 3: a bias)
    cfg = load_config(str(FLASH))
    parts = cfg.param_counts().parts
    assert cfg.mtp_layers == 1 and not cfg.load_warnings
    attention = H_ * QL + QL * HEADS * D + H_ * D + HEADS * D * OL + G * OL * H_  # q_a, q_b, kv, o_a, o_b
    # + the router h·E, the shared expert 3·h·f, e_proj and h_proj h -> h each
    assert parts["mtp"] == attention + H_ * E + 3 * H_ * F + 2 * H_ * H_ == 166_723_584
    assert parts["mtp_experts"] == E * 3 * H_ * F == 6_442_450_944
    mix = (2 + N) * N
    # enorm, hnorm, norm, attn_norm, ffn_norm; q_norm and kv_norm; the sinks; the gate's bias; mHC's bases and
    # scales (two hyper-connections and the MTP's own hc_head: base n, scale 1)
    assert parts["mtp_norms"] == 5 * H_ + QL + D + HEADS + E + 2 * (mix + 3) + N + 1 == 22_395
    assert parts["mtp_mhc"] == 2 * mix * N * H_ + N * N * H_ == 851_968  # hc_attn_fn, hc_ffn_fn, hc_head_fn
    # not in the main step: the active count is the main model's
    assert cfg.active_params == cfg.param_counts().active - 0 and "mtp" not in {
        p for p, n in cfg.param_counts().active_parts.items() if n}
    # in memory at the checkpoint's dtypes: FP8 blocks but the router (BF16), MXFP4 experts, BF16 norms, FP32 mHC
    dt = for_checkpoint(model_dtypes(), cfg.weights_dtype, cfg.unquantized, cfg.mixed_weights)
    fp8, mxfp4 = 1 + 1 / (128 * 128), (4 + 8 / 32) / 8
    mtp = {p: n for p, n in parts.items() if p.startswith("mtp")}
    expected = ((parts["mtp"] - H_ * E) * fp8 + H_ * E * 2 + parts["mtp_experts"] * mxfp4 + parts["mtp_norms"] * 2
                + parts["mtp_mhc"] * 4)
    assert dt.weights_bytes(mtp) == pytest.approx(expected, rel=1e-12)


def test_without_its_compress_ratio_the_mtp_layer_is_left_out_and_said() -> None:
    # 43 entries (one a layer): the MTP layer's ratio is not stated, so it is not counted, and --mtp is refused
    cfg = config_from_dict(_mutated(compress_ratios=_raw()["compress_ratios"][:43]), "v4")
    assert cfg.mtp_layers == 0 and any("compress ratios are not given" in w for w in cfg.load_warnings)
    from roofline.serving.speculative import mtp_draft
    with pytest.raises(RooflineError, match="multi-token-prediction layers are not read"):
        mtp_draft(cfg, 1, None, None, 0.8)


def test_serve_mtp_drafts_with_the_mtp_block() -> None:
    from roofline.serving import serve_model as serve
    from roofline.serving.speculative import mtp_draft
    cfg = load_config(str(FLASH))
    draft, k = mtp_draft(cfg, 2, None, None, 0.8)
    assert k == 2 and draft.num_layers == 1 and draft.compressed is not None and draft.compressed.ratios == (0,)
    assert draft.hash_layers == 0 and draft.mtp_draft
    n = 4  # decode, batch 4
    ops = {op.name: op for op in build_graph(draft, "decode", n, 8192).graph.ops}
    # its input: enorm over the embedding and hnorm over each of the n = 4 streams (RMSNorm 6 an element),
    # e_proj [N, h] @ [h, h], h_proj [N·n, h] @ [h, h], e_proj's row added to each stream
    assert ops["mtp.norms"].flop_by_unit[Unit.VECTOR] == 6 * (1 + N) * n * H_
    assert ops["mtp.e_proj"].flop_by_unit[Unit.MATRIX] == 2 * n * H_ * H_
    assert ops["mtp.h_proj"].flop_by_unit[Unit.MATRIX] == 2 * n * N * H_ * H_
    assert ops["mtp.streams"].flop_by_unit[Unit.VECTOR] == n * N * H_
    assert "mhc.expand" not in ops  # the streams come from the target, not from one row copied n times
    # the window only: min(8192, 128) rows of d = 512, no compressor, no indexer
    assert ops["attn.window.qk"].inputs[1].shape == (n, 1, 128, D) and ops["attn.window.qk"].count == 1
    assert not any(name.startswith("compressor") for name in ops)
    assert ops["mhc.head"].count == 1  # its own hc_head before the final norm and the target's head
    r = serve(str(FLASH), "dgx-b200", Split(tp=8), prompt=4096, output=256, batch=8, mtp=1, acceptance=0.8)
    assert r.speculative is not None and r.speculative.shares_weights
    # the draft's cache: its window's 128 rows of 512 in BF16 a sequence (one K = V head, whole on every device)
    assert r.speculative.draft_kv_bytes_per_sequence == 128 * D * 2


def test_tensor_parallel_keeps_whole_output_groups(tmp_path: Path) -> None:
    cfg = load_config(str(FLASH))
    with pytest.raises(RooflineError, match="o_groups 8"):
        build_graph(cfg, "decode", 16, 4096, split=Split(tp=16))
    one = build_graph(cfg, "decode", 16, 4096).graph
    eight = build_graph(cfg, "decode", 16, 4096, split=Split(tp=8)).graph
    flop = {g: {op.name: op.flop_by_unit.get(Unit.MATRIX, 0.0) for op in gr.ops} for g, gr in ((1, one), (8, eight))}
    assert flop[8]["o_a_proj"] == flop[1]["o_a_proj"] / 8  # 1 of the 8 groups, its 8 heads
    assert flop[8]["compressor.CSA.kv_gate"] == flop[1]["compressor.CSA.kv_gate"]  # the compressor stays whole
    path = tmp_path / "v4.json"
    path.write_text(json.dumps(_mutated(o_groups=3, num_attention_heads=63)))
    run = subprocess.run([sys.executable, "-m", "roofline.cli", "model", str(path), "--tp", "2"], capture_output=True,
                         text=True)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_expert_parallel_step_and_plan() -> None:
    cfg = load_config(str(FLASH))
    g = build_graph(cfg, "decode", 64, 8192, split=Split(ep=8, dp=8))
    assert any(op.name.startswith("dispatch") or "all_to_all" in op.kind for op in g.graph.ops)
    assert np.isfinite(sum(sum(op.flop_by_unit.values()) for op in g.graph.ops))
