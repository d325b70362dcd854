"""The graph's all-reduces run the algorithm engines run for their size (roofline.parallel.algorithms
wired into the graph builder, the step model, serve and train), on the system's measured start-up floor.

Figures by hand:
- Llama 3 70B: h = 8192 (its config.json); a decode all-reduce of one layer carries batch × h BF16
  values, S = batch · 8192 · 2 B (32 KiB at batch 2).
- HGX H200's node link: 900 GB/s bidirectional NVLink (NVIDIA H200 datasheet) = 450 GB/s per direction;
  α_floor 2.2 µs, the least start-up any measured h200_sxm collective of aiconfigurator-core 0.12.0's NCCL
  and custom all-reduce tables leaves (parallel/data/collectives.json, `roofline collective`).
- The algorithms' bytes per device (module docstring of roofline.parallel.algorithms): one-shot
  (n−1)·S, two-shot 2(n−1)/n·S, NVLS S; vLLM's custom all-reduce runs one-shot below 256 KiB on 8 GPUs,
  two-shot to 8 MiB (csrc/custom_all_reduce.cuh), NCCL NVLS above on NVSwitch systems.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.cli import main
from roofline.models import analyze_model, load_config, model_dtypes
from roofline.parallel import Split, deploy
from roofline.parallel.algorithms import Algorithm, AllReduceRule, system_collectives

H = 8192  # Llama 3 70B's hidden size
LINK = 450e9  # H200 NVLink per direction: 900 GB/s bidirectional / 2
ALPHA = 2.2e-6  # hgx-h200's alpha_floor


def _row(a, name: str) -> dict:  # type: ignore[no-untyped-def]
    return next(r for r in a.communication()["collectives"] if r["name"] == name)


def test_the_shipped_alpha_floor_is_the_node_links_alpha() -> None:
    data = system_collectives("hgx-h200")
    assert data is not None and data.alpha_floor_s == pytest.approx(ALPHA)
    d = deploy("hgx-h200", Split(tp=8))
    link = d.machine.memory["link"]
    assert link.latency_s == pytest.approx(ALPHA) and link.bytes_per_s == pytest.approx(LINK)
    assert d.nvls  # third-generation NVSwitch
    assert not deploy("l40s-pcie-8", Split(tp=8)).nvls  # PCIe: no switch that reduces


def test_an_8_way_decode_all_reduce_of_32_kib_runs_one_shot_on_its_floor() -> None:
    a = analyze_model("llama-3-70b", "hgx-h200", "decode", 2, 2048, split=Split(tp=8))
    r = _row(a, "attn.all_reduce")
    assert r["bytes"] == 2 * H * 2 == 32 * 1024
    assert r["algorithm"] == "one-shot" and "S < 256 KiB" in r["why"]
    # one-shot: each GPU reads its 7 peers' whole buffers: (n − 1) · S = 7 · 32768 = 229,376 B
    assert r["bytes_on_link"] == 7 * 32768
    assert r["time_s"] == pytest.approx(ALPHA + 7 * 32768 / LINK)  # 2.2 µs + 0.51 µs = 2.71 µs
    assert r["time_s"] == pytest.approx(2.7097e-6, rel=1e-4)
    # under the measured all-reduces of 32 KiB on 8×H200 (TRT-LLM 3.9 µs, vLLM 5.7 µs): a floor again
    assert r["time_s"] < 3.9e-6


def test_sizes_past_the_thresholds_run_two_shot_then_nvls() -> None:
    # batch 64: S = 64 · 8192 · 2 = 1 MiB, over 256 KiB and up to 8 MiB: two-shot, 2 · 7/8 · S
    r = _row(analyze_model("llama-3-70b", "hgx-h200", "decode", 64, 2048, split=Split(tp=8)), "mlp.all_reduce")
    assert r["algorithm"] == "two-shot" and r["bytes_on_link"] == pytest.approx(2 * 7 / 8 * 2**20)
    # prefill of 4 × 2048 tokens: S = 4 · 2048 · 8192 · 2 = 128 MiB: NVLS, each GPU sends S once
    r = _row(analyze_model("llama-3-70b", "hgx-h200", "prefill", 4, 2048, split=Split(tp=8)), "mlp.all_reduce")
    assert r["algorithm"] == "nvls" and r["bytes_on_link"] == 128 * 2**20
    assert r["time_s"] == pytest.approx(ALPHA + 128 * 2**20 / LINK)  # 298.3 µs + 2.2 µs


def test_without_nvswitch_nvls_is_not_offered(capsys: pytest.CaptureFixture[str]) -> None:
    # L40S over PCIe: the same 128 MiB runs the ring, 2 · 7/8 · S
    r = _row(analyze_model("llama-3-70b", "l40s-pcie-8", "prefill", 4, 2048, split=Split(tp=8)), "mlp.all_reduce")
    assert r["algorithm"] == "ring" and r["bytes_on_link"] == pytest.approx(2 * 7 / 8 * 128 * 2**20)
    with pytest.raises(Exception, match="no NVLink SHARP"):
        AllReduceRule.for_system("l40s-pcie-8", "nvls")
    code = main(["model", "llama-3-70b", "--machine", "l40s-pcie-8", "--tp", "8", "--allreduce", "nvls"])
    err = capsys.readouterr().err
    assert code == 2 and "l40s-pcie-8 has no NVLink SHARP" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_asked_for_ring_moves_the_rings_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "llama-3-70b", "--machine", "hgx-h200", "--tp", "8", "--batch", "2", "--context", "2048",
                 "--allreduce", "ring", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["communication"]["collectives"]
    r = next(r for r in rows if r["name"] == "attn.all_reduce")
    assert r["algorithm"] == "ring" and r["why"] == "asked for (--allreduce)"
    assert r["time_s"] == pytest.approx(ALPHA + 2 * 7 / 8 * 32768 / LINK)


def test_the_step_model_picks_per_point_as_the_graph_does() -> None:
    # batches on both sides of 256 KiB (batch 16: S = 256 KiB, no longer below it) and of 8 MiB (batch 512)
    cfg, dt = load_config("llama-3-70b"), model_dtypes()
    a0 = analyze_model(cfg, "hgx-h200", "decode", 2, 4096, split=Split(tp=8))
    sm = a0.step_model
    for b in (2, 8, 16, 64, 512, 1024):
        a = analyze_model(cfg, "hgx-h200", "decode", b, 4096, dtypes=dt, split=Split(tp=8))
        t = float(sm.evaluate(np.array([b]), np.array([4096]), a.machine, a.dtype)["time_s"][0])
        assert t == pytest.approx(a.time_s, rel=1e-9)
    alg = {b: _row(analyze_model(cfg, "hgx-h200", "decode", b, 4096, split=Split(tp=8)), "attn.all_reduce")[
        "algorithm"] for b in (8, 16, 512, 1024)}
    assert alg == {8: "one-shot", 16: "two-shot", 512: "two-shot", 1024: "nvls"}


def test_training_reduces_its_gradients_with_nvls_inside_an_nvswitch_node() -> None:
    from roofline.training import TrainSplit, analyze_training, describe_training

    setup = describe_training("llama-3-8b", 4096, 64, 1, TrainSplit(dp=8))
    a = analyze_training(setup, "hgx-h200")
    k = next(p for p in a.placed if p.kernel.kernel.name == "dp.grads.all_reduce")
    s = k.kernel.kernel.ops[0].inputs[0].bytes  # every BF16 gradient, 2 B a parameter
    assert k.kernel.kernel.cost.bytes_by_level["link"] == s  # NVLS: S once, not 2 · 7/8 · S
    rule = AllReduceRule(None, nvls=True)
    assert rule.pick(s, 8, False)[0] is Algorithm.NVLS
