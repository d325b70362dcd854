"""MiniMax-M3 (`minimax_m3`) from its own config.json (tests/fixtures/configs/MiniMax-M3, the hub page
MiniMaxAI/MiniMax-M3 as aiconfigurator-core 0.12.0 ships it; the preset minimax-m3): block-sparse attention
(roofline.models.block_sparse, read from transformers 5.24 models/minimax_m3_vl's MiniMaxM3VLIndexer). The
parameters by part, the cache per token and the state by hand from the config, the keys a sparse layer attends
and the indexer's FLOPs over the whole context, tensor parallelism, the step model against the graph, serve and
--explain, and a hostile config per field read. FLOPs against transformers: test_models_minimax_m3_torch.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import StepModel, analyze_model, build_graph, config_from_dict, load_config, model_dtypes
from roofline.models.transformer import AttentionKind
from roofline.parallel import Split, deploy
from roofline.vocab import Unit

M3 = Path(__file__).parent / "fixtures" / "configs" / "MiniMax-M3"
SPARSE = AttentionKind.SPARSE


def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((M3 / "config.json").read_text())
    return data


def _sparse(**change: Any) -> dict[str, Any]:
    r = raw()
    return {**r, "sparse_attention_config": {**r["sparse_attention_config"], **change}}


def _op(cfg: Any, phase: str, batch: int, seq: int, name: str, split: Split | None = None) -> Any:
    return next(op for op in build_graph(cfg, phase, batch, seq, split=split).graph.ops if op.name == name)


def test_parameters_by_part_from_the_config() -> None:
    # h 6144, 60 layers, 64 query heads and 4 K/V heads of 128, vocab 200,064, untied
    cfg, h = load_config(str(M3)), 6144
    parts = cfg.param_counts().parts
    assert parts["attention"] == 60 * (h * 64 * 128 + 2 * h * 4 * 128 + 64 * 128 * h)  # q, k, v, o
    # the indexer on the 57 sparse layers: q_proj h -> 4·128, k_proj h -> 128 (MiniMaxM3VLIndexer)
    assert parts["indexer"] == 57 * h * (4 + 1) * 128 == 224_133_120
    assert parts["mlp"] == 3 * 3 * h * 12288  # dense_intermediate_size on the first 3 layers
    assert parts["experts"] == 57 * 128 * 3 * h * 3072  # 128 experts of intermediate_size 3072
    assert parts["shared_experts"] == 57 * 3 * h * 3072  # shared_intermediate_size
    assert parts["router"] == 57 * h * 128
    assert parts["biases"] == 57 * 128  # e_score_correction_bias
    # 2 norms a layer and the final one, q_norm and k_norm of 128 a layer, the indexer's two of 128 a sparse layer
    assert parts["norms"] == (2 * 60 + 1) * h + 60 * 2 * 128 + 57 * 2 * 128
    assert cfg.total_params == 426_174_572_928  # = transformers' MiniMaxM3VLForCausalLM (the _torch test)


def test_parameters_against_the_published_figures() -> None:
    # MiniMaxAI/MiniMax-M3 model card (as the SGLang cookbook and NVIDIA Megatron-Bridge quote it): "428B
    # total, ~23B active". That total counts the multimodal checkpoint (the vision tower and the MTP modules,
    # which this text config leaves out or transformers does not load): 426.2B here, within 2B. The active
    # figure leaves out the embedding table and the untied head (2 · 200,064 · 6,144 = 2.46B)
    cfg = load_config("minimax-m3")
    assert cfg.total_params / 1e9 == pytest.approx(428, abs=2)
    assert cfg.active_params / 1e9 == pytest.approx(23 + 2 * 200_064 * 6144 / 1e9, abs=1)


def test_the_model_is_three_full_and_fifty_seven_block_sparse_layers() -> None:
    cfg = load_config(str(M3))
    assert cfg.layer_groups() == (("full attention", 3), ("block-sparse attention (top 16 of 128-token blocks)", 57),
                                  ("dense MLP", 3), ("MoE", 57))
    bs = cfg.block_sparse
    assert bs is not None and (bs.index_heads, bs.index_dim, bs.block, bs.topk, bs.local, bs.init) == (4, 128, 128,
                                                                                                       16, 1, 0)
    assert "multi-token-prediction modules (num_nextn_predict_layers 1, num_mtp_modules 7)" in cfg.load_warnings[0]


def test_cache_per_token_and_state_by_hand() -> None:
    cfg = load_config(str(M3))
    # K and V on every layer, 2·4·128 values, + the index key, 128 values, on the 57 sparse layers, all bf16
    assert cfg.kv_cache_bytes_per_token() == 60 * 2 * 4 * 128 * 2 + 57 * 128 * 2 == 137_472
    # the index key stays in the model's dtype (MiniMaxM3VLSparseCacheLayer): an FP8 KV cache halves K and V only
    assert cfg.kv_cache_bytes_per_token(1.0) == 60 * 2 * 4 * 128 + 57 * 128 * 2
    # never capped (the indexer scores every cached key) and no state per sequence: no compressor, no recurrence
    assert cfg.kv_cache_bytes(2, 32_768) == 2 * 32_768 * 137_472
    assert cfg.state_bytes_per_sequence() == 0.0
    # read as MiniMax-M2 (full attention, no index key) it would be 60·2·4·128·2 = 122,880 B: 11% less
    kv = analyze_model(str(M3), "h200", "decode", 1, 8192).kv_cache
    assert kv == {"bytes_per_token_uncapped": 137_472.0, "bytes_per_token_at_length": 137_472.0,
                  "window_tokens": None, "state_bytes_per_sequence": 0.0}


@pytest.mark.parametrize(("context", "keys"), [
    (1, 1), (2048, 2048),  # ⌈L/128⌉ ≤ 16 blocks: every key
    (2049, 15 * 128 + 1),  # 17 blocks: its own block (1 key) and 15 whole ones
    (32_768, 15 * 128 + 128), (32_769, 15 * 128 + 1), (1_000_000, 15 * 128 + (999_999 % 128) + 1),
])
def test_a_sparse_layer_attends_its_top_16_blocks(context: int, keys: int) -> None:
    cfg = load_config(str(M3))
    assert cfg.read_tokens(SPARSE, context) == keys
    assert cfg.read_tokens(AttentionKind.GLOBAL, context) == context  # the 3 full layers
    assert cfg.decode_read_tokens(context) == 3 * context + 57 * keys


def test_forced_blocks_take_slots_within_the_top_k() -> None:
    # sparse_init_block (sglang's sparse_topk_select: the first blocks get the top score) and sparse_local_block
    # force blocks in among the k kept: a query still attends k blocks, one of them its own partial block
    cfg = config_from_dict(_sparse(sparse_init_block=2, sparse_local_block=3))
    bs = cfg.block_sparse
    assert bs is not None and (bs.init, bs.local) == (2, 3)
    assert cfg.read_tokens(SPARSE, 32_769) == load_config(str(M3)).read_tokens(SPARSE, 32_769) == 15 * 128 + 1


def test_decode_indexer_scores_the_whole_context_and_attention_reads_the_blocks() -> None:
    cfg, b, ctx = load_config(str(M3)), 4, 32_768
    scores = _op(cfg, "decode", b, ctx, "indexer.scores")
    # every cached key scored: q_h·k, 2·d_I a pair on the matrix units, per index head; the block max 1 a pair
    assert scores.flop_by_unit[Unit.MATRIX] == 2 * 4 * 128 * b * ctx
    assert scores.flop_by_unit[Unit.VECTOR] == 4 * b * ctx
    assert scores.count == 57
    cache = next(t for t in scores.inputs if t.name == "indexer.k_cache")
    assert cache.bytes == b * ctx * 128 * 2  # the bf16 index keys
    top = _op(cfg, "decode", b, ctx, "indexer.topk")
    assert top.flop_by_unit[Unit.VECTOR] == 4 * b * (ctx // 128)  # per index head, one a block score
    # attention on the sparse layers: 2·B·H·keys·d with keys = 2048 at 32,768; the full layers the whole context
    assert _op(cfg, "decode", b, ctx, "attn.sparse.qk").flop_by_unit[Unit.MATRIX] == 2 * b * 64 * 2048 * 128
    assert _op(cfg, "decode", b, ctx, "attn.global.qk").flop_by_unit[Unit.MATRIX] == 2 * b * 64 * ctx * 128
    proj = _op(cfg, "decode", b, ctx, "indexer.qk_proj")
    assert proj.flop_by_unit[Unit.MATRIX] == 2 * b * 6144 * (4 + 1) * 128


def test_prefill_pairs_by_hand() -> None:
    cfg, t = load_config(str(M3)), 4096
    # Σ_i keys(i): every key up to i = 16·128 = 2048 (2048·2049/2); after it 15 whole blocks (15·128 a query)
    # plus the query's own block, (i − 1) mod 128 + 1 keys: 16 runs of 1..128 over the next 2048 queries
    pairs = 2048 * 2049 // 2 + 2048 * 15 * 128 + 16 * (128 * 129 // 2)
    assert pairs == 6_162_432
    full = _op(cfg, "prefill", 1, t, "attn.global.qk").flop_by_unit[Unit.MATRIX]
    assert full == 2 * 64 * (t * (t + 1) // 2) * 128
    assert _op(cfg, "prefill", 1, t, "attn.sparse.qk").flop_by_unit[Unit.MATRIX] == pytest.approx(
        2 * 64 * pairs * 128, rel=1e-12)
    scores = _op(cfg, "prefill", 1, t, "indexer.scores")  # the causal pairs, all of them
    assert scores.flop_by_unit[Unit.MATRIX] == 2 * 4 * 128 * t * (t + 1) // 2
    # per index head the block scores of Σ ⌈i/128⌉ = 128·32·33/2 for 32 whole blocks
    assert _op(cfg, "prefill", 1, t, "indexer.topk").flop_by_unit[Unit.VECTOR] == 4 * 128 * 32 * 33 // 2


def test_tensor_parallel_splits_the_index_heads_and_keeps_the_key_whole() -> None:
    # sglang MiniMaxM3Attention: index heads split with the query heads, max(1, 4/tp) a device; index K whole
    cfg, b, ctx = load_config(str(M3)), 8, 8192
    one = _op(cfg, "decode", b, ctx, "indexer.scores").flop_by_unit[Unit.MATRIX]
    for tp, heads in ((2, 2), (4, 1), (8, 1)):
        split = Split(tp=tp)
        assert _op(cfg, "decode", b, ctx, "indexer.scores", split).flop_by_unit[Unit.MATRIX] * 4 == one * heads
        w = next(t for t in _op(cfg, "decode", b, ctx, "indexer.qk_proj", split).inputs if t.name.endswith("weight"))
        assert w.shape == (6144, (heads + 1) * 128)
        key = next(t for t in _op(cfg, "decode", b, ctx, "indexer.scores", split).inputs if t.name.endswith("k_cache"))
        assert key.bytes == b * ctx * 128 * 2
    qk1 = _op(cfg, "decode", b, ctx, "attn.sparse.qk").flop_by_unit[Unit.MATRIX]
    assert _op(cfg, "decode", b, ctx, "attn.sparse.qk", Split(tp=8)).flop_by_unit[Unit.MATRIX] * 8 == qk1
    with pytest.raises(RooflineError, match=r"does not divide .*64 query heads"):
        build_graph(cfg, "decode", b, ctx, split=Split(tp=3))


@pytest.mark.parametrize("phase", ["prefill", "decode"])
@pytest.mark.parametrize("split", [None, Split(tp=8), Split(tp=4, ep=8, dp=2)])
def test_step_model_agrees_with_the_graph(phase: str, split: Split | None) -> None:
    cfg, dt = load_config(str(M3)), model_dtypes()
    nvls = deploy("dgx-h100", split).nvls
    fitted = StepModel.fit(cfg, phase, dt, split=split, devices_per_node=8, nvls=nvls)  # checks its own fit
    for b, s in ((8, 700), (16, 2048), (16, 2049), (64, 9000)):  # both sides of the 16 blocks
        a = analyze_model(cfg, "dgx-h100", phase, b, s, dtypes=dt, split=split)
        r = fitted.evaluate([b], [s], a.machine, a.dtype)
        assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)
        assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "roofline.cli", *args], capture_output=True, text=True, check=False)


def test_the_commands_run_it() -> None:
    out = _cli("model", "minimax-m3", "--machine", "h200", "--context", "32768", "--explain")
    assert out.returncode == 0, out.stderr
    assert ("2 (K and V) × G × d × layers × bytes = 2 × 4 × 128 × 60 × 2 (bf16) + the block-sparse indexer's key, "
            "sparse_index_dim × 2 B (the model's dtype) × sparse layers = 128 × 2 × 57 = 137,472 B") in out.stdout
    assert "57 block-sparse layers × min(L, (k − 1)·b + (L − 1) mod b + 1) = 2048" in out.stdout
    row = next(r for r in json.loads(_cli("models", "--json").stdout) if r["id"] == "minimax-m3")
    assert row["layer_kinds"] == ("3 full attention + 57 block-sparse attention (top 16 of 128-token blocks) + 3 dense "
                                  "MLP + 57 MoE")
    assert row["attention"] == "GQA 64/4, top 16 blocks of 128 on 57 of 60 layers"
    for args in (("serve", "minimax-m3", "--machine", "dgx-h200", "--tp", "8", "--pp", "2", "--prompt", "8192",
                  "--output", "512", "--batch", "16"),
                 ("compare", "minimax-m3", "--machine", "dgx-h200,dgx-b200", "--tp", "8", "--batch", "8",
                  "--context", "32768"),
                 ("sweep", "minimax-m3", "--machine", "dgx-h200", "--tp", "8", "--batch", "1,8", "--context",
                  "2048,65536"),
                 ("plan", "minimax-m3", "--machine", "dgx-h200", "--devices", "16", "--batch", "8", "--context",
                  "32768")):
        run = _cli(*args)
        assert run.returncode == 0, (args, run.stderr[-2000:])


@pytest.mark.parametrize(("config", "says"), [
    ({**raw(), "sparse_attention_config": None}, "'sparse_attention_config' must be an object"),
    (_sparse(sparse_window=512), "field 'sparse_window' is not read"),
    (_sparse(use_sparse_attention=False), "'use_sparse_attention' false is not read"),
    (_sparse(sparse_attention_freq=None), "'sparse_attention_freq' is missing"),
    (_sparse(sparse_attention_freq=[1] * 59), "'sparse_attention_freq' must be a list of 60"),
    (_sparse(sparse_disable_index_value=[0] * 60), "'sparse_disable_index_value' 0 on a sparse layer"),
    (_sparse(sparse_score_type="sum"), "'sparse_score_type' 'sum' is not read"),
    (_sparse(sparse_num_index_heads=8), r"'sparse_num_index_heads' \(8\) must equal num_key_value_heads \(4\)"),
    (_sparse(sparse_num_index_heads=0), "'sparse_num_index_heads' must be a positive integer"),
    (_sparse(sparse_index_dim=32), r"'sparse_index_dim' \(32\) is narrower than rotary_dim \(64\)"),
    (_sparse(sparse_block_size="128"), "'sparse_block_size' must be a positive integer"),
    (_sparse(sparse_topk_blocks=None), "missing field 'sparse_topk_blocks'"),
    (_sparse(sparse_local_block=0), "'sparse_local_block' 0 is not read"),
    (_sparse(sparse_init_block=16), r"'sparse_init_block' \+ sparse_local_block \(16 \+ 1\) exceeds"),
    ({**raw(), "moe_layer_freq": None}, "'moe_layer_freq' is missing"),
    ({**raw(), "first_k_dense_replace": 2}, "'first_k_dense_replace' disagrees with moe_layer_freq"),
    ({**raw(), "moe_intermediate_size": 1536}, "'moe_intermediate_size' disagrees with intermediate_size"),
    ({**raw(), "shared_intermediate_size": 6144}, "'shared_intermediate_size' other than one shared expert"),
    ({**raw(), "n_shared_experts": 2}, "'shared_intermediate_size' other than one shared expert"),
    ({**raw(), "hidden_act": "silu"}, "'hidden_act' 'silu' is not read"),
    ({**raw(), "swiglu_limit": -1}, "'swiglu_limit' must be a positive number"),
    ({**raw(), "attention_output_gate": True}, "'attention_output_gate' true is not read"),
    ({**raw(), "qk_norm_type": "per_layer"}, "'qk_norm_type' other than per_head"),
    ({**raw(), "rotary_dim": 63}, "'rotary_dim' must be an even number"),
    ({**raw(), "partial_rotary_factor": 0.25}, "'partial_rotary_factor' .* disagrees with rotary_dim"),
    ({**raw(), "scoring_func": "softmax"}, "'scoring_func' other than sigmoid"),
    ({**raw(), "sliding_window": 4096}, "'sliding_window' is not read"),
    ({**raw(), "torch_dtype": "int8"}, "'torch_dtype' must be 'bfloat16'"),
])
def test_a_hostile_field_is_refused_by_name(config: dict[str, Any], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        config_from_dict(config)


# nvidia/MiniMax-M3-NVFP4's vision_config as published (its config.json is 3.09 MB: quantized_layers lists every
# module), the language model in text_config beside it
VISION = {"hidden_size": 1280, "num_attention_heads": 16, "num_hidden_layers": 32, "intermediate_size": 5120,
          "patch_size": 14, "image_size": 2016, "projection_dim": 6144, "position_embedding_type": "rope",
          "rope_mode": "3d", "hidden_act": "gelu", "layer_norm_eps": 1e-05, "model_type": "clip_vision_model",
          "num_channels": 3, "img_token_compression_config": {"image_token_compression_method": "patch_merge",
                                                              "spatial_merge_size": 2, "temporal_patch_size": 2}}


def vl() -> dict[str, Any]:
    return {"model_type": "minimax_m3_vl", "text_config": {**raw(), "model_type": "minimax_m3_vl_text"},
            "vision_config": VISION, "projector_hidden_size": 6144, "multimodal_projector_bias": True}


def test_the_multimodal_export_counts_its_vision_tower() -> None:
    # transformers MiniMaxM3VLVisionModel and MiniMaxM3VLMultiModalProjector, w 1280, f 5120, 32 layers, h = P = 6144
    w, f, h = 1280, 5120, 6144
    layer = 4 * (w * w + w) + (w * f + f) + (f * w + w) + 4 * w  # q, k, v, out; fc1, fc2; two LayerNorms
    tower = 3 * 2 * 14 * 14 * w + 2 * w + 32 * layer  # Conv3d patches of 2 frames × 14 × 14, pre_layrnorm
    projector = (w * h + h) + 2 * (h * h + h) + (2 * 2 * h * h + h)  # linear_1, linear_2, the 2×2 merge's two
    cfg = config_from_dict(vl())
    assert cfg.vision_params == tower + projector == 865_567_232  # = transformers' (the _torch test)
    assert cfg.total_params == 426_174_572_928 + 865_567_232
    assert cfg.active_params == load_config(str(M3)).active_params  # a text token runs no vision tower
    with pytest.raises(RooflineError, match="field 'text_config' must be an object"):
        config_from_dict({"model_type": "minimax_m3_vl", "text_config": [1]})


@pytest.mark.parametrize(("change", "says"), [
    ({"vision_config": [1]}, "'vision_config' must be an object"),
    ({"vision_config": {**VISION, "position_embedding_type": "learned"}}, "'position_embedding_type' other than rope"),
    ({"vision_config": {**VISION, "patch_size": 0}}, "'patch_size' must be a positive integer"),
    ({"multimodal_projector_bias": False}, "'multimodal_projector_bias' false is not read"),
])
def test_a_hostile_vision_field_is_refused_by_name(change: dict[str, Any], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**vl(), **change})


def test_the_nvfp4_export_as_published() -> None:
    # nvidia/MiniMax-M3-NVFP4 (aiconfigurator-core 0.12.0 model_configs): MIXED_PRECISION module by module, the
    # experts NVFP4, attention, the indexer (index_q_proj, index_k_proj), the dense MLPs and the shared experts
    # MXFP8; the routers, tables, vision tower and projector (exclude_modules) BF16
    core = pytest.importorskip("aiconfigurator_core", reason="the calibration extra: pip install -e '.[calibration]'")
    path = Path(core.__file__).parent / "model_configs" / "nvidia--MiniMax-M3-NVFP4_config.json"
    cfg = config_from_dict(json.loads(path.read_text()), "MiniMax-M3-NVFP4", str(path))
    assert cfg.total_params == 427_040_140_160 and cfg.weights_dtype is not None and cfg.weights_dtype.name == "nvfp4"
    assert {(p, d.name, f) for p, d, f in cfg.mixed_weights} == {
        (p, "mxfp8", 1.0) for p in ("attention", "indexer", "mlp", "shared_experts")}
    kept = dict(cfg.unquantized)
    assert kept["vision"] == kept["router"] == kept["embedding"] == kept["lm_head"] == 1.0
    assert kept["experts"] == pytest.approx(0.0, abs=1e-12)


def test_the_cli_refuses_a_hostile_config_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(_sparse(sparse_score_type="sum")))
    out = _cli("model", str(tmp_path))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "sparse_score_type" in out.stderr and "Traceback" not in out.stderr
