"""Llama 4 Scout and Maverick (`llama4`, text_config) from their own config.json (tests/fixtures/configs,
hub pages in its README): chunked attention on the RoPE layers, full attention on the NoPE ones,
interleaved MoE with a shared expert, Maverick's dense intermediate_size_mlp. Parameters against the
model cards, the KV cache by hand, chunked pairs by hand, TP, the step model against the graph, and a
hostile config per new field."""

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
SCOUT = str(CONFIGS / "Llama-4-Scout-17B-16E-Instruct")
MAVERICK = str(CONFIGS / "Llama-4-Maverick-17B-128E-Instruct")


def raw(path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(path) / "config.json").read_text())
    return data


def test_parameters_match_the_model_cards() -> None:
    # meta-llama model cards: Scout "17B (Activated) 109B (Total)", Maverick "17B (Activated) 400B (Total)";
    # the totals include the vision encoder, which these configs (text_config only) do not describe:
    # Scout's language model is 107.8B, below the 109B by the encoder
    scout, maverick = load_config(SCOUT), load_config(MAVERICK)
    assert round(scout.active_params / 1e9) == round(maverick.active_params / 1e9) == 17
    assert 107e9 < scout.total_params < 109e9
    assert abs(maverick.total_params - 400e9) < 1e9


def test_maverick_layers_by_hand() -> None:
    cfg = load_config(MAVERICK)
    # NoPE every 4th layer (no_rope_layer_interval 4): 12 full attention, 36 chunked; MoE every 2nd layer
    assert cfg.layer_groups() == (("chunked 8192", 36), ("full attention (no RoPE)", 12), ("dense MLP", 24),
                                  ("MoE", 24))
    parts, h = cfg.param_counts().parts, 5120
    assert parts["attention"] == 48 * (h * (40 + 2 * 8) * 128 + 40 * 128 * h)
    assert parts["mlp"] == 24 * 3 * h * 16384  # intermediate_size_mlp on the dense layers
    assert parts["experts"] == 24 * 128 * 3 * h * 8192
    assert parts["shared_experts"] == 24 * 3 * h * 8192
    assert parts["router"] == 24 * h * 128


def test_kv_cache_chunked_layers_capped_at_the_chunk() -> None:
    cfg = load_config(SCOUT)
    per_layer = 2 * 8 * 128 * 2  # K and V, 8 KV heads of 128, bf16
    assert cfg.kv_cache_bytes_per_token() == 48 * per_layer == 196_608  # uncapped
    # at 16,384 tokens: 12 NoPE layers keep all, 36 chunked layers keep their chunk of 8,192
    assert cfg.kv_cache_bytes(1, 16_384) == per_layer * (12 * 16_384 + 36 * 8192)
    assert cfg.kv_cache_bytes(1, 4096) == 48 * per_layer * 4096


def _attn(cfg: Any, phase: str, batch: int, seq: int, kind: str, split: Split | None = None) -> float:
    g = build_graph(cfg, phase, batch, seq, split=split)
    return sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in g.graph.ops
               if op.name.startswith(f"attn.{kind}."))


def test_chunked_attention_pairs_by_hand() -> None:
    cfg = load_config(SCOUT)
    per_pair = 40 * 4 * 128  # 2·H·(d + d) per (query, key) pair
    # prefill 20,000 = 2·8192 + 3616: chunk pairs 2·8192·8193/2 + 3616·3617/2 per chunked layer
    pairs = 2 * 8192 * 8193 // 2 + 3616 * 3617 // 2
    assert _attn(cfg, "prefill", 1, 20_000, "local") == pytest.approx(36 * per_pair * pairs, rel=1e-9)
    # decode at 10,000: the new token attends its own chunk's (10,000 − 1) mod 8192 + 1 = 1808 tokens
    assert _attn(cfg, "decode", 2, 10_000, "local") == pytest.approx(36 * per_pair * 2 * 1808, rel=1e-9)
    assert _attn(cfg, "decode", 2, 10_000, "global") == pytest.approx(12 * per_pair * 2 * 10_000, rel=1e-9)


def test_rope_runs_on_the_chunked_layers_only() -> None:
    cfg = load_config(SCOUT)
    op = next(op for op in build_graph(cfg, "decode", 8, 1024).graph.ops if op.name == "rope")
    # 3 FLOPs a rotated value on 40 query and 8 key heads of 128, on 36 of the 48 layers
    assert op.flop_by_unit[Unit.VECTOR] * op.count == 3 * 8 * (40 + 8) * 128 * 36


@pytest.mark.parametrize("phase", ["prefill", "decode"])
@pytest.mark.parametrize("split", [None, Split(tp=8)])
def test_step_model_agrees_with_the_graph(phase: str, split: Split | None) -> None:
    cfg, dt = load_config(MAVERICK), model_dtypes()
    nvls = deploy("dgx-h100", split).nvls  # its NVSwitch reduces: the graph's all-reduces may run NVLS
    fitted = StepModel.fit(cfg, phase, dt, split=split, devices_per_node=8, nvls=nvls)  # checks its own fit
    for b, s in ((2, 700), (8, 9000), (16, 20_000)):
        a = analyze_model(cfg, "dgx-h100", phase, b, s, dtypes=dt, split=split)
        r = fitted.evaluate([b], [s], a.machine, a.dtype)
        assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)
        assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)


def test_tensor_parallel_shards_the_heads() -> None:
    cfg = load_config(SCOUT)
    one = _attn(cfg, "decode", 8, 10_000, "local")
    assert _attn(cfg, "decode", 8, 10_000, "local", Split(tp=8)) * 8 == pytest.approx(one, rel=1e-12)
    with pytest.raises(RooflineError, match=r"does not divide .*40 query heads"):
        build_graph(cfg, "decode", 8, 1024, split=Split(tp=16))


@pytest.mark.parametrize(("change", "says"), [
    ({"no_rope_layers": [1, 0]}, "'no_rope_layers' must be a list of 48"),
    ({"attention_chunk_size": 0}, "'attention_chunk_size' must be a positive integer"),
    ({"attention_chunk_size": None}, "'no_rope_layers' with no attention_chunk_size is not read"),
    ({"interleave_moe_layer_step": 0}, "'interleave_moe_layer_step' must be a positive integer"),
    ({"moe_layers": [0, 1]}, "'moe_layers' disagrees with interleave_moe_layer_step"),
    ({"intermediate_size_mlp": None}, "missing field 'intermediate_size_mlp'"),
    ({"num_experts_per_tok": 200}, "'num_experts_per_tok' \\(200\\) must be at most num_local_experts"),
])
def test_a_hostile_llama4_field_is_refused_by_name(change: dict[str, Any], says: str) -> None:
    r = raw(MAVERICK)
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**r, "text_config": {**r["text_config"], **change}})


def test_a_vision_config_missing_a_field_is_refused_naming_it() -> None:
    # the tower is counted now (tests/test_models_today_more.py): a vision_config it cannot read is refused
    r = raw(SCOUT)
    with pytest.raises(RooflineError, match="vision_config: missing field 'intermediate_size'"):
        config_from_dict({**r, "vision_config": {"hidden_size": 1408}})
