"""A review of the serving view (issue 10): goodput's expected band, a given batch that misses the ITL
target, the memory's batch with replicas, the calibration file's band by hand, the chunked-prefill
approximation where the numbers print, and servcalc's decode floor on Llama 3 70B.

Llama 3 70B under TP 8 on a DGX H100, prompt 2048, output 256: the ITL target of 30 ms allows batch 462
at the floor, 346 with the band's high times and 399 with its low (tests/test_serving.py derives them).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.measure.calibration import FORMAT, VERSION
from roofline.models import analyze_model, load_config
from roofline.parallel import Split
from roofline.serving import Efficiency, ServingReport, serve
from roofline.units import format_time
from roofline.vocab import Bound, Role

TP8 = Split(tp=8)
P, O = 2048, 256
GiB = 2**30


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel)


@pytest.fixture(scope="module")
def slo() -> ServingReport:
    return serve("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, itl_slo_s=0.03)


# --- goodput: each end of its band at the batch the band's times allow --------------------------------

def test_goodput_band_is_taken_at_the_batches_the_band_allows(slo: ServingReport) -> None:
    g, n = slo.goodput, slo.max_batch_slo
    assert g is not None and n is not None and slo.max_batch_slo_expected is not None
    lo_b, hi_b = slo.max_batch_slo_expected
    assert lo_b is not None and hi_b is not None and lo_b < hi_b < n
    # ceiling: batch / ITL mean at the floor, at the batch the floor allows
    assert close(g.ceiling, n / slo.itl_at(n)[0].floor)
    # low: with the band's high times, only batch lo_b meets 30 ms: lo_b / its ITL mean's high end
    assert close(g.low, lo_b / slo.itl_at(lo_b)[0].high)
    # high: with the band's low times, batch hi_b: hi_b / its ITL mean's low end
    assert close(g.high, hi_b / slo.itl_at(hi_b)[0].low)
    # each end meets the target at its own times (not the floor batch's band, which misses it)
    assert slo.itl_at(lo_b)[0].high <= 0.03 and slo.itl_at(hi_b)[0].low <= 0.03 < slo.itl_at(n)[0].low
    assert g.low <= g.high <= g.ceiling


def test_goodput_low_is_zero_when_ttft_misses_at_the_band_high_end(slo: ServingReport) -> None:
    # TTFT 69.0 ms at the floor, 81.7–92.7 ms expected: a 85 ms target is met by the floor and the band's
    # low end, not its high end
    t = slo.ttft
    target = 0.085
    assert t.floor < t.low < target < t.high
    r = serve("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, itl_slo_s=0.03, ttft_slo_s=target)
    assert r.goodput is not None and slo.goodput is not None
    assert r.goodput.low == 0.0
    assert r.goodput.ceiling == slo.goodput.ceiling and r.goodput.high == slo.goodput.high


def test_goodput_without_an_itl_target_is_at_the_memory_batch() -> None:
    r = serve("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, ttft_slo_s=1.0)
    m = r.max_batch_memory
    assert m == 631 and r.goodput is not None  # tests/test_serving.py: ⌊55.5 GiB / 90 MiB⌋
    mean = r.itl_at(m)[0]
    assert close(r.goodput.ceiling, m / mean.floor)
    assert close(r.goodput.low, m / mean.high) and close(r.goodput.high, m / mean.low)


def test_goodput_is_explained_and_printed(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output", "256",
            "--itl-slo", "30ms"]
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "within the targets (expected: at batch 346 with the band's high times, 399 with its low)" in out
    assert main([*base, "--explain"]) == 0
    out = capsys.readouterr().out
    # the search's two batches with digits enough to tell them apart (both read "30 ms" at 3 digits)
    assert "batch 462: ITL mean 29.964 ms ≤ 30 ms" in out and "batch 463: ITL mean 30.024 ms > 30 ms" in out
    assert "expected low: throughput at batch 346" in out and "expected high: throughput at batch 399" in out


# --- a given batch and the ITL target -----------------------------------------------------------------

def test_a_given_batch_that_misses_the_itl_target_is_said(slo: ServingReport,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    r = serve("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, itl_slo_s=0.03, batch=600)
    assert r.itl_mean.floor > 0.03  # 38.2 ms at batch 600
    assert any("batch 600 misses --itl-slo 30 ms" in w and "largest batch meeting it is 462" in w
               for w in r.warnings)
    ok = serve("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, itl_slo_s=0.03, batch=256)
    assert not any("misses --itl-slo" in w for w in ok.warnings)
    assert main(["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output",
                 "256", "--itl-slo", "30ms", "--batch", "600"]) == 0
    assert "roofline: warning: batch 600 misses --itl-slo 30 ms" in capsys.readouterr().err


# --- the memory's batch with replicas -----------------------------------------------------------------

def test_max_batch_with_replicas_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    r = serve("llama-3-70b", "dgx-h100", Split(tp=4, dp=2), prompt=P, output=O)
    # TP 4: two KV heads a device, 2 · 2 · 128 · 80 · 2 B = 81,920 B a token; weights 70.55e9 · 2 B / 4
    kv_seq = 2 * 2 * 128 * 80 * 2 * (P + O)
    assert r.kv_bytes_per_sequence == kv_seq
    weights = 70_553_706_496 * 2 / 4
    assert close(r.weights_bytes, weights, 1e-3)
    per_replica = math.floor((0.9 * 80 * GiB - r.weights_bytes - r.workspace_bytes) / kv_seq)
    assert per_replica == 222 and r.max_batch_memory == 2 * 222
    assert main(["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "4", "--dp", "2", "--prompt", "2048",
                 "--output", "256"]) == 0
    assert "444  (usable" in (out := capsys.readouterr().out) and "per replica, × 2 replicas" in out


# --- the calibration file's band, by hand ---------------------------------------------------------------

def test_calibration_band_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # memory-bound kernels measured at 0.5 of the roof (one value: low = high = 0.5); the compute class and
    # the overhead stay the defaults (0.7–0.8, 20–50 µs)
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"format": FORMAT, "version": VERSION, "machine": "h100-sxm", "date": "2026-12-01",
                               "produced_by": "test", "classes": {"memory": 0.5}}))
    args = ["serve", "llama-3-8b", "--machine", "h100", "--prompt", "512", "--output", "1", "--batch", "8"]
    assert main([*args, "--json", "--calibration", str(cal)]) == 0
    d = json.loads(capsys.readouterr().out)
    # output 1: the only decode context is 513; the step by bound class from the graph path
    a = analyze_model("llama-3-8b", "h100", "decode", 8, 513)
    by = {b: sum(p.total_time_s for p in a.placements if p.bound_class == b) for b in Bound}
    assert by[Bound.COMMUNICATION] == 0  # one device
    low = by[Bound.MEMORY] / 0.5 + by[Bound.COMPUTE] / 0.8 + 20e-6
    high = by[Bound.MEMORY] / 0.5 + by[Bound.COMPUTE] / 0.7 + 50e-6
    itl = d["itl_s"]["last"]
    assert close(itl["floor"], a.time_s, 1e-6)  # the floor stays the roofline
    assert close(itl["expected"]["low"], low, 1e-6) and close(itl["expected"]["high"], high, 1e-6)
    assert d["assumptions"]["efficiency"]["memory"] == [0.5, 0.5]
    assert d["assumptions"]["efficiency"]["calibration"] == {"file": str(cal), "classes": ["memory"]}
    # an explicit flag wins over the file: memory from the flag, compute from the file
    both = tmp_path / "both.json"
    both.write_text(json.dumps({"format": FORMAT, "version": VERSION, "machine": "h100-sxm", "date": "2026-12-01",
                                "produced_by": "test", "classes": {"memory": 0.5, "compute": 0.6}}))
    assert main([*args, "--json", "--calibration", str(both), "--efficiency-memory", "0.8:0.9"]) == 0
    d2 = json.loads(capsys.readouterr().out)
    assert d2["assumptions"]["efficiency"]["memory"] == [0.8, 0.9]
    assert d2["assumptions"]["efficiency"]["compute"] == [0.6, 0.6]
    # a file whose only class the flags override gives nothing to use: one line, exit 2
    assert main([*args, "--calibration", str(cal), "--efficiency-memory", "0.8:0.9"]) == 2
    assert "gives no range to use" in capsys.readouterr().err
    same = serve("llama-3-8b", "h100", prompt=512, output=1, batch=8, efficiency=Efficiency(memory=(0.5, 0.5)))
    assert close(same.itl_last.low, low, 1e-6)


# --- the chunked-prefill approximation is stated where the numbers print ---------------------------------

def test_chunked_approximation_is_stated_in_text_json_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["serve", "llama-3-8b", "--machine", "h100", "--prompt", "1024", "--output", "64", "--chunk", "256"]
    phrase = "two passes, each reading the weights"
    assert main(args) == 0
    assert phrase in capsys.readouterr().out
    assert main([*args, "--explain"]) == 0
    assert phrase in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    assert phrase in json.loads(capsys.readouterr().out)["chunked"]["approximation"]


# --- servcalc's decode floor on Llama 3 70B ----------------------------------------------------------------

def test_llama_3_70b_decode_floor_within_one_percent_of_servcalc() -> None:
    # servcalc's decode floor (tests/test_serving_servcalc.py): (weights streamed + every sequence's KV cache)
    # / bandwidth. Llama 3 70B on one H200 (4.8 TB/s, hardware/data/h200.toml), batch 16, context 2304
    cfg = load_config("llama-3-70b")
    table = 128_256 * 8192 * 2  # the embedding table, gathered not streamed
    streamed = 70_553_706_496 * 2 - table  # 139.0 GB of BF16 weights a step
    kv_token = 2 * 8 * 128 * 80 * 2  # K and V × 8 KV heads × 128 × 80 layers × BF16 = 327,680 B
    assert cfg.total_params == 70_553_706_496 and cfg.kv_cache_bytes_per_token(2) == kv_token
    a = analyze_model("llama-3-70b", "h200", "decode", 16, 2304)
    roles = a.bytes_by_role()
    assert roles[Role.WEIGHT] == pytest.approx(streamed, rel=1e-4)
    servcalc = (streamed + 16 * 2304 * kv_token) / 4.8e12  # 31.48 ms
    assert servcalc <= a.time_s <= 1.01 * servcalc  # ours 31.66 ms: + the activations servcalc leaves out


def test_a_calibrated_band_names_its_file_and_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"format": FORMAT, "version": VERSION, "machine": "measured-cpu", "date": "2026-12-01",
                               "produced_by": "test", "classes": {"memory": 0.25}}))
    args = ["serve", "llama-3-8b", "--machine", "h100", "--prompt", "512", "--output", "8", "--batch", "8",
            "--calibration", str(cal)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"memory from the calibration {cal} measured on measured-cpu" in out
    assert main([*args, "--explain"]) == 0
    out = capsys.readouterr().out
    assert f"sources: memory: the calibration {cal} (measured on measured-cpu, 2026-12-01" in out
    assert "the usual published figures" not in out
    assert main([*args[:-2], "--explain"]) == 0
    assert "sources: the usual published figures" in capsys.readouterr().out


# --- pipeline parallelism: the ITL printed and the interval the throughput counts ------------------------

def test_pipelined_interval_is_stated_and_matches_the_throughput(capsys: pytest.CaptureFixture[str]) -> None:
    r = serve("llama-3-70b", "dgx-h100", Split(tp=4, pp=2), prompt=P, output=O, batch=64)
    assert r.pipeline_filled
    # 2 micro-batches of 32; 80 layers over 2 stages: ⌈80/2⌉/80 = 0.5 of a micro-batch's ITL a stage step
    every = 2 * 0.5 * r.itl_at(32)[0].floor
    assert close(r.throughput.ceiling, 64 / every)  # throughput = batch / the interval a sequence sees
    assert every < r.itl_mean.floor  # the whole batch through both stages in turn is slower
    assert main(["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "4", "--pp", "2", "--prompt", "2048",
                 "--output", "256", "--batch", "64"]) == 0
    assert f"a sequence's tokens come every {format_time(every)}" in capsys.readouterr().out


# --- the draft: its split named in its error, its tokenizer checked ------------------------------------------

def test_a_draft_the_split_cannot_hold_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    # GPT-2's 12 query heads do not divide by the target's TP 8
    code = main(["serve", "llama-3-8b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "256", "--output", "32",
                 "--draft", "gpt2", "--acceptance", "0.8"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("roofline: error: --draft gpt2 runs beside the target on TP 8, and --tp 8 does not divide")


def test_a_draft_with_another_vocabulary_is_flagged() -> None:
    r = serve("llama-3-8b", "h100", prompt=256, output=32, draft="gpt2", acceptance=0.8)
    assert any("gpt2's vocabulary (50,257 tokens) is not llama-3-8b's (128,256)" in w for w in r.warnings)
    same = serve("llama-3-8b", "h100", prompt=256, output=32, draft="llama-3-8b", acceptance=0.8)
    assert not any("vocabulary" in w for w in same.warnings)


# --- the JSON contract, value by value, with the issue's own formulas ----------------------------------------

def test_json_values_follow_the_formulas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output", "256",
                 "--itl-slo", "30ms", "--price-per-device-hour", "2.5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    b, itl, ttft = d["batch"], d["itl_s"]["mean"], d["ttft_s"]
    assert b == d["max_batch_slo"] == 462
    # throughput = batch / ITL, per system and per device (8 devices); the band from the band's ends
    tps = d["throughput_tokens_per_s"]
    assert close(tps["system"]["ceiling"], b / itl["floor"])
    assert close(tps["system"]["expected"]["low"], b / itl["expected"]["high"])
    assert close(tps["system"]["expected"]["high"], b / itl["expected"]["low"])
    assert close(tps["per_device"]["ceiling"], b / itl["floor"] / 8)
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
        assert close(p["throughput_tokens_per_s"]["ceiling"], p["batch"] / p["itl_s"]["floor"])
        assert p["fits"] is (p["batch"] <= 631)
        assert p["itl_s"]["floor"] <= p["itl_s"]["expected"]["low"] <= p["itl_s"]["expected"]["high"]
