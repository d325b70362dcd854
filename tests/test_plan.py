"""`roofline plan` (every valid split searched and ranked), and sweeps and comparisons over splits.

Expected values are derived by hand below. Llama 3 70B: h = 8192, 80 layers, 64 query and 8 KV heads of
128, MLP 28672, vocabulary 128,256, 70.55 B parameters (141.1 GB in BF16, the embedding table and the
LM head 2.1 GB each); its KV cache at batch 64, 8k context: 64 · 8192 · 320 KiB = 171.8 GB. An H100 SXM:
3.35 TB/s, 80 GiB, of which 0.9 × 80 GiB = 77.3 GB (72 GiB) is usable.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import get_system
from roofline.models import (
    StepModel,
    analyze_model,
    compare,
    deployments,
    dtype_steps,
    load_config,
    model_dtypes,
    sweep,
)
from roofline.models.search import search_splits
from roofline.models.stepmodel import find_crossover
from roofline.models.sweep import SWEPT_RESOURCES
from roofline.parallel import Split, deploy

GB, GiB = 1e9, 2**30
LLAMA = ("llama-3-70b", "dgx-h100", "decode", 64, 8192)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- the search ------------------------------------------------------------------------------------

def test_four_devices_hold_no_split_of_llama_70b() -> None:
    s = search_splits(*LLAMA, devices=4)
    assert s.winner is None
    # TP 4: weights (141.1 GB − the replicated norms) / 4 ≈ 35.3 GB + KV 171.8 GB / 4 = 42.9 GB = 78.2 GB
    # (72.9 GiB) > 77.3 GB usable; every split of 4 devices holds a quarter of both, or more
    tp4 = s.row(Split(tp=4))
    assert tp4.weights_bytes + tp4.kv_cache_bytes == pytest.approx(78.2 * GB, rel=1e-3)
    assert tp4.usable_bytes == pytest.approx(0.9 * 80 * GiB)
    assert tp4.fits is False and not tp4.analysed  # cannot fit by weights + KV alone: never built
    assert tp4.reason == "does not fit: weights + KV cache 72.9 GiB > 72 GiB usable"
    assert all(r.fits is False for r in s.rows)
    # the fewest devices that hold it: PP 5, 16 layers a stage: (141.1 − 2 × 2.1) / 5 + 2.1 (the first or
    # last stage's table) = 29.5 GB of weights + 171.8 / 5 = 34.4 GB of KV = 63.9 GB < 77.3 GB
    assert "no valid split of up to 4 devices of dgx-h100 fits llama-3-70b" in s.problem
    assert "holds at most 99% of its share" in s.problem  # 77.3 / 78.2
    assert "PP 5 (5 devices; --devices 5" in s.problem


def test_eight_devices_time_winner_fits_and_tp4_says_why_it_loses() -> None:
    s = search_splits(*LLAMA, devices=8)
    w = s.winner
    assert w is not None and w.split == Split(tp=8) and w.fits and w.rank == 1
    # TP 8 streams (141.1 − 2.1 gathered table + 171.8) / 8 = 38.9 GB: 11.6 ms at 3.35 TB/s, plus 162
    # collectives (two all-reduces a layer, the embedding's, the logits' all-gather). Each all-reduce of
    # S = 64 · 8192 · 2 B = 1 MiB over 8 GPUs runs two-shot (vLLM's custom all-reduce above 256 KiB up to
    # 8 MiB): α 2.4 µs (the least start-up a measured h100_sxm collective leaves, parallel/data/collectives.json)
    # + 2 · 7/8 · 1 MiB / 450 GB/s = 4.08 µs, 6.48 µs each
    assert (141.1 - 2.1 + 171.8) / 8 * GB / 3.35e12 == pytest.approx(11.6e-3, rel=1e-2)
    assert 2.4e-6 + 2 * 7 / 8 * 2**20 / 450e9 == pytest.approx(6.48e-6, rel=1e-3)
    assert w.time_s is not None and 11.6e-3 + 161 * 6.48e-6 < w.time_s < 16.5e-3
    assert s.row(Split(tp=4)).reason.startswith("does not fit")
    # every fitting split: the fewest tokens per device ... they lose on time, and say by how much
    fitting = [r for r in s.rows if r.fits]
    assert [r.rank for r in fitting] == list(range(1, len(fitting) + 1))
    assert all(r.reason.startswith("slower by") for r in fitting[1:])
    times = [r.time_s for r in fitting]
    assert times == sorted(times)  # type: ignore[type-var]
    # the candidates, by hand: tp ∈ {1, 2, 4, 8} (divides the 8 KV heads), pp dividing 80, dp dividing 64,
    # tp × pp × dp ≤ 8: powers of two 2^a · 2^b · 2^c with a + b + c ≤ 3 are C(6, 3) = 20, and pp = 5 alone
    assert len(s.rows) == 20 + 1
    assert {r.split for r in s.rows} >= {Split(pp=5), Split(tp=2, pp=2, dp=2), Split(dp=8)}


def test_pruning_by_memory_changes_no_answer() -> None:
    s = search_splits(*LLAMA, devices=8, prune=False)
    assert all(r.analysed for r in s.rows)
    pruned = search_splits(*LLAMA, devices=8)  # the same answer without building what cannot fit
    assert [(r.split, r.rank, r.time_s) for r in pruned.rows if r.fits] == [
        (r.split, r.rank, r.time_s) for r in s.rows if r.fits]
    assert {r.split for r in pruned.rows if not r.fits} == {r.split for r in s.rows if not r.fits}


def test_the_objective_changes_the_winner() -> None:
    # throughput: a pipeline of p stages runs p micro-batches of 64/p sequences, so each stage re-reads
    # its weights for every micro-batch: tokens/s = (64/p) / (t(64/p) · (80/p)/80). Decode is bound by the
    # weight and cache reads, so splitting the batch buys nothing and TP 8 (64 / 13.1 ms / 8 devices =
    # 610 tokens/s a device) beats every pipeline
    s = search_splits(*LLAMA, devices=8, objective="throughput")
    w = s.winner
    assert w is not None and w.split == Split(tp=8)
    assert w.tokens_per_s_per_device == pytest.approx(64 / w.time_s / 8, rel=1e-12)  # type: ignore[operator]
    assert s.row(Split(pp=8)).reason.startswith("fewer expected tokens/s per device")
    pp8 = s.row(Split(pp=8))
    micro = analyze_model("llama-3-70b", "dgx-h100", "decode", 8, 8192, split=Split(pp=8))  # one micro-batch
    assert pp8.tokens_per_s == pytest.approx(8 / (micro.time_s * 10 / 80))  # 10 of the 80 layers a stage
    # latency: within 30 ms, TP 8 (13.1 ms), TP 4 × DP 2 (17.7 ms) and TP 4 × PP 2 (24.7 ms) qualify;
    # TP 8 makes the most per device; PP 5 (94 ms a step) is over the target
    s30 = search_splits(*LLAMA, devices=8, objective="latency", latency_target_s=30e-3)
    assert s30.winner is not None and s30.winner.split == Split(tp=8)
    assert s30.row(Split(tp=4, pp=2)).reason.startswith("fewer expected tokens/s per device")
    assert s30.row(Split(pp=5)).reason.startswith("over the latency target: 93.8 ms > 30 ms")
    assert s30.row(Split(pp=5)).rank is None
    # within 20 ms only TP 8 (13.1 ms) and TP 4 × DP 2 (17.7 ms) qualify, and TP 8 makes more per device
    s20 = search_splits(*LLAMA, devices=8, objective="latency", latency_target_s=20e-3)
    assert s20.winner is not None and s20.winner.split == Split(tp=8)
    assert [r.split for r in s20.rows if r.rank] == [Split(tp=8), Split(tp=4, dp=2)]
    # a target no split meets
    s5 = search_splits(*LLAMA, devices=8, objective="latency", latency_target_s=5e-3)
    assert s5.winner is None and "the fastest, TP 8, takes 13.1 ms a step" in s5.problem


def test_deepseek_v3_on_one_nvl72_every_split() -> None:
    # candidates by hand: tp = 2^a divides the 128 heads, dp = 2^b the batch of 256, tp·dp ≤ 72 so
    # a + b ≤ 6; ep is 1 or any 2^c dividing tp·dp (c = 1..a+b), and with tp > 1 a replica's 256/dp
    # tokens are a multiple of tp (a + b ≤ 8: always). pp 1: Σ_{s=0..6} (s + 1)·(1 + s) = 140;
    # pp 61 (61 layers, prime): tp = dp = 1, one. 141 in all.
    # its speed (≤ 1 s) is bench/bench_parallel.py's to check, side by side, not a timed test's
    s = search_splits("deepseek-v3", "gb200-nvl72", "decode", 256, 8192)
    assert len(s.rows) == 141 and s.devices == 72
    assert s.winner is not None and s.winner.split.ep > 1  # expert parallel: each device reads E/ep experts
    for r in (s.winner, s.row(Split(tp=8))):
        a = analyze_model("deepseek-v3", "gb200-nvl72", "decode", 256, 8192, split=r.split)
        assert r.fits == a.memory.fits and (r.time_s is None or r.time_s == a.time_s)


def test_bad_search_input_is_a_clear_error() -> None:
    with pytest.raises(RooflineError, match="needs a latency target"):
        search_splits(*LLAMA, objective="latency")
    with pytest.raises(RooflineError, match="applies to the latency objective"):
        search_splits(*LLAMA, objective="throughput", latency_target_s=0.05)
    with pytest.raises(RooflineError, match="unknown objective"):
        search_splits(*LLAMA, objective="cost")
    with pytest.raises(RooflineError, match="more than dgx-h100 has"):
        search_splits(*LLAMA, devices=100_000)


# --- the command -----------------------------------------------------------------------------------

def test_plan_command_table_json_and_csv(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "plan", "llama-3-70b", "--machine", "dgx-h100", "--batch", "64", "--context", "8192")
    assert code == 0, err
    assert "21 valid splits of up to 8 devices; objective time" in out
    tp4 = next(line for line in out.splitlines() if line.count("│") > 3 and line.split("│")[2].strip() == "TP 4")
    assert "does not fit: weights + KV cache 72.9 GiB > 72 GiB usable" in tp4 and "≥ 72.9 GiB" in tp4
    assert "best: TP 8 (--tp 8)" in out
    assert "roofline model llama-3-70b --machine dgx-h100 --tp 8 --phase decode --batch 64 --context 8192" in out
    target = tmp_path / "plan.csv"
    code, out, err = run(capsys, "plan", "llama-3-70b", "--machine", "dgx-h100", "--batch", "64", "--context", "8192",
                         "--latency-target", "30ms", "--json", "--csv", str(target))
    assert code == 0, err
    d = json.loads(out)
    assert d["objective"] == "latency" and d["latency_target_s"] == pytest.approx(0.03)
    assert d["winner"]["split"] == "TP 8" and d["winner"]["devices"] == 8  # the most tokens/s per device within 30 ms
    assert {"tp", "pp", "ep", "dp", "devices", "fits", "memory_bytes_per_device", "time_s", "tokens_per_s",
            "tokens_per_s_per_device", "communication_share", "bound", "reason"} <= set(d["rows"][0])
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert len(rows) == 21 and rows[0]["split"] == "TP 8" and rows[0]["rank"] == "1"


@pytest.mark.parametrize("argv,words", [
    (["--machine", "no-such-system"], "unknown system 'no-such-system'"),
    (["--machine", "dgx-h100", "--devices", "4", "--batch", "64", "--context", "8192"],
     "no valid split of up to 4 devices of dgx-h100 fits"),
    (["--machine", "dgx-h100", "--batch", "64", "--context", "8192", "--latency-target", "800us"],
     "meets the latency target 800 µs"),
    (["--latency-target", "50 parsecs"], "--latency-target"),
    (["--objective", "latency"], "needs a latency target"),
    (["--memory-utilization", "0"], "--memory-utilization must be in (0, 1]"),
    (["--phase", "prefill", "--context", "8192"], "prefill takes --prompt"),
])
def test_plan_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    code, out, err = run(capsys, "plan", "llama-3-70b", *argv)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1, err


def test_latency_target_units() -> None:
    from roofline.units import parse_quantity

    assert [parse_quantity(t, "time_s") for t in ("2s", "50ms", "800us")] == pytest.approx([2.0, 0.05, 8e-4])


# --- sweeps and comparisons over splits ------------------------------------------------------------

SPLIT_CASES = [
    ("llama-3-70b", "dgx-h100", "decode", Split(tp=8, pp=2)),  # 16 devices: the stage boundary on the network
    ("llama-3-70b", "dgx-h100", "prefill", Split(tp=4, dp=2)),
    ("deepseek-v3", "gb200-nvl72", "decode", Split(ep=8, dp=8)),
    ("deepseek-v3", "dgx-h100", "decode", Split(ep=16, dp=16)),  # the all-to-all spans two nodes
    ("mixtral-8x7b", "h100", "decode", Split(ep=2, dp=4)),  # experts read per device: ⌈hit / 2⌉
    ("gemma-2-9b", "h100", "prefill", Split(tp=4, pp=3)),  # sliding windows; 42 layers in 3 stages
    ("qwen3-30b-a3b", "mi300x-platform", "decode", Split(tp=4)),  # a fully connected node: 3 of 7 peer links
]


@pytest.mark.parametrize("name,system,phase,split", SPLIT_CASES)
def test_sweep_path_agrees_with_the_graph_path_per_split(name: str, system: str, phase: str, split: Split) -> None:
    cfg = load_config(name)
    d = deploy(system, split)  # the device with the system's links (its measured α), NVLS where it has it
    m = d.machine
    fitted = StepModel.fit(cfg, phase, model_dtypes(), "flash", None, split, d.devices_per_node, d.nvls)
    for b, s in ((16, 1), (32, 700), (64, 4096), (256, 8192)):
        a = analyze_model(cfg, system, phase, b, s, split=split)
        r = fitted.evaluate([b], [s], m, a.dtype)
        assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)
        assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)
        assert float(r["time_s"][0]) == pytest.approx(a.time_s, rel=1e-9)
        assert float(r["memory_bound_time_s"][0]) == pytest.approx(a.analysis.memory_bound_time_s, rel=1e-9)
        assert SWEPT_RESOURCES[int(r["bound"][0])] == a.bound
        assert [SWEPT_RESOURCES[int(c)] for c in r["kernel_bound"][0]] == [p.bound for p in a.placements]


def test_sweep_rows_per_split_agree_with_analyze_model() -> None:
    splits = [Split(), Split(tp=4), Split(tp=4, pp=2), Split(tp=2, dp=2)]
    rows = sweep(dtype_steps("llama-3-70b", "decode"), deployments(["dgx-h100"], splits), [8, 64], [8192])
    assert len(rows) == 4 * 2
    for r in rows:
        sp = Split(tp=r["tp"], pp=r["pp"], ep=r["ep"], dp=r["dp"])
        assert r["split_devices"] == sp.devices
        a = analyze_model("llama-3-70b", "dgx-h100", "decode", r["batch"], 8192, split=sp)
        assert r["time_s"] == pytest.approx(a.time_s, rel=1e-9)
        assert r["tokens_per_s"] == pytest.approx(a.tokens_per_s, rel=1e-9)  # PP 2: two batches in flight
        assert r["flop_per_byte"] == pytest.approx(a.flop_per_byte, rel=1e-9)
        assert r["bound"] == a.bound
        # still the fewest devices of a valid split that holds the model: at batch 8, TP 4 holds 35.3 GB
        # of weights + 21.5 GB / 4 of KV; at 64, TP 8 (TP 4 would hold 78.2 GB)
        assert r["devices"] == (4 if r["batch"] == 8 else 8)
    with pytest.raises(RooflineError, match="batch 9 is not a multiple of dp 2"):
        sweep(dtype_steps("llama-3-70b", "decode"), deployments(["h100"], [Split(dp=2)]), [8, 9], [8192])


def test_crossover_with_data_parallel_is_a_multiple_of_dp() -> None:
    # one replica of Llama 3 8B prefill at TP 1: the crossover batch of 2 replicas is twice one's
    cfg = load_config("llama-3-8b")
    one = StepModel.fit(cfg, "prefill", model_dtypes())
    two = StepModel.fit(cfg, "prefill", model_dtypes(), split=Split(dp=2), devices_per_node=8)
    m = get_system("h100", devices=8).device_machine(1)
    c1, c2 = (find_crossover(f, 64, m, one.dtypes.activations) for f in (one, two))
    assert c1.batch is not None and c2.batch == 2 * c1.batch


def test_compare_rows_per_split_agree_with_analyze_model() -> None:
    rows = compare(["llama-3-70b"], ["dgx-h100"], "decode", 64, 8192, splits=[Split(tp=4), Split(tp=8)])
    by = {r["tp"]: r for r in rows}
    assert by[4]["fits"] is False and by[8]["fits"] is True  # 78.2 GB > 77.3 GB usable; 39.1 GB fits
    for tp, r in by.items():
        a = analyze_model("llama-3-70b", "dgx-h100", "decode", 64, 8192, split=Split(tp=tp))
        assert (r["time_s"], r["tokens_per_s"], r["memory_bytes"], r["split_devices"]) == (
            a.time_s, a.tokens_per_s, a.memory.total_bytes, tp)


def test_sweep_and_compare_commands_take_split_lists(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "sweep", "llama-3-70b", "--machine", "dgx-h100", "--tp", "1,2,4,8", "--batch", "64",
                         "--context", "8192", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["tp"] for r in rows] == [r["split_devices"] for r in rows] == ["1", "2", "4", "8"]
    assert {"tp", "pp", "ep", "dp", "split_devices", "devices"} <= set(rows[0])
    code, out, err = run(capsys, "sweep", "llama-3-70b", "--machine", "dgx-h100", "--tp", "4,8", "--batch", "8,64",
                         "--context", "8192")
    assert code == 0 and "sweep over splits" in out and "TP" in out
    code, out, err = run(capsys, "compare", "llama-3-70b", "--machine", "dgx-h100", "--tp", "4,8", "--batch", "64",
                         "--context", "8192", "--format", "json")
    assert code == 0
    assert [(r["tp"], r["fits"]) for r in json.loads(out)] == [(4, False), (8, True)]
    for argv, words in ((["sweep", "llama-3-70b", "--dp", "2", "--batch", "3"], "--batch 3 is not a multiple of --dp"),
                        (["sweep", "llama-3-70b", "--tp", "3"], "does not divide"),
                        (["compare", "llama-3-70b", "--ep", "2", "--dp", "2"], "not a mixture of experts")):
        code, out, err = run(capsys, *argv)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
