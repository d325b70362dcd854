"""DeepSeek-style expert parallel as deployed (roofline.models.experts): FP8 dispatch, each token sent
once per destination node with node-limited routing, redundant experts, two-batch overlap.

Sources: DeepSeek-V3 technical report (arXiv 2412.19437 §2.1.2, node-limited routing: each token to at
most M = 4 nodes; top-8 of 256 routed experts); DeepSeek's inference system overview
(deepseek-ai/open-infra-index, 202502OpenSourceWeek day 6: prefill EP32 over 4 nodes with 32 redundant
experts, 9 routed experts a GPU; decode EP144 over 18 nodes, 2 a GPU); DeepEP (deepseek-ai/DeepEP): FP8
dispatch rows of hidden e4m3 values + hidden/128 FP32 scales, BF16 combine.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from roofline.cli import main
from roofline.dtypes import get_dtype
from roofline.errors import RooflineError
from roofline.models import analyze_model, load_config
from roofline.models.memory import device_weights_bytes
from roofline.models.split import check_split
from roofline.parallel import Split

H = 7168  # DeepSeek-V3 hidden_size
TOKENS = 4096  # prefill, batch 32 over DP 32: one 4096-token prompt a device


def _v3(**changes: object) -> object:
    return replace(load_config("deepseek-v3"), **changes)


def _comm(cfg: object, **split: int) -> dict[str, dict[str, float]]:
    a = analyze_model(cfg, "hgx-h200", "prefill", 32, TOKENS, split=Split(**split))  # type: ignore[arg-type]
    return {r["name"]: r for r in a.communication()["collectives"]}


def test_node_limit_read_from_the_config() -> None:
    assert load_config("deepseek-v3").routing_node_limit == 4  # n_group 8, topk_group 4
    assert load_config("kimi-k2").routing_node_limit == 0  # n_group 1: no group-limited routing


def test_per_expert_dispatch_bytes_by_hand() -> None:
    rows = _comm(load_config("deepseek-v3"), dp=32, ep=32)
    # one row per expert pick: 4096 tokens × 8 picks × 7168 × 2 B (bf16), (32 − 1)/32 of it leaves the device
    assert rows["moe.dispatch.all_to_all"]["bytes_on_link"] == pytest.approx(4096 * 8 * H * 2 * 31 / 32)
    assert rows["moe.dispatch.all_to_all"]["link"] == "network"  # EP 32 spans 4 nodes of 8


def test_node_deduplicated_fp8_dispatch_bytes_by_hand() -> None:
    cfg = _v3(dispatch_per_node=True, dispatch_dtype=get_dtype("fp8"))
    rows = _comm(cfg, dp=32, ep=32)
    # EP 32 = 4 nodes of 8 GPUs; node-limited routing: m = min(M = 4, 4 nodes) = 4 nodes a token may reach;
    # 8 picks over 4 nodes reach d_node = 4 · (1 − (3/4)^8) = 4 · (1 − 0.10011) = 3.59955 nodes
    d_node = 4 * (1 - 0.75**8)
    assert d_node == pytest.approx(3.59955, abs=1e-5)
    fp8_row = H + 4 * (H // 128)  # 7168 e4m3 values + 56 FP32 scales = 7392 B (DeepEP)
    assert fp8_row == 7392
    net = rows["moe.dispatch.network"]
    assert net["group_size"] == 4 and net["link"] == "network"
    # each token's row once per destination node; (4 − 1)/4 of the nodes are remote
    assert net["bytes_on_link"] == pytest.approx(TOKENS * math.ceil(d_node * fp8_row) * 3 / 4)
    # against one bf16 row per expert pick over the network: 4096 · 8 · 14336 · 31/32
    per_expert = TOKENS * 8 * H * 2 * 31 / 32
    assert net["bytes_on_link"] / per_expert == pytest.approx(3.59955 * 7392 * 0.75 / (8 * 14336 * 31 / 32), rel=1e-4)
    # then NVLink once per destination GPU: 8 picks over 4 · 8 = 32 GPUs reach 32 · (1 − (31/32)^8) = 7.182
    d_gpu = 32 * (1 - (31 / 32) ** 8)
    nvl = rows["moe.dispatch.nvlink"]
    assert nvl["group_size"] == 8 and nvl["link"] == "link"
    assert nvl["bytes_on_link"] == pytest.approx(TOKENS * math.ceil(d_gpu * fp8_row) * 7 / 8)
    # combine comes back in BF16 (DeepEP), once per node over the network
    assert rows["moe.combine.network"]["bytes_on_link"] == pytest.approx(TOKENS * math.ceil(d_node * H * 2) * 3 / 4)


def test_redundant_experts_in_the_memory_fit_by_hand() -> None:
    cfg0, cfg32 = load_config("deepseek-v3"), _v3(redundant_experts=32)
    # one routed expert: gate, up, down = 3 · 7168 · 2048 parameters, FP8 with one FP32 scale per 128×128 block
    expert_bytes = 3 * H * 2048 * (1 + 4 / (128 * 128))
    moe_layers = 61 - 3  # first_k_dense_replace 3
    dt = analyze_model(cfg0, "hgx-h200", "decode", 32, 1024, split=Split(dp=32, ep=32)).model.dtypes
    # EP 32: 256 / 32 = 8 experts a device; with 32 replicas (256 + 32) / 32 = 9 (DeepSeek's prefill: 9 a GPU)
    extra = device_weights_bytes(cfg32, Split(dp=32, ep=32), dt) - device_weights_bytes(cfg0, Split(dp=32, ep=32), dt)
    assert extra == pytest.approx(moe_layers * 1 * expert_bytes, rel=1e-9)
    # EP 144 over 256 + 32 = 288 slots: 2 a device (DeepSeek's decode); refused without the replicas
    with pytest.raises(RooflineError, match="does not divide"):
        check_split(cfg0, Split(dp=144, ep=144), 144)
    check_split(cfg32, Split(dp=144, ep=144), 144)
    w144 = device_weights_bytes(cfg32, Split(dp=144, ep=144), dt)
    w144_more = device_weights_bytes(_v3(redundant_experts=176), Split(dp=144, ep=144), dt)  # 432 / 144 = 3 a device
    assert w144_more - w144 == pytest.approx(moe_layers * expert_bytes, rel=1e-9)
    a = analyze_model(cfg32, "hgx-h200", "decode", 144, 4096, split=Split(dp=144, ep=144))
    assert a.memory.weights_bytes == pytest.approx(w144)
    assert a.memory.fits
    gate_up = next(k for k in a.model.graph.ops if k.name == "moe.experts.gate_up")
    assert "2 of 256 + 32 replicas slots on this device" in gate_up.note


def test_two_batch_overlap_named_and_never_a_default() -> None:
    plain = analyze_model(load_config("deepseek-v3"), "hgx-h200", "prefill", 32, TOKENS, split=Split(dp=32, ep=32))
    assert plain.overlap_summary() is None and "two_batch_overlap" not in plain.to_dict()
    a = analyze_model(_v3(two_batch_overlap=True), "hgx-h200", "prefill", 32, TOKENS, split=Split(dp=32, ep=32))
    tbo = a.overlap_summary()
    assert tbo is not None and "all-to-all" in tbo["hides"] and "other micro-batch" in tbo["hides"]
    # DP attention with EP: the only collectives are the MoE all-to-alls, so
    # without = compute + all-to-all; with = max(compute, all-to-all)
    assert tbo["time_without_s"] == pytest.approx(tbo["compute_s"] + tbo["all_to_all_s"])
    assert tbo["time_with_s"] == pytest.approx(max(tbo["compute_s"], tbo["all_to_all_s"]))
    assert a.time_s == pytest.approx(tbo["time_with_s"]) and plain.time_s == pytest.approx(tbo["time_without_s"])


def test_model_command_shows_both_with_and_without(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["model", "deepseek-v3", "--machine", "hgx-h200", "--dp", "32", "--ep", "32", "--phase", "prefill",
            "--batch", "32", "--prompt", "4096", "--two-batch-overlap"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "--two-batch-overlap hides the MoE all-to-all" in out and "without" in out
    assert "expected with --two-batch-overlap" in out
    assert main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    band, tbo = d["totals"]["expected_time_s"], d["totals"]["expected_time_s_two_batch_overlap"]
    assert tbo["low"] <= band["low"] and tbo["high"] <= band["high"]
    assert d["two_batch_overlap"]["time_with_s"] < d["two_batch_overlap"]["time_without_s"]


def test_serve_decode_with_two_batch_overlap_is_faster(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["serve", "deepseek-v3", "--machine", "hgx-h200", "--dp", "16", "--ep", "16", "--prompt", "1024",
            "--output", "64", "--batch", "256", "--json"]
    assert main(base) == 0
    without = json.loads(capsys.readouterr().out)
    assert main([*base, "--two-batch-overlap"]) == 0
    captured = capsys.readouterr()
    assert "--two-batch-overlap" in captured.err  # named, never silent
    with_ = json.loads(captured.out)

    mean_with, mean_without = with_["itl_s"]["mean"], without["itl_s"]["mean"]
    assert mean_with["floor"] < mean_without["floor"]
    assert mean_with["expected"]["high"] < mean_without["expected"]["high"]
    assert mean_with["floor"] <= mean_with["expected"]["low"]  # the floor stays below its band
    # the prefill step hides the same all-to-all, floor and band (TTFT at batch 1 of a 1024-token prompt)
    ttft_with, ttft_without = with_["ttft_s"], without["ttft_s"]
    assert ttft_with["floor"] < ttft_without["floor"]
    assert ttft_with["expected"]["high"] < ttft_without["expected"]["high"]
    assert ttft_with["expected"]["low"] < ttft_without["expected"]["low"]
    assert ttft_with["floor"] <= ttft_with["expected"]["low"]
    assert "prefill step (floor and band)" in captured.err


@pytest.mark.parametrize(("args", "words"), [
    (["--dp", "144", "--ep", "144", "--batch", "144", "--redundant-experts", "30"],
     "256 experts + 30 replicas = 286 slots do not divide over --ep 144; try --redundant-experts 32"),
    (["--dp", "144", "--ep", "144", "--batch", "144"], "or add --redundant-experts 32"),
    (["--redundant-experts", "32"], "needs --ep > 1"),
    (["--dp", "8", "--ep", "8", "--batch", "8", "--redundant-experts", "-4"], "--redundant-experts"),
    (["--dp", "8", "--ep", "8", "--batch", "8", "--dispatch-dtype", "fp16"], "use fp8"),
    (["--dp", "8", "--ep", "8", "--batch", "8", "--dispatch-dtype", "fp9"], "fp9"),
])
def test_bad_expert_input_one_line_exit_2(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "deepseek-v3", "--machine", "hgx-h200", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_dense_model_refuses_expert_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "llama-3-8b", "--two-batch-overlap"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "llama-3-8b is not a mixture of experts" in err


def test_overlap_names_what_it_hides_and_shows_both(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["model", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--batch", "64", "--context", "8192"]
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert "hides" not in plain and "expected with" not in plain  # nothing hidden unless asked
    assert main([*args, "--overlap"]) == 0
    out = capsys.readouterr().out
    assert "--overlap hides every collective under the step's compute" in out and "without" in out
    assert "expected with --overlap" in out
    a = analyze_model("llama-3-70b", "dgx-h100", "decode", 64, 8192, split=Split(tp=8), overlap=True)
    hid = a.overlap_summary()
    assert hid is not None
    assert hid["time_with_s"] == pytest.approx(max(hid["compute_s"], hid["hidden_collectives_s"]))
    assert hid["time_without_s"] == pytest.approx(hid["compute_s"] + hid["hidden_collectives_s"])
