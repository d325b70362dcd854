"""Llama-3.3-Nemotron-Super-49B (nemotron-nas: DeciLM's NAS blocks, an FFN width per layer, attention or
none) from its config.json (issue 22). Parameters against the model card, the KV cache per token by hand,
the FFN widths by DeciLM's formula, the step's MLP FLOPs by hand, tensor parallelism over the widths, a
hostile config per field. transformers 5.24 has no nemotron-nas model (it runs as remote code), so no
FlopCounterMode check."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import build_graph, config_from_dict, load_config
from roofline.models.architectures.nemotron_nas import ffn_width
from roofline.parallel import Split
from roofline.vocab import Unit

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
NAS = str(CONFIGS / "Llama-3_3-Nemotron-Super-49B-v1")
h, V = 8192, 128256


def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(NAS) / "config.json").read_text())
    return data


def test_ffn_widths_by_deciLM_formula() -> None:
    # modeling_decilm.py _ffn_mult_to_intermediate_size: int(2·m·h/3) rounded up to a multiple of 256
    assert ffn_width(5.25, h) == 28672  # 2·5.25·8192/3 = 28,672 exactly
    assert ffn_width(1.0, h) == 5632  # int(5,461.3) = 5,461 -> 22·256
    assert ffn_width(0.5, h) == 2816  # int(2,730.7) = 2,730 -> 11·256
    assert ffn_width(3.28125, h) == 17920


def test_nemotron_super_49b_parameters_by_hand_and_against_the_card() -> None:
    cfg = load_config(NAS)
    # block_configs: 49 attention blocks (n_heads_in_group 8: 64 query, 8 KV heads of 128), 31 no_op ones;
    # FFN widths 28672 ×49, 14336 ×6, 7168 ×10, 5632 ×8, 2816 ×6, 17920 ×1 (ffn_mult 5.25, 2.625, 1.3125, 1.0,
    # 0.5, 3.28125)
    assert cfg.layer_groups() == (("full attention", 49), ("dense MLP", 80))
    attention = h * (64 + 2 * 8) * 128 + 64 * 128 * h  # q, k, v and o_proj
    widths = 49 * 28672 + 6 * 14336 + 10 * 7168 + 8 * 5632 + 6 * 2816 + 17920
    norms = (49 + 80 + 1) * h  # input_layernorm on the attention blocks only, post_attention_layernorm, final
    total = 2 * V * h + 49 * attention + 3 * h * widths + norms
    assert cfg.total_params == total == 49_867_145_216
    # the model card (huggingface.co/nvidia/Llama-3_3-Nemotron-Super-49B-v1): 49.9 B parameters
    assert round(cfg.total_params / 1e8) == 499


def test_kv_cache_per_token_by_hand() -> None:
    cfg = load_config(NAS)
    # 49 attention layers × K and V × 8 KV heads × 128 × 2 bytes; the 31 no_op layers keep none
    assert cfg.kv_cache_bytes_per_token() == 49 * 2 * 8 * 128 * 2 == 200_704
    assert cfg.state_bytes_per_sequence() == 0
    # read as a Llama of 80 attention layers it would be 80/49 of it
    assert 80 * 2 * 8 * 128 * 2 / cfg.kv_cache_bytes_per_token() == pytest.approx(80 / 49)


def _mlp_matrix_flop(cfg: Any, split: Split | None = None) -> float:
    g = build_graph(cfg, "decode", 8, 4096, split=split) if split else build_graph(cfg, "decode", 8, 4096)
    return sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in g.graph.ops if op.name.startswith("ffn"))


def test_the_step_runs_each_layer_at_its_own_width() -> None:
    cfg = load_config(NAS)
    widths = 49 * 28672 + 6 * 14336 + 10 * 7168 + 8 * 5632 + 6 * 2816 + 17920
    # gate, up and down: 2·3·h·f FLOPs a token and layer, summed over the layers' widths, 8 tokens
    assert _mlp_matrix_flop(cfg) == 2 * 3 * h * widths * 8
    ops = {op.name: op for op in build_graph(cfg, "decode", 8, 4096).graph.ops}
    assert ops["ffn5632.down_proj"].count == 8 and ops["o_proj"].count == 49
    # tensor parallelism shards every width: 2816/8 = 352 a device
    assert _mlp_matrix_flop(cfg, Split(tp=8)) * 8 == _mlp_matrix_flop(cfg)


def _with_block(i: int, part: str, change: dict[str, Any]) -> dict[str, Any]:
    bad = copy.deepcopy(raw())
    bad["block_configs"][i][part].update(change)
    return bad


def _every_group(g: int) -> dict[str, Any]:
    bad = copy.deepcopy(raw())
    for block in bad["block_configs"]:
        if not block["attention"]["no_op"]:
            block["attention"]["n_heads_in_group"] = g
    return bad


@pytest.mark.parametrize("bad, match", [
    ({**raw(), "block_configs": raw()["block_configs"][:79]}, "field 'block_configs' must be a list of 80"),
    (_with_block(3, "attention", {"replace_with_linear": True}), "field 'replace_with_linear' is True: only False"),
    (_with_block(3, "attention", {"window_length": 4096}), "field 'window_length' is 4096: only None"),
    (_with_block(0, "attention", {"n_heads_in_group": 4}), "n_heads_in_group \\[4, 8\\] on different layers"),
    (_with_block(0, "attention", {"n_heads_in_group": None}), "missing field 'n_heads_in_group'"),
    (_every_group(48), "n_heads_in_group 48, which does not divide"),
    (_with_block(0, "ffn", {"ffn_mult": "wide"}), "field 'ffn_mult' must be a number"),
    (_with_block(0, "ffn", {"parallel_blocks": []}), "field 'parallel_blocks' is not read"),
    (_with_block(0, "ffn", {"replace_with_linear": True}), "field 'replace_with_linear' is True"),
    ({**raw(), "mlp_bias": True}, "field 'mlp_bias' is true")])
def test_hostile_nas_fields(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(RooflineError, match=match):
        config_from_dict(bad)


def test_a_no_op_ffn_layer_runs_no_mlp() -> None:
    cfg = config_from_dict(_with_block(6, "ffn", {"no_op": True}))
    # layer 6 (attention no_op, ffn_mult 2.625) is then nothing at all: one 14336-wide MLP and its norm fewer
    assert cfg.total_params == 49_867_145_216 - 3 * h * 14336 - h
    assert cfg.layer_groups() == (("full attention", 49), ("dense MLP", 79))
