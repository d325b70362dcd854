"""Kimi K3's attention residuals (issue 22), a residual-stream mixer: before each norm and the head, a softmax over
the residual stream's snapshots, one taken every attn_res_block_size layers (roofline.models.attn_res). Every
figure is derived here by hand from K3's config (tests/fixtures/configs/Kimi-K3, the hub's config.json: 93
layers, hidden 7168, attn_res_block_size 12) and the computation of TensorRT-LLM@000a860's
modeling_kimi_linear.py (`_apply_attn_res`, KimiLinearDecoderLayer.forward: its port of the checkpoint's
modeling_kimi.py). transformers 5.24 has no attention residuals, so there is no FlopCounterMode check."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.hardware import get_machine
from roofline.models import StepModel, analyze_model, build_graph, config_from_dict, model_dtypes
from roofline.models.attn_res import AttentionResiduals
from roofline.vocab import Role, Unit

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
h, L, B = 7168, 93, 12  # K3's hidden_size, num_hidden_layers, attn_res_block_size


def k3_text() -> dict[str, Any]:
    """K3's text_config (its attn_res_block_size 12 and its 93 layers as published)."""
    raw: dict[str, Any] = json.loads((CONFIGS / "Kimi-K3" / "config.json").read_text())
    return copy.deepcopy(raw["text_config"])


def test_the_mixes_and_their_snapshots_by_hand() -> None:
    ar = AttentionResiduals(B, L)
    # layer i's attention mix reads ⌈i/12⌉ snapshots (i = 1..92; layer 0 runs on the embedding): 12 layers each of
    # 1..7 and 8 layers (85..92) of 8; its MLP mix ⌊i/12⌋ + 1 (i = 0..92): 12 each of 1..7, 9 (84..92) of 8
    assert ar.mixes() == (*((k, 12 + 12) for k in range(1, 8)), (8, 8 + 9))
    assert ar.live_snapshots == 8  # b_0 (the embedding) and one every 12 layers: layers 0, 12, ..., 84
    # Σ K: 12·(1 + ... + 7)·2 + 8·8 + 9·8 = 672 + 64 + 72, + the head's 8
    assert ar.snapshot_reads_per_token == 672 + 64 + 72 + 8 == 816
    # C = K + 1 a mix: + 92 attention mixes + 93 MLP mixes + the head's
    assert ar.candidates_per_token == 816 + 92 + 93 + 1 == 1002
    # the head's softmax runs over 9 candidates, the technical report's "9 candidates" for 8 blocks of 12 layers
    assert ar.live_snapshots + 1 == 9


def test_parameters_by_hand() -> None:
    # per layer self_attention_res_norm, mlp_res_norm (RMSNorm gains, h each) and self_attention_res_proj,
    # mlp_res_proj (nn.Linear(h, 1)); the head's output_attn_res_norm and output_attn_res_proj
    assert AttentionResiduals(B, L).params(h) == 4 * h * L + 2 * h == 2_680_832


def _graph_sums(g: Any, prefix: str = "attn_res.") -> tuple[float, float]:
    flop = sum(op.flop_by_unit.get(Unit.VECTOR, 0.0) * op.count for op in g.graph.ops if op.name.startswith(prefix))
    snap = sum(t.bytes * op.count for op in g.graph.ops if op.name.startswith(prefix) for t in op.inputs
               if t.name.endswith(".snapshots"))
    return flop, snap


@pytest.fixture(scope="module")
def k3() -> Any:
    return config_from_dict(k3_text(), "k3")


def test_decode_flops_and_snapshot_bytes_by_hand(k3: Any) -> None:
    g = build_graph(k3, "decode", 16, 8192)
    flop, snap = _graph_sums(g)
    # a mix over C candidates: scores 5·C·h (v² and its mean, · rsqrt, the dot with norm.weight·proj.weight),
    # softmax 5·C, Σ α·v 2·C·h; 1002 candidates a token, 16 tokens
    assert flop == 16 * 1002 * (5 * h + 5 + 2 * h) == 804_501_792
    # every mix reads its K snapshots of h in BF16: 816 rows a token; nothing grows with the context
    assert snap == 16 * 816 * h * 2 == 187_170_816
    assert _graph_sums(build_graph(k3, "decode", 16, 65536)) == (flop, snap)


def test_prefill_reads_every_snapshot_per_token_and_keeps_them_live(k3: Any) -> None:
    g = build_graph(k3, "prefill", 2, 4096)
    flop, snap = _graph_sums(g, "attn_res.k")
    # the layers' mixes run on all N = 2·4096 tokens: 1002 − 9 (the head's) candidates and 816 − 8 snapshots
    n = 2 * 4096
    assert flop == n * (1002 - 9) * 7 * h + n * (1002 - 9) * 5
    assert snap == n * (816 - 8) * h * 2
    # the head mixes the last position of each sequence only (logits "last"): 2 rows over 9 candidates
    head = next(op for op in g.graph.ops if op.name == "attn_res.head")
    assert head.flop_by_unit[Unit.VECTOR] == 2 * (5 * 9 * h + 5 * 9 + 2 * 9 * h)
    # the deepest mix holds all 8 snapshots, the partial sum and its output live at once: 10·N·h in BF16
    deepest = next(op for op in g.graph.ops if op.name == "attn_res.k8")
    live = sum(t.bytes for t in (*deepest.inputs, *deepest.outputs) if t.role is Role.ACTIVATION)
    assert live == 10 * n * h * 2


def test_the_step_model_reproduces_the_graph(k3: Any) -> None:
    # the sweep's numpy model: the mixes are linear in tokens, so its features already hold them
    m, dt = get_machine("h100"), model_dtypes("bf16", "bf16", "bf16")
    for phase in ("prefill", "decode"):
        fitted = StepModel.fit(k3, phase, dt, "flash")
        for b, s in ((3, 3000), (5, 700)):
            a = analyze_model(k3, m, phase, b, s, "flash", dt)
            r = fitted.evaluate([b], [s], m, a.dtype)
            assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)
            assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)


def test_tensor_parallel_keeps_the_mixes_whole(k3: Any) -> None:
    # the mix runs over the whole hidden state of each token on every device (nothing in it is sharded)
    from roofline.parallel import Split
    one, four = (_graph_sums(build_graph(k3, "decode", 8, 4096, split=Split(tp=tp))) for tp in (1, 4))
    assert one == four


@pytest.mark.parametrize("value", [0, -12, 94, "12", 12.5, True])
def test_hostile_attn_res_block_size_is_refused_naming_it(value: Any) -> None:
    raw = k3_text()
    raw["attn_res_block_size"] = value
    with pytest.raises(RooflineError, match="attn_res_block_size"):
        config_from_dict(raw, "k3")
