"""Many devices: splits as graph transformations, collectives on the link roof, memory per device.

Every expected value is derived by hand below (Llama 3 70B: h = 8192, 80 layers, 64 query and 8 KV
heads of 128, MLP 28672, vocabulary 128,256; an H100 SXM: 989.4 TFLOP/s BF16, 3.35 TB/s, 80 GiB).
"""

from __future__ import annotations

import json

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.models import analyze_model
from roofline.parallel import BUS_FACTOR, Collective, Split, deploy
from roofline.vocab import Level

GiB = 2**30
H100_BW = 3.35e12
LLAMA_70B_WEIGHTS = 70_553_706_496 * 2  # published 70.55 B parameters (tests/test_models.py), BF16
LLAMA_70B_KV_8K_B64 = 64 * 8192 * 327_680  # batch × context × 320 KiB per token


def test_bus_factors_are_nccl_tests() -> None:
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw × 2(n−1)/n (all-reduce), × (n−1)/n (the others)
    assert BUS_FACTOR[Collective.ALL_REDUCE](4) == 2 * 3 / 4
    assert BUS_FACTOR[Collective.ALL_GATHER](8) == BUS_FACTOR[Collective.ALL_TO_ALL](8) == 7 / 8
    assert BUS_FACTOR[Collective.SEND_RECV](2) == 1


def test_invalid_splits_are_one_clear_error() -> None:
    with pytest.raises(RooflineError, match=r"does not divide .* 64 query heads"):
        analyze_model("llama-3-70b", "h100", "decode", 8, 1024, split=Split(tp=3))
    with pytest.raises(RooflineError, match=r"more stages than .* 80 layers"):
        analyze_model("llama-3-70b", "h100", "decode", 8, 1024, split=Split(pp=81))
    with pytest.raises(RooflineError, match="not a mixture of experts"):
        analyze_model("llama-3-70b", "h100", "decode", 8, 1024, split=Split(dp=2, ep=2))
    with pytest.raises(RooflineError, match=r"does not divide .* 8 experts"):
        analyze_model("mixtral-8x7b", "h100", "decode", 6, 1024, split=Split(dp=3, ep=3))
    with pytest.raises(RooflineError, match="not a multiple of dp"):
        analyze_model("llama-3-8b", "h100", "decode", 3, 1024, split=Split(dp=2))


def test_kv_heads_replicated_past_their_count_is_said() -> None:
    a = analyze_model("llama-3-8b", "h100", "decode", 8, 1024, split=Split(tp=16))  # 32 heads, 8 KV heads
    assert any("replicated 2×" in w for w in a.warnings)
    # each device keeps one KV head: 1/8 of the cache, not 1/16
    one = analyze_model("llama-3-8b", "h100", "decode", 8, 1024)
    assert a.memory.kv_cache_bytes == pytest.approx(one.memory.kv_cache_bytes / 8)


def test_llama_70b_decode_tp4_by_hand() -> None:
    a = analyze_model("llama-3-70b", "h100", "decode", 64, 8192, split=Split(tp=4))
    comm = a.communication()
    reduces = [c for c in comm["collectives"] if c["kind"] == Collective.ALL_REDUCE]
    layer = [c for c in reduces if c["count"] == 80]
    assert sum(c["count"] for c in layer) == 160  # two per layer (after o_proj, after down_proj) × 80 layers
    assert all(c["bytes"] == 64 * 8192 * 2 == 1_048_576 for c in reduces)  # [64 tokens, 8192] in BF16
    assert all(c["bytes_on_link"] == 2 * 3 / 4 * 1_048_576 and c["link"] == Level.LINK for c in reduces)
    kinds = {c["name"]: c["kind"] for c in comm["collectives"]}
    assert kinds["embedding.all_reduce"] == Collective.ALL_REDUCE  # vocab-parallel embedding
    assert kinds["logits.all_gather"] == Collective.ALL_GATHER  # vocab-parallel LM head
    # per device: a quarter of the weights and of the cache, the embedding table gathered not streamed
    table = 128_256 * 8192 * 2
    streamed = (LLAMA_70B_WEIGHTS - table + LLAMA_70B_KV_8K_B64) / 4  # ≈ 77.7 GB
    assert streamed == pytest.approx(77.7e9, rel=2e-3)
    roles = a.bytes_by_role()
    assert roles["weight"] + roles["kv_cache"] == pytest.approx(streamed, rel=2e-3)
    assert streamed / H100_BW == pytest.approx(23.2e-3, rel=2e-3)  # the memory time, 23.2 ms
    assert 23e-3 < a.time_s < 28e-3  # plus activations and 162 collectives on NVLink


def test_llama_70b_tp4_does_not_fit_tp8_does() -> None:
    a = analyze_model("llama-3-70b", "h100", "decode", 64, 8192, split=Split(tp=4))
    m = a.memory
    norms = (80 * 2 + 1) * 8192 * 2  # two RMSNorm gains a layer and the final one: replicated, not split
    assert m.weights_bytes == pytest.approx((LLAMA_70B_WEIGHTS - norms) / 4 + norms)  # 35.3 GB
    assert m.kv_cache_bytes == pytest.approx(LLAMA_70B_KV_8K_B64 / 4)  # 42.9 GB
    assert m.weights_bytes + m.kv_cache_bytes == pytest.approx(78.2e9, rel=1e-3)
    assert m.usable_bytes == pytest.approx(0.9 * 80 * GiB)  # 77.3 GB
    assert not m.fits and m.min_split == Split(tp=8)
    one = analyze_model("llama-3-70b", "h100", "decode", 64, 8192)
    assert one.memory.devices == 8  # the smallest VALID split, not ceil(313 GB / 80 GiB) = 4


def test_prefill_tp8_all_reduce_moves_two_sevenths_of_a_tensor_twice() -> None:
    a = analyze_model("llama-3-70b", "h100", "prefill", 1, 8192, split=Split(tp=8))
    r = next(c for c in a.communication()["collectives"] if c["name"] == "attn.all_reduce")
    assert r["bytes"] == 8192 * 8192 * 2 == 134_217_728  # 134 MB: [8192 tokens, 8192] BF16
    assert r["bytes_on_link"] == pytest.approx(2 * 7 / 8 * 134_217_728)


def test_pipeline_sends_between_stages_and_halves_a_device() -> None:
    one = analyze_model("llama-3-70b", "h100", "decode", 64, 8192, split=Split(tp=4))
    two = analyze_model("llama-3-70b", "h100", "decode", 64, 8192, split=Split(tp=4, pp=2))
    sends = [c for c in two.communication()["collectives"] if c["kind"] == Collective.SEND_RECV]
    assert sum(c["count"] for c in sends) == 1 and sends[0]["bytes"] == 64 * 8192 * 2  # one hop of [N, h]
    assert two.memory.kv_cache_bytes == pytest.approx(one.memory.kv_cache_bytes / 2)  # 40 of 80 layers
    # the step runs every stage in turn: as long as one device's, plus the hop
    assert two.time_s == pytest.approx(one.time_s + sends[0]["total_time_s"], rel=1e-9)
    # throughput: two micro-batches of 32 in flight, one a stage (40 of the 80 layers)
    micro = analyze_model("llama-3-70b", "h100", "decode", 32, 8192, split=Split(tp=4, pp=2))
    assert two.micro_batch_time_s == pytest.approx(micro.time_s)
    assert two.tokens_per_s == pytest.approx(32 / (micro.time_s * 40 / 80))


def test_data_parallel_replicas_multiply_throughput() -> None:
    one = analyze_model("llama-3-8b", "h100", "decode", 32, 4096)
    two = analyze_model("llama-3-8b", "h100", "decode", 64, 4096, split=Split(dp=2))
    assert two.time_s == pytest.approx(one.time_s) and two.tokens_per_s == pytest.approx(2 * one.tokens_per_s)
    assert two.batch == 64


def test_expert_parallel_all_to_all_and_local_experts() -> None:
    a = analyze_model("deepseek-v3", "h100", "decode", 64, 4096, split=Split(dp=8, ep=8))
    comm = a.communication()["collectives"]
    a2a = [c for c in comm if c["kind"] == Collective.ALL_TO_ALL]
    assert {c["name"] for c in a2a} == {"moe.dispatch.all_to_all", "moe.combine.all_to_all"}
    # each replica's 8 tokens × 8 routed experts, 7168 wide, BF16, go out and come back
    assert all(c["bytes"] == 8 * 8 * 7168 * 2 and c["bytes_on_link"] == pytest.approx(7 / 8 * 8 * 8 * 7168 * 2)
               for c in a2a)
    assert a.memory.weights_bytes < analyze_model("deepseek-v3", "h100", "decode", 8, 4096).memory.weights_bytes / 4


def test_model_command_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["model", "llama-3-70b", "--machine", "h100", "--tp", "4", "--batch", "64", "--context", "8192",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    d = json.loads(out)
    assert d["parallel"] == {"tp": 4, "pp": 1, "ep": 1, "dp": 1, "devices": 4, "system": "h100-sxm",
                             "devices_per_node": 8}  # a bare device: one node of 8
    assert set(d["per_device"]) >= {"flop", "bytes", "weights_bytes", "kv_cache_bytes", "time_s"}
    assert set(d["communication"]) >= {"time_s", "bytes_per_device", "collectives"}
    assert set(d["communication"]["collectives"][0]) >= {"name", "kind", "count", "bytes", "group_size", "link",
                                                          "time_s"}
    assert d["memory_fit"]["fits"] is False and d["memory_fit"]["min_devices"] == 8
    assert d["totals"]["time_s"] == pytest.approx(sum(k["total_time_s"] for k in d["kernels"]))
    assert "does not fit" in err and "TP 8" in err


def test_bad_split_flags_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, words in ((["--tp", "3"], "does not divide"), (["--tp", "0"], "--tp must be a positive integer"),
                        (["--devices", "6", "--tp", "4"], "--devices 6 but")):
        code = main(["model", "llama-3-70b", "--batch", "8", *argv])
        _, err = capsys.readouterr()
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_overlap_hides_communication_at_best() -> None:
    a = analyze_model("llama-3-70b", "h100", "prefill", 1, 4096, split=Split(tp=8))
    b = analyze_model("llama-3-70b", "h100", "prefill", 1, 4096, split=Split(tp=8), overlap=True)
    comm = a.communication_time_s
    assert comm > 0 and b.time_s == pytest.approx(max(a.time_s - comm, comm))


def test_a_group_stays_on_the_node_link_when_all_devices_are_in_one_node() -> None:
    from roofline.parallel import group_level

    assert group_level(32, 72, devices=64) is Level.LINK  # TP 32 × 2 on one NVL72 node: no group leaves it
    assert group_level(32, 72) is Level.NETWORK  # a third group of 32 would straddle two 72-device nodes
    assert group_level(8, 8) is Level.LINK and group_level(16, 8) is Level.NETWORK


# Expert parallel with tensor-parallel attention (vLLM's --enable-expert-parallel): Mixtral 8x7B, h = 4096,
# 32 layers, 32 query and 8 KV heads of 128, 8 experts of width 14336 (top 2), vocabulary 32,000.
MIXTRAL_TP8_EP8 = Split(tp=8, ep=8)


def test_mixtral_tp8_ep8_decode_by_hand() -> None:
    a = analyze_model("mixtral-8x7b", "dgx-h100", "decode", 64, 4096, split=MIXTRAL_TP8_EP8)
    comm = {c["name"]: c for c in a.communication()["collectives"]}
    assert "mlp.all_reduce" not in comm  # the MoE ends in an all-gather over tp, not an all-reduce
    # each tp rank routes 64/8 = 8 of the 64 tokens × top 2 = 16 rows, 4096 wide, BF16, out and back over ep 8
    for name in ("dispatch.all_to_all", "combine.all_to_all"):
        c = comm[name]
        assert c["bytes"] == 64 // 8 * 2 * 4096 * 2 == 131_072 and c["group_size"] == 8 and c["count"] == 32
        assert c["bytes_on_link"] == pytest.approx(7 / 8 * 131_072) and c["link"] == Level.LINK
    # the [64, 4096] BF16 output rebuilt from every rank's 8 rows, once per MoE layer, over tp 8
    g = comm["mlp.all_gather"]
    assert g["kind"] == Collective.ALL_GATHER and g["bytes"] == 64 * 4096 * 2 == 524_288
    assert g["count"] == 32 and g["group_size"] == 8 and g["bytes_on_link"] == pytest.approx(7 / 8 * 524_288)
    assert comm["attn.all_reduce"]["count"] == 32  # attention is still tensor parallel
    ops = {op.name: op for op in a.model.graph.ops}
    # 16 routed rows arrive (uniform routing: as many as were sent) at 1 whole expert of 8: the group's
    # 8 × 8 = 64 tokens hit all 8 experts, 8 / ep 8 = 1 on this device, not split by tp (2 × 14336 wide)
    assert a.model.experts_hit == 8
    assert ops["experts.gate_up"].inputs[0].shape == (16, 4096)
    assert ops["experts.gate_up"].inputs[1].shape == (1, 4096, 2 * 14336)
    assert ops["router"].inputs[0].shape == (8, 4096) and ops["combine"].outputs[0].shape == (8, 4096)
    # weights per device: attention / 8 (q 4 heads, k and v 1 head, o: 4096 × 1280), 1 expert (3 · 4096 ·
    # 14336), router (4096 × 8) and norms (2 × 4096 a layer, + the final one) whole, embedding and LM head / 8
    per_layer = 4096 * 10_240 // 8 + 3 * 4096 * 14_336 + 4096 * 8 + 2 * 4096
    weights = (32 * per_layer + 4096 + 2 * 32_000 * 4096 // 8) * 2
    assert weights == 11_677_999_104  # 11.7 GB
    assert a.memory.weights_bytes == weights
    assert a.memory.kv_cache_bytes == pytest.approx(64 * 4096 * 32 * 2 * 128 * 2)  # 1 KV head of 8 a device


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_ep_with_tp_graph_path_agrees_with_the_sweep(phase: str) -> None:
    from roofline.hardware import get_system
    from roofline.models import StepModel, deployments, dtype_steps, load_config, model_dtypes
    from roofline.models.sweep import sweep

    cfg, dt = load_config("mixtral-8x7b"), model_dtypes()
    dpn = get_system("dgx-h100").devices_per_node
    points = [(8, 1000), (64, 4096), (256, 8192)] if phase == "decode" else [(8, 512), (16, 4096)]
    for sp in (MIXTRAL_TP8_EP8, Split(tp=4, dp=2, ep=8), Split(tp=2, pp=2, ep=2)):
        for plan in ("none", "flash", "fused"):
            fitted = StepModel.fit(cfg, phase, dt, plan, split=sp, devices_per_node=dpn,
                                   nvls=deploy("dgx-h100", sp).nvls)  # checks its own fit; NVLS where it runs
            for b, s in points:
                a = analyze_model(cfg, "dgx-h100", phase, b, s, plan, dt, split=sp)
                r = fitted.evaluate([b], [s], a.machine, a.dtype)
                assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)
                assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)
                assert float(r["time_s"][0]) == pytest.approx(a.time_s, rel=1e-9)
    rows = sweep(dtype_steps("mixtral-8x7b", phase), deployments(["dgx-h100"], [MIXTRAL_TP8_EP8]), [8, 64], [4096])
    for row in rows:
        a = analyze_model(cfg, "dgx-h100", phase, row["batch"], 4096, split=MIXTRAL_TP8_EP8)
        assert row["time_s"] == pytest.approx(a.time_s, rel=1e-9) and (row["tp"], row["ep"]) == (8, 8)
        assert row["tokens_per_s"] == pytest.approx(a.tokens_per_s, rel=1e-9)


def test_ep_with_tp_needs_whole_token_shares(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.models import deployments, dtype_steps
    from roofline.models.sweep import sweep

    # decode: N = batch / dp = 4 tokens cannot be split over 8 tp ranks; prefill: 1 × 1001 neither
    with pytest.raises(RooflineError, match=r"ep 8 with tp 8: .* multiple of 8 \(decode: batch / dp = 4\)"):
        analyze_model("mixtral-8x7b", "dgx-h100", "decode", 4, 4096, split=MIXTRAL_TP8_EP8)
    with pytest.raises(RooflineError, match=r"multiple of 8 \(prefill: batch / dp × prompt = 1 × 1001 = 1001\)"):
        analyze_model("mixtral-8x7b", "dgx-h100", "prefill", 1, 1001, split=MIXTRAL_TP8_EP8)
    analyze_model("mixtral-8x7b", "dgx-h100", "prefill", 1, 1000, split=MIXTRAL_TP8_EP8)  # 1000 = 8 × 125
    with pytest.raises(RooflineError, match=r"batch 12 is not a multiple of tp × dp = 8 × 1 = 8"):
        sweep(dtype_steps("mixtral-8x7b"), deployments(["dgx-h100"], [MIXTRAL_TP8_EP8]), [8, 12], [4096])
    code = main(["model", "mixtral-8x7b", "--machine", "dgx-h100", "--tp", "8", "--ep", "8", "--batch", "4"])
    _, err = capsys.readouterr()
    assert code == 2 and "multiple of 8" in err and len(err.strip().splitlines()) == 1, err


def test_ep_group_within_a_tp_group_stays_on_the_link() -> None:
    from roofline.models.split import comm_for

    assert comm_for(Split(tp=8, dp=2, ep=8), 8).ep_level is Level.LINK  # each node's tp ranks are an ep group
    assert comm_for(Split(tp=8, dp=2, ep=16), 8).ep_level is Level.NETWORK  # across both replicas' nodes
    assert comm_for(Split(dp=16, ep=8), 8).ep_level is Level.NETWORK  # data-parallel attention: as before


def test_the_largest_batch_a_split_holds() -> None:
    # Llama 3 70B at 8k on TP 8 of H100s: 72 GiB usable a device, weights (141.1 GB − norms)/8 + norms;
    # each sequence adds 8192 · 327,680 / 8 B of KV cache (a device holds 1 of the 8 KV heads) and its
    # share of the workspace: ⌊(usable − weights) / per sequence⌋
    a = analyze_model("llama-3-70b", "h100", "decode", 64, 8192, split=Split(tp=8))
    m = a.memory
    per_sequence = (m.kv_cache_bytes + m.workspace_bytes) / 64
    assert m.kv_cache_bytes == pytest.approx(64 * 8192 * 327_680 / 8)
    assert m.max_batch == int((0.9 * 80 * GiB - m.weights_bytes) // per_sequence)
    assert m.max_batch == 177  # (77.31 GB − 17.64 GB) / (335.5 MB of KV + 0.29 MB of workspace) = 177.7
    b = analyze_model("llama-3-70b", "h100", "decode", m.max_batch, 8192, split=Split(tp=8)).memory
    over = analyze_model("llama-3-70b", "h100", "decode", m.max_batch + 2, 8192, split=Split(tp=8)).memory
    assert b.fits and not over.fits


# --- one deployment: a machine and a split resolved once (roofline.parallel.deploy) ----------------

def test_a_system_deploys_its_device_with_its_links() -> None:
    from roofline.parallel import deploy

    d = deploy("dgx-h100", Split(tp=8))
    # DGX H100: nodes of 8 H100 SXM on NVLink 4, 900 GB/s bidirectional per GPU (NVIDIA) = 450 GB/s each way
    assert d.system_id == "dgx-h100" and d.devices_per_node == 8 and d.graph_devices_per_node == 8
    assert d.machine.memory[Level.LINK].bytes_per_s == 900e9 / 2
    with pytest.raises(RooflineError, match="needs 32768 devices; dgx-h100 has 16384"):
        deploy("dgx-h100", Split(tp=8, pp=4096))  # 2048 nodes of 8 in the system file at most


def test_a_bare_device_is_one_node_of_8_or_of_the_split() -> None:
    from roofline.parallel import MOST_DEVICES, NODE_DEVICES, deploy

    alone = deploy("h100")
    assert alone.system is None and alone.graph_devices_per_node is None  # one device, no links
    assert (alone.devices_per_node, alone.max_devices) == (NODE_DEVICES, MOST_DEVICES) == (8, 64)
    sixteen = deploy("h100", Split(tp=4, pp=4))  # 4 × 4 = 16 devices: one node of max(16, 8)
    assert sixteen.bare and sixteen.devices_per_node == 16 and sixteen.max_devices == 16


def test_one_catalog_device_deploys_without_building_its_node(monkeypatch: pytest.MonkeyPatch) -> None:
    # with no split, a catalog device's deployment is the device the node get_system builds would keep:
    # the catalog machine itself, read without the node's reference system (dgx-h100's file)
    from roofline.hardware import get_machine, get_system, system_file
    from roofline.hardware.system_file import bare_device
    from roofline.parallel import deploy

    kept = get_system("h100").device  # the node's device, as deploy kept it before
    monkeypatch.setattr(system_file, "catalog_system", lambda sid: pytest.fail(f"read the system {sid}"))
    alone = deploy("h100")
    assert alone.machine is kept is get_machine("h100") and alone.system is None
    # a system's name, a path and an unknown name are get_system's to resolve (and to refuse)
    assert bare_device("dgx-h100") is None and bare_device("./h100.toml") is None and bare_device("h1000") is None


def test_devices_alone_are_tensor_parallel_in_a_node_then_stages() -> None:
    from roofline.parallel import split_for_devices
    from roofline.parallel.deployment import UnevenDevices

    assert split_for_devices(16, "dgx-h100") == Split(tp=8, pp=2)  # two nodes of 8
    assert split_for_devices(4, "dgx-h100") == Split(tp=4)
    with pytest.raises(UnevenDevices, match="12 devices are not a whole number of 8-device nodes"):
        split_for_devices(12, "dgx-h100")


def test_library_errors_name_parameters_and_the_cli_names_flags(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama 3 70B has 64 query heads: tp = 3 does not divide them
    with pytest.raises(RooflineError) as exc:
        analyze_model("llama-3-70b", "dgx-h100", split=Split(tp=3))
    assert str(exc.value).startswith("tp 3 does not divide llama-3-70b's 64 query heads")
    assert main(["model", "llama-3-70b", "--machine", "dgx-h100", "--tp", "3"]) == 2
    assert "roofline: error: --tp 3 does not divide llama-3-70b's 64 query heads" in capsys.readouterr().err
