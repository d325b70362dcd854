"""`roofline train` and roofline.training: every expected value derived by hand, its source named.

Llama 3 70B (config.json of meta-llama/Meta-Llama-3-70B): h = 8192, L = 80, 64 query and 8 KV heads of
128, MLP 28672, vocabulary 128,256. The parameters a token multiplies, without the input embedding:
    attention  h·(H + 2G)·d + H·d·h = 8192·80·128 + 64·128·8192 = 150,994,944 a layer
    MLP        3·h·f = 3·8192·28672 = 704,643,072 a layer
    × 80 layers = 68,451,041,280, + the LM head 128,256·8192 = 1,050,673,152  →  N = 69,501,714,432
"""

from __future__ import annotations

import json

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.training import (
    Recompute,
    TrainSplit,
    Zero,
    analyze_training,
    describe_training,
    korthikanti_layer_bytes,
    model_flop_per_token,
    parse_tokens,
    zero_bytes_per_param,
)
from roofline.training.step import Pass

N_LLAMA_70B = 80 * (8192 * 80 * 128 + 64 * 128 * 8192 + 3 * 8192 * 28672) + 128_256 * 8192
GiB = 2**30


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- model FLOPs (PaLM's convention) -----------------------------------------------------------------

def test_llama_3_70b_model_flops_per_token_are_6n_plus_12lhs() -> None:
    # PaLM (Chowdhery et al. 2022), Appendix B: 6·N + 12·L·H·Q·T; at T = 8192:
    # 6 · 69,501,714,432 + 12 · 80 · 8192 · 8192 = 417,010,286,592 + 64,424,509,440 = 481,434,796,032
    cfg = describe_training("llama-3-70b", seq=8192, global_batch=1).config
    assert N_LLAMA_70B == 69_501_714_432
    assert model_flop_per_token(cfg, 8192) == 6 * N_LLAMA_70B + 12 * 80 * 8192 * 8192 == 481_434_796_032


def test_15t_tokens_of_llama_3_70b_are_6_3e24_flops() -> None:
    # jax-ml/scaling-book, applied-training.md: 6 · 70e9 FLOPs a token × 15e12 tokens = 6.3e24 FLOPs. Our N
    # (69.5e9, the embedding left out) gives 6.26e24 for the 6·N part; with the attention term at 8192
    # (12·L·h·s = 6.44e10 a token) the run is 481.4e9 · 15e12 = 7.22e24 model FLOPs.
    assert parse_tokens("15T") == 15e12
    six_n = 6 * N_LLAMA_70B * parse_tokens("15T")
    assert 6.2e24 < six_n < 6.35e24 and abs(six_n / 6.3e24 - 1) < 0.01
    s = describe_training("llama-3-70b", seq=8192, global_batch=512, split=TrainSplit(tp=8, pp=4, dp=16))
    run_ = analyze_training(s, "dgx-h100", tokens=15e12).training_run()
    assert run_ is not None and run_["model_flop"] == pytest.approx(481_434_796_032 * 15e12)


# --- memory --------------------------------------------------------------------------------------------

def test_zero_bytes_a_parameter_by_stage() -> None:
    # ZeRO (Rajbhandari et al. 2020), section 3.1 and Figure 1: mixed-precision Adam 2 + 2 + 12 = 16 bytes a
    # parameter; Ψ = 7.5 B on Nd = 64: 120 GB, Pos 31.4 GB, Pos+g 16.6 GB, Pos+g+p 1.9 GB
    def total(z: Zero) -> float:
        return sum(zero_bytes_per_param(z, 64).values())

    assert total(Zero.NONE) == 16.0
    assert total(Zero.OPTIMIZER) == 2 + 2 + 12 / 64
    assert total(Zero.GRADIENTS) == 2 + (2 + 12) / 64
    assert total(Zero.PARAMETERS) == 16 / 64
    psi = 7.5e9
    assert [round(psi * total(z) / 1e9, 1) for z in Zero] == [120.0, 31.4, 16.6, 1.9]


def test_korthikanti_activations_with_and_without_selective_recompute() -> None:
    # Korthikanti et al. 2022 (arXiv 2205.05198), section 4, GPT-3 175B's layer: s = 2048, b = 1, h = 12288,
    # a = 96, t = 8. 5·a·s/h = 5·96·2048/12288 = 80.
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    # no recompute, tensor + sequence parallel: s·b·h·(34 + 80)/8 = 358,612,992 bytes
    assert korthikanti_layer_bytes(s, b, h, a, t, Recompute.NONE, True) == sbh * (34 + 80) / 8 == 358_612_992
    # selective recompute: 34·s·b·h/t = 106,954,752 bytes
    assert korthikanti_layer_bytes(s, b, h, a, t, Recompute.SELECTIVE, True) == 34 * sbh / 8 == 106_954_752
    # tensor parallel alone: s·b·h·(10 + 24/t + 5·a·s/(h·t)) = s·b·h·(10 + 3 + 10) = 23·s·b·h
    assert korthikanti_layer_bytes(s, b, h, a, t, Recompute.NONE, False) == 23 * sbh
    # full recompute keeps the layer's input: 2·s·b·h/t
    assert korthikanti_layer_bytes(s, b, h, a, t, Recompute.FULL, True) == 2 * sbh / 8
    # FlashAttention holds no scores: "none" keeps what selective keeps
    assert korthikanti_layer_bytes(s, b, h, a, t, Recompute.NONE, True, scores_stored=False) == 34 * sbh / 8


def test_a_split_that_does_not_fit() -> None:
    # Llama 3 70B over one node, TP 8, no ZeRO: 16 bytes a parameter of 70.55e9 / 8 = 141.1e9 bytes of model
    # states a device, above 0.9 × 80 GiB = 77.3e9 usable
    s = describe_training("llama-3-70b", seq=8192, global_batch=8, split=TrainSplit(tp=8))
    a = analyze_training(s, "dgx-h100")
    m = a.memory
    states = m.weights_bytes + m.gradients_bytes + m.optimizer_bytes
    assert 16 * 70.55e9 / 8 * 0.99 < states < 16 * 70.55e9 / 8 * 1.01
    assert m.fits is False and m.per_device_bytes > 0.9 * 80 * GiB
    assert any("does not fit" in w for w in a.warnings)


# --- the pipeline ----------------------------------------------------------------------------------------

def test_the_bubble_is_p_minus_1_over_m_plus_p_minus_1() -> None:
    # Narayanan et al. 2021 (SC21), 1F1B: (p − 1)/(m + p − 1); p = 4, m = 512 / (16 · 1) = 32: 3/35
    s = describe_training("llama-3-70b", seq=8192, global_batch=512, split=TrainSplit(tp=8, pp=4, dp=16))
    a = analyze_training(s, "dgx-h100")
    assert s.micro_batches == 32 and a.bubble == 3 / 35
    st = a.floor  # the assembly: the bubble is (p − 1) micro-batch times of the (m + p − 1) the pipeline takes
    assert st.bubble_s == pytest.approx(3 * st.micro_batch_s)
    pipeline = st.step_s - st.optimizer_s - st.exposed_dp_s
    assert st.bubble_s / pipeline == pytest.approx(3 / 35)
    # the interleaved schedule with v = 2 chunks: (p − 1)/(v·m + p − 1) = 3/67
    s2 = describe_training("llama-3-70b", seq=8192, global_batch=512, split=TrainSplit(tp=8, pp=4, dp=16),
                           virtual_stages=2)
    assert analyze_training(s2, "dgx-h100").bubble == 3 / 67


def test_backward_is_two_matmuls_of_the_forwards_flops_and_flash_is_2_5x() -> None:
    # a forward matmul of 2·m·n·k: dX and dW of 2·m·n·k each (the backward's 2×); FlashAttention-2 (arXiv
    # 2307.08691, section 3.2): the backward's matmul FLOPs are 2.5 × the forward's
    s = describe_training("llama-3-8b", seq=4096, global_batch=8, split=TrainSplit(dp=8))
    a = analyze_training(s, "dgx-h100")
    by = {x.kernel.name: x for x in a.placed}
    fwd = by["gate_up_proj"].placement.flop
    # 2 · (b·s) · h · 2f = 2 · 4096 · 4096 · 28672 for Llama 3 8B (h 4096, f 14336)
    assert fwd == 2 * 4096 * 4096 * 2 * 14336
    assert by["gate_up_proj.dgrad"].placement.flop == fwd and by["gate_up_proj.wgrad"].placement.flop == fwd
    attn_fwd = by["attn"].placement.cost.flop_by_unit["matrix"]
    # causal pairs S(S+1)/2 = 8,390,656 per head; 2·B·H·pairs·(d + d) = 2·1·32·8,390,656·256
    assert attn_fwd == 2 * 32 * (4096 * 4097 // 2) * 256
    assert by["attn.backward"].placement.cost.flop_by_unit["matrix"] == 2.5 * attn_fwd
    assert by["attn.backward"].kernel.pass_ is Pass.BACKWARD


def test_full_recompute_adds_the_layers_forward_to_the_hardware_flops() -> None:
    # full recompute reruns each layer's forward: HFU counts it, MFU does not (PaLM, Appendix B)
    kw = {"seq": 4096, "global_batch": 8, "split": TrainSplit(dp=8)}
    none = analyze_training(describe_training("llama-3-8b", **kw), "dgx-h100")  # type: ignore[arg-type]
    full = analyze_training(describe_training("llama-3-8b", recompute="full", **kw), "dgx-h100")  # type: ignore[arg-type]
    layer_fwd = sum(x.placement.flop * x.kernel.kernel.count for x in none.placed
                    if x.kernel.pass_ is Pass.FORWARD and x.kernel.scope == "layer")
    assert full.hardware_flop_per_step - none.hardware_flop_per_step == pytest.approx(8 * layer_fwd)
    assert full.model_flop_per_token == none.model_flop_per_token
    assert full.memory.activations_bytes < none.memory.activations_bytes


# --- against a published run -----------------------------------------------------------------------------

def test_floor_mfu_is_above_llama_3_405b_measured_mfu() -> None:
    # Llama 3 paper (Dubey et al. 2024, arXiv 2407.21783), Table 4: 405B on 16,384 H100s, TP 8, CP 1, PP 16,
    # DP 128, sequence 8192, 16M tokens a batch (2048 sequences; 16 a data-parallel rank), BF16 MFU 41%
    # (43% on 8,192 GPUs). It runs the interleaved pipeline schedule (section 3.3.2); v = 4 chunks assumed.
    s = describe_training("llama-3.1-405b", seq=8192, global_batch=2048, split=TrainSplit(tp=8, pp=16, dp=128),
                          zero=1, virtual_stages=4)
    a = analyze_training(s, "dgx-h100")
    assert s.micro_batches == 16
    floor = a.mfu(a.floor.step_s)
    assert floor > 0.43  # a floor: no real step beats it
    assert a.mfu(a.high.step_s) <= floor and a.mfu(a.low.step_s) <= floor
    assert a.mfu(a.high.step_s) < 0.41 * 1.5  # the expected band is not far above the measured run


# --- the command line -----------------------------------------------------------------------------------

def test_train_json_has_the_issues_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "train", "llama-3-70b", "--machine", "dgx-h100", "--seq", "8192", "--global-batch",
                       "512", "--tp", "8", "--pp", "4", "--dp", "16", "--tokens", "15T", "--price-per-device-hour",
                       "2", "--json")
    assert code == 0
    d = json.loads(out)
    assert set(d["flop_per_token"]) == {"model", "hardware"}
    assert set(d["step_time_s"]) == {"floor", "expected"} and set(d["step_time_s"]["expected"]) == {"low", "high"}
    assert set(d["mfu"]) == {"floor", "expected"}
    assert {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "per_device_bytes",
            "fits"} <= set(d["memory"])
    assert d["pipeline_bubble"] == 3 / 35 and d["tokens_per_s"] > 0
    assert all({"kind", "bytes", "time_s", "overlapped"} <= set(c) for c in d["communication"])
    assert d["flop_per_token"]["model"] == 481_434_796_032
    # the run: 15e12 / tokens/s seconds, × 512 devices × $2 an hour
    t = d["training"]["time_s"]["floor"]
    assert t == pytest.approx(15e12 / d["tokens_per_s"])
    assert d["training"]["cost"]["floor"] == pytest.approx(t / 3600 * 512 * 2)


@pytest.mark.parametrize(("argv", "words"), [
    (["--tp", "3"], "does not divide"),  # 64 heads
    (["--pp", "81"], "more stages than"),  # 80 layers
    (["--dp", "3"], "not divisible by dp × micro-batch"),  # 8 sequences
    (["--zero", "1"], "ZeRO stage 1 shards over the data-parallel ranks"),  # dp 1
    (["--pp", "4", "--global-batch", "2"], "fewer than the 4 pipeline stages"),
    (["--cp", "3"], "does not divide the sequence"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    base = ["train", "llama-3-70b", "--machine", "dgx-h100", "--seq", "8192", "--global-batch", "8"]
    if "--global-batch" in argv:
        base = base[:-2]
    code, out, err = run(capsys, *base, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err, err


def test_train_text_explain_and_outputs(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    from pathlib import Path

    p = Path(str(tmp_path))
    code, out, err = run(capsys, "train", "llama-3-8b", "--machine", "dgx-h100", "--seq", "4096", "--global-batch",
                         "64", "--dp", "8", "--zero", "1", "--png", str(p / "t.png"), "--html", str(p / "t.html"),
                         "--csv", str(p / "t.csv"))
    assert code == 0, err
    assert "MFU" in out and "6·N + 12·L·h·s" in out
    assert (p / "t.png").read_bytes()[:4] == b"\x89PNG"
    page = (p / "t.html").read_text()  # the interactive page: its data, plotly inlined, the pages' CSP
    assert 'id="train-data"' in page and "Content-Security-Policy" in page and "dp.grads.reduce_scatter" in page
    assert (p / "t.csv").read_text().splitlines()[0].startswith("name,pass,scope")
    code, out, _ = run(capsys, "train", "llama-3-8b", "--machine", "dgx-h100", "--seq", "4096", "--global-batch",
                       "64", "--dp", "8", "--explain")
    assert code == 0 and "(p − 1)/(m + p − 1)" in out and "Korthikanti" in out


def test_every_architecture_trains() -> None:
    # dense, MoE with expert parallel, MLA, hybrid linear attention and Mamba2: each builds and places
    for model, split in (("deepseek-v3", TrainSplit(pp=8, dp=8, ep=8)), ("qwen3.5-397b-a17b", TrainSplit(tp=2, dp=4,
                         ep=8)), ("nemotron-3-nano", TrainSplit(tp=2, dp=4, ep=4)), ("gemma-2-9b", TrainSplit(cp=2))):
        s = describe_training(model, seq=4096, global_batch=64, split=split)
        a = analyze_training(s, "dgx-h100")
        assert 0 < a.mfu(a.floor.step_s) < 1 and a.floor.step_s <= a.low.step_s <= a.high.step_s


def test_describe_refuses_both_batches() -> None:
    with pytest.raises(RooflineError, match="give the batch once"):
        describe_training("llama-3-8b", seq=4096, global_batch=8, tokens_per_batch=8 * 4096)
    assert describe_training("llama-3-8b", seq=4096, tokens_per_batch=8 * 4096).global_batch == 8


# --- plan --train ------------------------------------------------------------------------------------------

def test_plan_train_counts_every_split_and_names_what_each_loser_pays(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.training.search import search_training

    # Llama 3 8B (32 heads, 8 KV heads, 32 layers) on one 8-GPU node, S 4096, B 16: tp·cp·pp·dp = 8 = 2³ with
    # every factor a power of two allowed (tp | 8 KV heads, cp | S, pp ≤ 32 layers, dp | 16, 16/dp ≥ pp): the
    # ways to split the exponent 3 over 4 factors, C(3 + 3, 3) = 20, less the 4 with dp·cp = 1 (tp·pp = 8:
    # 8·1, 4·2, 2·4, 1·8), which ZeRO 1 refuses (nothing to shard over): 16
    s = describe_training("llama-3-8b", seq=4096, global_batch=16, zero=1, check=False)
    found = search_training(s, "dgx-h100", devices=8)
    assert len(found.rows) == 16
    w = found.winner
    assert w is not None and w.rank == 1
    ranked = [r for r in found.rows if r.rank is not None]
    assert [r.expected_s for r in ranked] == sorted(r.expected_s for r in ranked)  # type: ignore[type-var]
    for r in ranked[1:]:
        assert "slower by" in r.reason and "bubble" in r.reason and "exposed communication" in r.reason
        assert "memory" in r.reason
    code, out, err = run(capsys, "plan", "--train", "llama-3-8b", "--machine", "dgx-h100", "--devices", "8",
                         "--seq", "4096", "--global-batch", "16", "--zero", "1", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["candidates"] == 16 and d["winner"]["split"] == str(w.split)
    # the inference plan is untouched by the branch
    code, out, _ = run(capsys, "plan", "llama-3-8b", "--machine", "dgx-h100", "--batch", "8", "--json")
    assert code == 0 and "rows" in json.loads(out)


def test_plan_train_says_when_nothing_fits(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama 3 405B on one node: 16 bytes a parameter / 8 devices = 812 GB a device at best
    code, out, err = run(capsys, "plan", "--train", "llama-3.1-405b", "--machine", "dgx-h100", "--devices", "8",
                         "--seq", "8192", "--global-batch", "8")
    assert code == 2 and out == "" and err.count("\n") == 1 and "fits" in err, err


def test_fp8_runs_the_linear_layers_at_the_fp8_peak_and_attention_at_bf16() -> None:
    # H100 SXM dense peaks: BF16 989.4 TFLOP/s, FP8 1978.9 (datasheet): a compute-bound GEMM takes half the time;
    # FlashAttention stays BF16 under Transformer Engine's FP8 recipe
    kw = {"seq": 4096, "global_batch": 64, "split": TrainSplit(dp=8)}
    bf = {x.kernel.name: x for x in analyze_training(describe_training("llama-3-8b", **kw), "dgx-h100").placed}  # type: ignore[arg-type]
    f8 = {x.kernel.name: x for x in analyze_training(describe_training("llama-3-8b", precision="fp8", **kw),  # type: ignore[arg-type]
                                                       "dgx-h100").placed}
    assert f8["gate_up_proj"].floor_s == pytest.approx(bf["gate_up_proj"].floor_s * 989.4 / 1978.9, rel=1e-3)
    assert f8["attn.backward"].floor_s == bf["attn.backward"].floor_s


def test_the_chart_colours_the_passes_and_its_bars_add_up_to_the_step() -> None:
    from roofline.report.charts.train import PASS_COLOUR, train_figure

    s = describe_training("llama-3-70b", seq=8192, global_batch=512, split=TrainSplit(tp=8, pp=4, dp=16),
                          recompute="full")
    a = analyze_training(s, "dgx-h100")
    fig = train_figure(a)
    gids = {artist.get_gid() for ax in fig.axes for artist in ax.get_children()}
    assert {f"pass-{p}" for p in ("forward", "backward", "recompute", "optimizer")} <= gids
    assert PASS_COLOUR[Pass.FORWARD] != PASS_COLOUR[Pass.BACKWARD]
    bars = [p for p in fig.axes[1].patches if str(p.get_gid()).startswith("bar-floor-")]
    assert len(bars) == 4  # compute, exposed communication, pipeline bubble, optimizer
    assert sum(b.get_width() for b in bars) == pytest.approx(a.floor.step_s)


def test_overlap_takes_the_larger_of_compute_and_communication() -> None:
    # --overlap: a micro-batch takes max(compute, its collectives) instead of their sum, and the data-parallel
    # reduction hides under one micro-batch's backward: max(0, reduction − backward) is what remains exposed
    kw = {"seq": 8192, "global_batch": 512, "split": TrainSplit(tp=8, pp=4, dp=16)}
    plain = analyze_training(describe_training("llama-3-70b", **kw), "dgx-h100")  # type: ignore[arg-type]
    over = analyze_training(describe_training("llama-3-70b", overlap=True, **kw), "dgx-h100")  # type: ignore[arg-type]
    compute = plain.floor.compute_s / 32
    comm = plain.floor.micro_batch_s - compute
    assert over.floor.micro_batch_s == pytest.approx(max(compute, comm))
    assert over.floor.step_s < plain.floor.step_s
    assert all(c["overlapped"] for c in over.communication())
