"""The serving view (`roofline serve`, roofline.serving.serve): every number derived by hand.

Llama 3 70B: 80 layers, 8 KV heads of 128, max_position_embeddings 8192; its KV cache is
2 · 8 · 128 · 80 · 2 B = 327,680 B per token in BF16, and under TP 8 each device holds one KV head:
2 · 1 · 128 · 80 · 2 = 40,960 B per token. An H100 SXM has 80 GiB, of which 0.9 × 80 GiB = 72 GiB is
usable. With a 2048-token prompt and 256 output tokens a sequence holds 2304 tokens: 94,371,840 B per
device.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.measure.calibration import FORMAT, VERSION
from roofline.models import analyze_model
from roofline.models.dtypes import model_dtypes
from roofline.models.memory import device_weights_bytes
from roofline.parallel import Split
from roofline.serving import Efficiency, ServingReport, serve_model
from roofline.units import format_time
from roofline.vocab import Bound

GiB = 2**30
TP8 = Split(tp=8)
P, O = 2048, 256


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def llama() -> ServingReport:
    return serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, itl_slo_s=0.03, price_per_device_hour=2.5)


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel)


def workload(batch: int, itl: float, prefill: float, output: int = O, dp: int = 1) -> float:
    """Output tokens over a period of the steady state, prefill counted: each replica decodes its batch/dp
    sequences `output` times and prefills batch/dp new prompts: B·O / (O·ITL + (B/dp)·T_prefill)."""
    return batch * output / (output * itl + batch / dp * prefill)


# --- against the step ------------------------------------------------------------------------------

def test_ttft_is_the_prefill_step_at_batch_1(llama: ServingReport) -> None:
    # Llama 3 8B (h = 4096, 32 layers, 32 query and 8 KV heads of 128, MLP 14336, vocabulary 128,256): a
    # layer's matmul weights are q and o 4096², k and v 4096 · 1024 each and the MLP 3 · 4096 · 14336. One
    # 1024-token prompt: 2 FLOP per weight per token, causal attention 2 · 32 heads · (128 + 128) over
    # 1024 · 1025 / 2 pairs a layer, the LM head on the last position only: 1.457e13 FLOP of matmuls,
    # 14.73 ms at the H100 SXM's 989.4 TFLOP/s dense BF16 (NVIDIA's datasheet)
    one = serve_model("llama-3-8b", "h100", prompt=1024, output=16)
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    matmul_flop = 2 * layer * 32 * 1024 + 2 * 32 * 256 * (1024 * 1025 // 2) * 32 + 2 * 4096 * 128_256
    assert matmul_flop == pytest.approx(1.4569e13, rel=1e-4)
    assert one.prefill.flop == pytest.approx(matmul_flop, rel=1e-3)  # the rest: norms, softmax, activations
    compute_s = matmul_flop / 989.4e12
    # each kernel takes the larger of its compute and memory times: the step at least the compute, at most
    # the compute plus every byte at the 3.35 TB/s of HBM3
    assert compute_s < one.ttft.floor < compute_s + one.prefill.bytes / 3.35e12
    assert one.prefill.batch == 1 and one.prefill.seq == 1024  # one request, no queueing
    # Llama 3 70B under TP 8 (h = 8192, 80 layers, 64 and 8 heads, MLP 28672): each device runs 1/8 of the
    # matmuls of one 2048-token prompt, 3.57e13 FLOP, 36.1 ms at the peak, before its 161 all-reduces
    layer = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672
    per_device = (2 * layer * 80 * P + 2 * 64 * 256 * (P * (P + 1) // 2) * 80 + 2 * 8192 * 128_256) / 8
    assert per_device == pytest.approx(3.573e13, rel=1e-3)
    assert per_device / 989.4e12 + llama.prefill.communication_time_s <= llama.ttft.floor
    assert llama.prefill.batch == 1 and llama.prefill.seq == P


def test_itl_is_the_decode_step_at_the_batch_and_context(llama: ServingReport) -> None:
    # last: the step at prompt + output; at another batch, from the same step model
    assert close(llama.itl_last.floor, analyze_model("llama-3-70b", "dgx-h100", "decode", llama.batch, P + O,
                                                     split=TP8).time_s, 1e-6)
    assert close(llama.itl_at(64)[1].floor, analyze_model("llama-3-70b", "dgx-h100", "decode", 64, P + O,
                                                          split=TP8).time_s, 1e-6)
    # mean: over the contexts prompt + 1 ... prompt + output, each the graph path's decode step
    r = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=4, batch=16)
    steps = [analyze_model("llama-3-70b", "dgx-h100", "decode", 16, P + i, split=TP8).time_s for i in (1, 2, 3, 4)]
    assert close(r.itl_mean.floor, sum(steps) / 4, 1e-6)
    assert close(r.itl_last.floor, steps[-1], 1e-6)
    assert close(r.e2e.floor, r.ttft.floor + 3 * r.itl_mean.floor)


def test_throughput_is_batch_over_itl_and_cost_follows(llama: ServingReport) -> None:
    b = llama.batch
    assert b == llama.max_batch_slo
    assert llama.decode_throughput is not None and close(llama.decode_throughput.ceiling, b / llama.itl_mean.floor)
    assert close(llama.throughput.ceiling, workload(b, llama.itl_mean.floor, llama.ttft.floor))
    assert close(llama.throughput_per_device.ceiling, llama.throughput.ceiling / 8)
    tps = llama.throughput.ceiling
    assert llama.cost_output is not None and llama.cost_input is not None
    assert close(llama.cost_output.floor, 2.5 / 3600 * 8 / tps * 1e6)
    assert close(llama.cost_input.floor, 2.5 / 3600 * 8 * llama.ttft.floor / P * 1e6)
    for p in llama.curve:
        assert close(p.throughput.ceiling, workload(p.batch, p.itl.floor, llama.ttft.floor))


@pytest.mark.parametrize("split", [Split(tp=4, dp=2), Split(tp=4, pp=2)])
def test_replicas_and_pipeline_count_tokens_as_the_model_does(split: Split) -> None:
    # output 1: the only context is prompt + 1, so the throughput is ModelAnalysis.tokens_per_s there
    r = serve_model("llama-3-70b", "dgx-h100", split, prompt=1024, output=1, batch=64)
    a = analyze_model("llama-3-70b", "dgx-h100", "decode", 64, 1025, split=split)
    assert close(r.itl_mean.floor, a.time_s, 1e-6)
    assert r.decode_throughput is not None and close(r.decode_throughput.ceiling, a.tokens_per_s, 1e-6)
    # prefill counted: 1 / (1/decode + TTFT × share / (dp × output)); a pipeline's stages share the prompt
    share = 0.5 if split.pp > 1 else 1.0
    assert close(r.throughput.ceiling, 1 / (1 / a.tokens_per_s + r.ttft.floor * share / split.dp), 1e-6)
    assert r.pipeline_filled == (split.pp > 1)
    assert r.e2e == r.ttft


def test_overlap_matches_the_model(llama: ServingReport) -> None:
    r = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=8, batch=32, overlap=True)
    a = analyze_model("llama-3-70b", "dgx-h100", "decode", 32, P + 8, split=TP8, overlap=True)
    assert close(r.itl_last.floor, a.time_s, 1e-6)
    pre = analyze_model("llama-3-70b", "dgx-h100", "prefill", 1, P, split=TP8, overlap=True)
    assert close(r.ttft.floor, pre.time_s)
    assert r.itl_last.floor < llama.itl_at(32)[1].floor


# --- memory and the SLO ----------------------------------------------------------------------------

def test_largest_batch_that_fits_by_hand(llama: ServingReport) -> None:
    usable = 0.9 * 80 * GiB
    kv_token = 2 * 1 * 128 * 80 * 2  # one KV head per device under TP 8
    assert llama.kv_bytes_per_token == kv_token
    assert llama.kv_bytes_per_sequence == kv_token * (P + O) == 94_371_840
    weights = device_weights_bytes(llama.config, TP8, model_dtypes())
    assert llama.weights_bytes == weights
    expected = math.floor((usable - weights - llama.workspace_bytes) / (kv_token * (P + O)))
    assert llama.max_batch_memory == expected == 631
    assert weights + llama.workspace_bytes + expected * kv_token * (P + O) <= usable
    assert weights + llama.workspace_bytes + (expected + 1) * kv_token * (P + O) > usable
    assert [p.fits for p in llama.curve] == [p.batch <= 631 for p in llama.curve]


def test_largest_batch_meeting_the_itl_target(llama: ServingReport) -> None:
    n = llama.max_batch_slo
    assert n is not None and n <= (llama.max_batch_memory or 0)
    assert llama.itl_at(n)[0].floor <= 0.03 < llama.itl_at(n + 1)[0].floor
    assert llama.goodput is not None
    assert close(llama.goodput.ceiling, workload(n, llama.itl_at(n)[0].floor, llama.ttft.floor))
    assert llama.max_batch_slo_expected is not None
    lo, hi = llama.max_batch_slo_expected
    assert lo is not None and hi is not None and lo <= hi <= n
    assert llama.itl_at(lo)[0].high <= 0.03 < llama.itl_at(lo + 1)[0].high
    assert llama.itl_at(hi)[0].low <= 0.03 < llama.itl_at(hi + 1)[0].low


def test_knee_is_the_first_doubling_that_gains_under_ten_percent(llama: ServingReport) -> None:
    t = {p.batch: p.throughput.ceiling for p in llama.curve}
    assert [p.batch for p in llama.curve] == [2**k for k in range(11)]
    k = llama.knee_batch
    assert k is not None and t[2 * k] < 1.1 * t[k]
    assert all(t[2 * b] >= 1.1 * t[b] for b in t if b < k)


# --- expected bands --------------------------------------------------------------------------------

def test_bands_bracket_floor_low_high(llama: ServingReport) -> None:
    for b in (llama.ttft, llama.itl_mean, llama.itl_last, llama.e2e, *(p.itl for p in llama.curve)):
        assert b.floor <= b.low <= b.high
    for r in (llama.throughput, llama.throughput_per_device, *(p.throughput for p in llama.curve)):
        assert r.low <= r.high <= r.ceiling
    assert llama.cost_output is not None and llama.cost_output.floor <= llama.cost_output.low


def _flat_fit(path: Path, machine: str, e: float, t0_s: float) -> str:
    """An expected-time file (roofline calibrate's format) where every kind is t = floor / e + t0, the band
    t × [1, 1]: each kernel's expected time is then known by hand."""
    fit = {"efficiency": e, "t0_s": t0_s, "band": [1.0, 1.0], "tile": None, "per_tile_s": 0.0, "per_head_s": 0.0,
           "rows": 1}
    kinds = [f"{k}.{d}" for k in ("gemm", "context_attention", "generation_attention") for d in ("bf16", "fp8")]
    path.write_text(json.dumps({"format": "roofline-expected-times", "version": 1, "machine": machine,
                                "engine": "test", "engine_version": "0", "source": {"package": "test"},
                                "fits": dict.fromkeys(kinds, fit)}))
    return str(path)


def _half_roof(placements: Any, t0: float) -> float:
    """Σ runs × each kernel's expected time at half its roof plus t0, by the model's formula
    (roofline.expectation.model, a version-1 file: no wave, no other term): t = max(memory, compute) / 0.5
    + t0, memory = DRAM's time (a collective's: its link's, the floor), never below the floor."""
    from roofline.vocab import Level, Unit

    total = 0.0
    for p in placements:
        compute = max((t for u, t in p.unit_times_s.items() if u is not Unit.EXP), default=0.0)
        memory = p.time_s if p.bound in (Level.LINK, Level.NETWORK) else p.level_times_s[Level.DRAM]
        total += p.count * max(p.time_s, max(memory, compute) / 0.5 + t0)
    return total


def test_expected_is_each_kernels_calibrated_band_plus_overhead(tmp_path: Path) -> None:
    # every kernel at half its roof plus 1 µs a launch, and 100-200 µs a step of host overhead:
    # ITL last low = Σ runs × max(floor, max(DRAM or link, compute) / 0.5 + 1 µs) + 100 µs, the band × [1, 1]
    cal = _flat_fit(tmp_path / "half.json", "h100-sxm", 0.5, 1e-6)
    half = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=8, batch=8,
                       efficiency=Efficiency(calibration=cal, step_overhead_s=(1e-4, 2e-4)))
    last = half.decode_analysis().placements
    assert close(half.itl_last.low, _half_roof(last, 1e-6) + 1e-4)
    assert close(half.itl_last.high, _half_roof(last, 1e-6) + 2e-4)
    assert half.itl_last.low > 1.9 * half.itl_last.floor  # most of the step is at half its roof
    assert close(half.ttft.high, _half_roof(half.prefill.placements, 1e-6) + 2e-4)
    # at e = 1, no launch cost and no overhead the band is the floor
    ideal = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=8, batch=8,
                        efficiency=Efficiency(calibration=_flat_fit(tmp_path / "one.json", "h100-sxm", 1.0, 0.0),
                                              step_overhead_s=(0, 0)))
    for b in (ideal.ttft, ideal.itl_mean, ideal.itl_last):
        assert close(b.low, b.floor) and close(b.high, b.floor)


def test_the_shipped_band_is_models_band_plus_the_engines_overhead(llama: ServingReport) -> None:
    """serve's last ITL band is `roofline model`'s total band for the same step (calibration.choose.total,
    the shipped fit of h100-sxm) plus the engine's per-step host overhead: none for any of the three
    engines in decode (aiconfigurator-core 0.12.0's backends, calibrated on measured serving runs)."""
    from roofline.calibration.choose import choose, total

    last = llama.decode_analysis()
    chosen = choose(last.machine.id)
    t = total(last.placements, [chosen.band(p) for p in last.placements])
    assert llama.efficiency.overhead == (0.0, 0.0)
    assert close(llama.itl_last.low, t["low"]) and close(llama.itl_last.high, t["high"])
    assert llama.efficiency.source_file.startswith("expectation/data/h100-sxm.")


def test_vllm_prefill_pays_its_dispatch_per_layer() -> None:
    """vLLM's fixed CPU-side prefill dispatch, 0.8 ms a layer per request (aiconfigurator-core 0.12.0,
    sdk/backends/vllm_backend.py, calibrated on measured runs): Llama 3 70B's 80 layers add 64 ms to TTFT's
    band, not to its floor; TensorRT-LLM's backend adds none."""
    kw = {"prompt": P, "output": 8, "batch": 8}
    vllm = serve_model("llama-3-70b", "dgx-h100", TP8, efficiency=Efficiency("vllm"), **kw)
    trt = serve_model("llama-3-70b", "dgx-h100", TP8, efficiency=Efficiency("trtllm"), **kw)
    from roofline.calibration.choose import choose, total

    pre = vllm.prefill
    fit = total(pre.placements, [choose(pre.machine.id, "vllm").band(p) for p in pre.placements])
    assert close(vllm.ttft.low, fit["low"] + 80 * 0.8e-3) and close(vllm.ttft.high, fit["high"] + 80 * 0.8e-3)
    assert vllm.ttft.floor == trt.ttft.floor
    trt_fit = total(pre.placements, [choose(pre.machine.id, "trtllm").band(p) for p in pre.placements])
    assert close(trt.ttft.low, trt_fit["low"])


@pytest.mark.parametrize("kwargs", [{"communication": (0, 0.5)}, {"communication": (0.9, 0.8)},
                                    {"communication": (0.5, 1.2)}, {"step_overhead_s": (5e-5, 2e-5)},
                                    {"step_overhead_s": (-1e-6, 1e-6)}])
def test_efficiency_rejects_bad_bands(kwargs: dict[str, tuple[float, float]]) -> None:
    with pytest.raises(RooflineError):
        Efficiency(**kwargs)  # type: ignore[arg-type]


# --- the command -----------------------------------------------------------------------------------

BASE = ("serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output", "256")


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *BASE, "--itl-slo", "30ms", "--ttft-slo", "2s", "--price-per-device-hour", "2.5",
                       "--json")
    assert code == 0
    d = json.loads(out)
    band = {"floor", "expected"}
    assert set(d["ttft_s"]) == band and set(d["ttft_s"]["expected"]) == {"low", "high"}
    assert set(d["itl_s"]) == {"mean", "last"} and set(d["itl_s"]["mean"]) == band
    assert set(d["e2e_s"]) == band
    assert set(d["throughput_tokens_per_s"]) == {"system", "per_device", "decode_alone"}
    assert set(d["throughput_tokens_per_s"]["system"]) == {"ceiling", "expected"}
    assert d["max_batch_memory"] == 631 and d["max_batch_slo"] == d["batch"]
    assert set(d["cost_per_million_tokens"]["input"]) == band
    assert {"batch", "itl_s", "throughput_tokens_per_s", "fits"} <= set(d["curve"][0])
    assert set(d["curve"][0]["itl_s"]) == band
    assert d["parallel"]["tp"] == 8 and d["goodput_tokens_per_s"]["ceiling"] > 0
    # the knee on the workload's throughput: the first curve batch whose doubling gains < 10%
    tps = [p["throughput_tokens_per_s"]["ceiling"] for p in d["curve"]]
    knee = next(p["batch"] for p, q in zip(d["curve"], tps[1:], strict=False)
                if q < 1.1 * p["throughput_tokens_per_s"]["ceiling"])
    assert d["knee_batch"] == knee and d["slo"]["ttft_met"] is True
    assert {"efficiency", "formulas"} <= set(d["assumptions"])


def test_text_explain_and_csv(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    code, out, _ = run(capsys, *BASE, "--itl-slo", "30ms")
    assert code == 0
    assert "TTFT" in out and "knee" in out and "memory limit at 631" in out and "ITL SLO limit at" in out
    code, out, _ = run(capsys, *BASE, "--price-per-device-hour", "2.5", "--explain")
    assert code == 0
    assert "TTFT + (output − 1) × ITL mean" in out and "price / 3600 × devices" in out
    assert "each kernel's calibrated band" in out and "expectation/data/h100-sxm." in out
    path = f"{tmp_path}/curve.csv"
    code, _, _ = run(capsys, *BASE, "--csv", path, "--engine", "vllm", "--step-overhead", "10us:30us")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(open(path).read())))
    assert [int(r["batch"]) for r in rows] == [2**k for k in range(11)]


@pytest.mark.parametrize(("args", "says"), [
    (("--itl-slo", "1ms"), "no batch meets it; the closest is batch 1"),
    (("--ttft-slo", "1ms"), "no batch meets it; TTFT is per request"),
    (("--price-per-device-hour", "-2"), "--price-per-device-hour must be a positive number"),
    (("--price-per-device-hour", "0"), "--price-per-device-hour must be a positive number"),
    (("--efficiency-comm", "1.5"), "in (0, 1]"),
    (("--efficiency-comm", "0"), "in (0, 1]"),
    (("--efficiency-comm", "0.9:0.8"), "low 0.9 is above high 0.8"),
    (("--step-overhead", "50us:20us"), "above high"),
    (("--batch", "0"), "--batch"),
])
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], says: str) -> None:
    code, out, err = run(capsys, *BASE, *args)
    assert code == 2 and out == ""
    assert says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("prompt", "output", "says"), [
    ("8000", "500", "exceeds llama-3-70b's context of 8192"), ("0", "10", "--prompt"), ("10", "-1", "--output")])
def test_bad_lengths(capsys: pytest.CaptureFixture[str], prompt: str, output: str, says: str) -> None:
    code, _, err = run(capsys, "serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", prompt,
                       "--output", output)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_library_rejects_what_the_command_does() -> None:
    for kwargs in ({"price_per_device_hour": -1.0}, {"itl_slo_s": 0.0}, {"ttft_slo_s": -1.0}):
        with pytest.raises(RooflineError):
            serve_model("llama-3-8b", "h100", prompt=128, output=8, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(RooflineError, match="exceed the usable"):
        serve_model("llama-3-70b", "h100", prompt=128, output=8)  # 141 GB of weights on one 80 GiB device


# --- goodput and the ITL target: Llama 3 70B under TP 8 on a DGX H100, prompt 2048, output 256: the ITL
# target of 30 ms allows batch 462 at the floor, 346 with the band's high times and 399 with its low ---------

@pytest.fixture(scope="module")
def slo() -> ServingReport:
    return serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, itl_slo_s=0.03)


def test_goodput_band_is_taken_at_the_batches_the_band_allows(slo: ServingReport) -> None:
    g, n = slo.goodput, slo.max_batch_slo
    assert g is not None and n is not None and slo.max_batch_slo_expected is not None
    lo_b, hi_b = slo.max_batch_slo_expected
    assert lo_b is not None and hi_b is not None and lo_b < hi_b < n
    t = slo.ttft
    # ceiling: the workload's throughput at the floor, at the batch the floor allows
    assert close(g.ceiling, workload(n, slo.itl_at(n)[0].floor, t.floor))
    # low: with the band's high times, only batch lo_b meets 30 ms: its throughput at the high ends
    assert close(g.low, workload(lo_b, slo.itl_at(lo_b)[0].high, t.high))
    # high: with the band's low times, batch hi_b: its throughput at the low ends
    assert close(g.high, workload(hi_b, slo.itl_at(hi_b)[0].low, t.low))
    # each end meets the target at its own times (not the floor batch's band, which misses it)
    assert slo.itl_at(lo_b)[0].high <= 0.03 and slo.itl_at(hi_b)[0].low <= 0.03 < slo.itl_at(n)[0].low
    assert g.low <= g.high <= g.ceiling


def test_goodput_low_is_zero_when_ttft_misses_at_the_band_high_end(slo: ServingReport) -> None:
    # TTFT 57.9 ms at the floor (its 161 all-reduces of 2048 · 8192 · 2 B = 32 MiB run NVLS, S once over
    # NVLink, from dgx-h100's measured α of 2.4 µs) and a band above it (the shipped h100-sxm fit): a target in
    # the band's middle is met by the floor and the band's low end, not its high end
    t = slo.ttft
    target = (t.low + t.high) / 2
    assert close(t.floor, 0.05793, rel=1e-3) and t.floor < t.low < target < t.high
    r = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, itl_slo_s=0.03, ttft_slo_s=target)
    assert r.goodput is not None and slo.goodput is not None
    assert r.goodput.low == 0.0
    assert r.goodput.ceiling == slo.goodput.ceiling and r.goodput.high == slo.goodput.high


def test_goodput_without_an_itl_target_is_at_the_memory_batch() -> None:
    r = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, ttft_slo_s=1.0)
    m = r.max_batch_memory
    assert m == 631 and r.goodput is not None  # tests/test_serving.py: ⌊55.5 GiB / 90 MiB⌋
    mean, t = r.itl_at(m)[0], r.ttft
    assert close(r.goodput.ceiling, workload(m, mean.floor, t.floor))
    assert close(r.goodput.low, workload(m, mean.high, t.high)) and close(r.goodput.high, workload(m, mean.low, t.low))


def test_goodput_is_explained_and_printed(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output", "256",
            "--itl-slo", "30ms"]
    assert main(base) == 0
    out = capsys.readouterr().out
    # the band's batches come from the shipped fit (expectation/data/, refitted as tables change): read them
    lo, hi = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=2048, output=256, itl_slo_s=0.03).max_batch_slo_expected
    assert lo is not None and hi is not None and lo <= hi <= 536
    assert f"within the targets (expected: at batch {lo} with the band's high times, {hi} with its low)" in out
    assert main([*base, "--explain"]) == 0
    out = capsys.readouterr().out
    # the search's two batches with digits enough to tell them apart (both read "30 ms" at 3 digits)
    assert "batch 536: ITL mean 29.977 ms ≤ 30 ms" in out and "batch 537: ITL mean 30.032 ms > 30 ms" in out
    assert f"expected low: throughput at batch {lo}" in out and f"expected high: throughput at batch {hi}" in out


def test_a_given_batch_that_misses_the_itl_target_is_said(slo: ServingReport,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    r = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, itl_slo_s=0.03, batch=600)
    assert r.itl_mean.floor > 0.03  # 33.5 ms at batch 600
    assert any("batch 600 misses --itl-slo 30 ms" in w and "largest batch meeting it is 536" in w
               for w in r.warnings)
    ok = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, itl_slo_s=0.03, batch=256)
    assert not any("misses --itl-slo" in w for w in ok.warnings)
    assert main(["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output",
                 "256", "--itl-slo", "30ms", "--batch", "600"]) == 0
    assert "roofline: warning: batch 600 misses --itl-slo 30 ms" in capsys.readouterr().err


def test_max_batch_with_replicas_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    r = serve_model("llama-3-70b", "dgx-h100", Split(tp=4, dp=2), prompt=P, output=O)
    # TP 4: two KV heads a device, 2 · 2 · 128 · 80 · 2 B = 81,920 B a token; weights 70.55e9 · 2 B / 4
    kv_seq = 2 * 2 * 128 * 80 * 2 * (P + O)
    assert r.kv_bytes_per_sequence == kv_seq
    weights = 70_553_706_496 * 2 / 4
    assert close(r.weights_bytes, weights, 1e-3)
    per_replica = math.floor((0.9 * 80 * GiB - r.weights_bytes - r.workspace_bytes) / kv_seq)
    assert per_replica == 222 and r.max_batch_memory == 2 * 222
    assert main(["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "4", "--dp", "2", "--prompt", "2048",
                 "--output", "256"]) == 0
    out = capsys.readouterr().out
    assert "444  = ⌊(usable" in out and "⌋ = 222 per device" in out and "222 a replica × 2 replicas" in out


def test_pipelined_interval_is_stated_and_matches_the_throughput(capsys: pytest.CaptureFixture[str]) -> None:
    r = serve_model("llama-3-70b", "dgx-h100", Split(tp=4, pp=2), prompt=P, output=O, batch=64)
    assert r.pipeline_filled
    # 2 micro-batches of 32; 80 layers over 2 stages: ⌈80/2⌉/80 = 0.5 of a micro-batch's ITL a stage step
    every = 2 * 0.5 * r.itl_at(32)[0].floor
    # decode alone: batch / the interval a sequence sees; the workload adds each prompt's prefill, which the
    # two stages pipeline as they do the micro-batches (half the step a stage)
    assert r.decode_throughput is not None and close(r.decode_throughput.ceiling, 64 / every)
    assert close(r.throughput.ceiling, 1 / (every / 64 + r.ttft.floor * 0.5 / O))
    assert every < r.itl_mean.floor  # the whole batch through both stages in turn is slower
    assert main(["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "4", "--pp", "2", "--prompt", "2048",
                 "--output", "256", "--batch", "64"]) == 0
    assert f"a sequence's tokens come every {format_time(every)}" in capsys.readouterr().out


def test_json_values_follow_the_formulas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output", "256",
                 "--itl-slo", "30ms", "--price-per-device-hour", "2.5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    b, itl, ttft = d["batch"], d["itl_s"]["mean"], d["ttft_s"]
    assert b == d["max_batch_slo"] == 536
    # throughput = the workload's, prefill counted: B·O / (O·ITL + B·TTFT), per system and per device (8
    # devices); the band from the band's ends; decode alone = batch / ITL
    tps = d["throughput_tokens_per_s"]
    assert close(tps["decode_alone"]["ceiling"], b / itl["floor"])
    assert close(tps["system"]["ceiling"], workload(b, itl["floor"], ttft["floor"]))
    assert close(tps["system"]["expected"]["low"], workload(b, itl["expected"]["high"], ttft["expected"]["high"]))
    assert close(tps["system"]["expected"]["high"], workload(b, itl["expected"]["low"], ttft["expected"]["low"]))
    assert close(tps["per_device"]["ceiling"], tps["system"]["ceiling"] / 8)
    # e2e = TTFT + (output − 1) × ITL mean
    assert close(d["e2e_s"]["floor"], ttft["floor"] + 255 * itl["floor"])
    assert close(d["e2e_s"]["expected"]["high"], ttft["expected"]["high"] + 255 * itl["expected"]["high"])
    # cost = price / 3600 / tokens per second per device × 1e6 (the form)
    cost = d["cost_per_million_tokens"]
    assert close(cost["output"]["floor"], 2.5 / 3600 / tps["per_device"]["ceiling"] * 1e6)
    assert close(cost["output"]["expected"]["high"], 2.5 / 3600 / tps["per_device"]["expected"]["low"] * 1e6)
    # input: one prompt's prefill on the 8 devices, 2048 tokens: price / 3600 × 8 × TTFT / 2048 × 1e6
    assert close(cost["input"]["floor"], 2.5 / 3600 * 8 * ttft["floor"] / 2048 * 1e6)
    # the largest batch that fits: (usable − weights − workspace) / (KV bytes per token × (prompt + output))
    m = d["memory"]
    assert m["kv_bytes_per_token"] == 40_960 and m["usable_bytes"] == 0.9 * 80 * GiB
    assert d["max_batch_memory"] == math.floor((m["usable_bytes"] - m["weights_bytes"] - m["workspace_bytes"])
                                               / (m["kv_bytes_per_token"] * (2048 + 256))) == 631
    for p in d["curve"]:
        assert close(p["throughput_tokens_per_s"]["ceiling"], workload(p["batch"], p["itl_s"]["floor"], ttft["floor"]))
        assert p["fits"] is (p["batch"] <= 631)
        assert p["itl_s"]["floor"] <= p["itl_s"]["expected"]["low"] <= p["itl_s"]["expected"]["high"]


def test_calibration_band_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a bench calibration: memory-bound kernels measured at 0.5 of the roof, compute-bound at 0.8 (one value
    # each: low = high); band = floor / share of each kernel's class (as `roofline model --calibration`),
    # the overhead the constant 20-50 µs
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"format": FORMAT, "version": VERSION, "machine": "h100-sxm", "date": "2026-12-01",
                               "produced_by": "test", "classes": {"memory": 0.5, "compute": 0.8}}))
    args = ["serve", "llama-3-8b", "--machine", "h100", "--prompt", "512", "--output", "1", "--batch", "8"]
    assert main([*args, "--json", "--calibration", str(cal)]) == 0
    d = json.loads(capsys.readouterr().out)
    # output 1: the only decode context is 513; the step by bound class from the graph path
    a = analyze_model("llama-3-8b", "h100", "decode", 8, 513)
    by = {b: sum(p.total_time_s for p in a.placements if p.bound_class == b) for b in Bound}
    assert by[Bound.COMMUNICATION] == 0  # one device
    low = by[Bound.MEMORY] / 0.5 + by[Bound.COMPUTE] / 0.8 + 20e-6
    high = by[Bound.MEMORY] / 0.5 + by[Bound.COMPUTE] / 0.8 + 50e-6
    itl = d["itl_s"]["last"]
    assert close(itl["floor"], a.time_s, 1e-6)  # the floor stays the roofline
    assert close(itl["expected"]["low"], low, 1e-6) and close(itl["expected"]["high"], high, 1e-6)
    assert d["assumptions"]["efficiency"]["kernels"]["file"] == str(cal)
    # a file without a class a kernel needs (a CPU bench has no link): those kernels take the shipped fit, said
    only = tmp_path / "only.json"
    only.write_text(json.dumps({"format": FORMAT, "version": VERSION, "machine": "h100-sxm", "date": "2026-12-01",
                                "produced_by": "test", "classes": {"memory": 0.5}}))
    assert main([*args, "--calibration", str(only)]) == 0
    assert f"{only} has no compute class: those kernels take the shipped fit (expectation/data/h100-sxm." in \
        capsys.readouterr().err
    same = serve_model("llama-3-8b", "h100", prompt=512, output=1, batch=8, efficiency=Efficiency(calibration=str(cal)))
    assert close(same.itl_last.low, low, 1e-6)


def test_a_calibrated_band_names_its_file_and_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"format": FORMAT, "version": VERSION, "machine": "measured-cpu", "date": "2026-12-01",
                               "produced_by": "test", "classes": {"memory": 0.25, "compute": 0.5}}))
    args = ["serve", "llama-3-8b", "--machine", "h100", "--prompt", "512", "--output", "8", "--batch", "8",
            "--calibration", str(cal)]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert f"each kernel's band fitted on measured kernels, {cal}" in captured.out
    assert f"--calibration {cal} was measured on measured-cpu, not h100-sxm" in captured.err
    assert main([*args, "--explain"]) == 0
    out = capsys.readouterr().out
    assert f"calibration file: {cal}" in out
    assert main([*args[:-2], "--explain"]) == 0
    assert "calibration file: expectation/data/h100-sxm." in capsys.readouterr().out


def test_workload_throughput_by_hand_one_period() -> None:
    """Llama 3 8B on one H100, prompt 128, output 4, batch 2: one period of the steady state holds the 2
    new prompts' prefill steps and the 4 decode steps of the batch (contexts 129 ... 132), and makes
    2 × 4 = 8 output tokens (continuous batching with chunked prefill: the chunks ride the decode steps,
    their time added to the steps they share)."""
    prefill = analyze_model("llama-3-8b", "h100", "prefill", 1, 128).time_s
    decode = [analyze_model("llama-3-8b", "h100", "decode", 2, c).time_s for c in (129, 130, 131, 132)]
    period = 2 * prefill + sum(decode)
    r = serve_model("llama-3-8b", "h100", prompt=128, output=4, batch=2)
    assert close(r.throughput.ceiling, 8 / period, 1e-9)
    # decode alone (the old figure) leaves the 2 prefills out: 8 / Σ decode
    assert r.decode_throughput is not None and close(r.decode_throughput.ceiling, 8 / sum(decode), 1e-9)
    assert r.throughput.ceiling < r.decode_throughput.ceiling
