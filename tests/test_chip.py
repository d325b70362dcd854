"""Inside the chip (issue 12): per-SM rates with sources, exponentials and on-chip bytes per op, and
placement over every unit and level. Each ratio is derived by hand from per-SM rates:

    peak = rate per clock per SM × SMs × clock
    exp time / matrix time (attention) = (1 / exp per clk per SM) / (4·d / matrix FLOP per clk per SM)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import get_machine
from roofline.hardware.catalog import catalog, load_machine_file
from roofline.kernels import (
    CONDITIONAL_RESCALE,
    EXP_EMULATION_VECTOR_FLOP,
    attention_graph,
    attention_plans,
    matmul_graph,
)
from roofline.models import StepModel, analyze_model, load_config, model_dtypes
from roofline.models.sweep import SWEPT_RESOURCES
from roofline.placement import place
from roofline.vocab import Level, Plan, Unit

N = 8192
RESCALE = 1 + 1 / 128  # one exponential per score, and one per query row per 128-key tile (online softmax)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _attention(machine: str, d: int = 128, **kw: float) -> dict:
    g = attention_graph(N, d, **kw)  # type: ignore[arg-type]
    (k,) = g.kernels(attention_plans("attention")[Plan.FLASH])
    return place(k, machine, "bf16").to_dict()


def _ratio(d: dict) -> float:
    return d["units"]["exp"]["time_s"] / d["units"]["matrix"]["time_s"]


@pytest.mark.parametrize("name", ["a100", "h100", "h100-pcie", "h200", "b200", "gb200", "b300", "mi300x", "mi355x"])
def test_per_sm_rates_times_sms_times_clock_are_the_datasheet_peaks(name: str) -> None:
    m = get_machine(name)
    chip = m.chip
    assert chip is not None and chip.sources.get("sms") and chip.sources.get("clock_mhz")
    for key, per in chip.matrix_flop_per_clk.items():
        assert per * chip.sms * chip.clock_hz == pytest.approx(m.matrix_flop_per_s[key], rel=0.01)
    # FP32 lanes × 2 FLOPs per FMA × SMs × the clock the vector peak implies
    assert chip.vector_flop_per_s == pytest.approx(m.vector_flop_per_s["fp32"], rel=0.01)


def test_the_h100_and_b200_figures_the_issue_quotes() -> None:
    h100, b200, b300 = (get_machine(n).chip for n in ("h100", "b200", "b300"))
    assert h100 is not None and b200 is not None and b300 is not None
    # 989.4 TFLOP/s / (132 SMs × 1.83 GHz) = 4096 FLOP/clk/SM; B200 twice that per SM
    assert 989.4e12 / (132 * 1.83e9) == pytest.approx(h100.matrix_flop_per_clk["bf16"], rel=0.001)
    assert b200.matrix_flop_per_clk["bf16"] == 2 * h100.matrix_flop_per_clk["bf16"] == 8192
    # exponentials and shared memory per SM did not change from H100 to B200; Blackwell Ultra doubles the exp rate
    assert h100.exp_per_clk == b200.exp_per_clk == 16 and b300.exp_per_clk == 32
    assert h100.smem_bytes_per_clk == b200.smem_bytes_per_clk == 128
    # 16 exp/clk/SM × 132 × 1.83 GHz = 3.865e12 exponentials per second
    assert h100.exp_per_s == pytest.approx(16 * 132 * 1.83e9)


def test_headline_attention_on_h100_is_matrix_bound_with_exp_at_half(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "kernel", "attention", "--seq", "8192", "--head-dim", "128", "--fusion", "flash",
                        "--machine", "h100", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["bound"] == "matrix"
    # (1/16) / (4·128/4096) = 0.5, times the online softmax's extra exp per 128 keys
    assert _ratio(d) == pytest.approx(0.5 * RESCALE, rel=1e-4)
    assert d["units"]["exp"]["flop_or_ops"] == N * N * RESCALE  # one per score + one per row per key tile
    # shared memory: Q tile per key tile, K and V tiles per query tile, 2 bytes each:
    # 2·N²·(128·(1/128 + 1/128) + 128/128) = 6·N² bytes
    assert d["levels"]["smem"]["bytes"] == 6 * N * N
    # the matrix time is the datasheet's: 4·N²·d / 989.4e12, unchanged by the new units
    assert d["units"]["matrix"]["time_s"] == pytest.approx(4 * N * N * 128 / 989.4e12)
    assert d["time_s"] == d["units"]["matrix"]["time_s"]
    assert d["flop_per_byte"] == 4136.0  # the intensity ignores the exponential ops: FLOPs / DRAM bytes
    assert d["margin"] == pytest.approx(1 / (0.5 * RESCALE), rel=1e-4)  # matrix over exp, the runner-up


def test_on_b200_exp_and_matrix_are_a_co_bottleneck_and_exp_binds() -> None:
    d = _attention("b200")
    # (1/16) / (4·128/8192) = 1.0: the exponentials take as long as the matmuls; the rescale exps tip it
    assert _ratio(d) == pytest.approx(1.0 * RESCALE, rel=1e-4)
    assert d["bound"] == "exp" and d["bound_class"] == "compute"
    assert 1.0 < d["margin"] < 1.1
    # shared memory: 6·N² bytes / (128 B/clk × 148 × 1.8558 GHz) against 4·N²·128 / 8192 FLOP/clk: 0.75
    assert d["levels"]["smem"]["time_s"] / d["units"]["matrix"]["time_s"] == pytest.approx(0.75, rel=1e-3)


def test_head_dim_64_doubles_both_ratios_and_b300_halves_the_exp_ratio() -> None:
    h100, b200 = _attention("h100", 64), _attention("b200", 64)
    assert _ratio(h100) == pytest.approx(1.0 * RESCALE, rel=1e-4) and h100["bound"] == "exp"
    assert _ratio(b200) == pytest.approx(2.0 * RESCALE, rel=1e-4) and b200["bound"] == "exp"
    b300 = _attention("b300")
    # (1/32) / (4·128/8192) = 0.5: Blackwell Ultra's doubled SFU rate puts the matrix units back in charge
    assert _ratio(b300) == pytest.approx(0.5 * RESCALE, rel=1e-4) and b300["bound"] == "matrix"


def test_fa4_remedies_move_exponentials_to_the_fma_lanes_and_skip_rescales() -> None:
    base = _attention("b200")
    emulated = _attention("b200", exp_emulated=0.25)
    pairs = N * N
    # a quarter of the per-score exponentials move to the FMA lanes at 10 FLOPs of vector time each
    assert emulated["units"]["exp"]["flop_or_ops"] == pytest.approx(pairs * (0.75 + 1 / 128))
    added = emulated["units"]["vector"]["flop_or_ops"] - base["units"]["vector"]["flop_or_ops"]
    assert added == pytest.approx(0.25 * pairs * EXP_EMULATION_VECTOR_FLOP)
    assert emulated["bound"] == "matrix"
    assert emulated["flop"] == base["flop"]  # the algorithm's FLOPs do not change, only where they run
    conditional = _attention("b200", rescale=CONDITIONAL_RESCALE)
    # 10% of the key tiles rescale: pairs·(1 + 0.1/128) exponentials, pairs·128/128·0.1 vector FLOPs of rescaling
    assert conditional["units"]["exp"]["flop_or_ops"] == pytest.approx(pairs * (1 + 0.1 / 128))
    assert base["units"]["vector"]["flop_or_ops"] - conditional["units"]["vector"]["flop_or_ops"] == \
        pytest.approx(0.9 * pairs)


def test_matmul_tiles_give_the_reuse_arithmetic_and_a_tile_too_big_is_one_error() -> None:
    g = matmul_graph(4096, 4096, 4096, tile=(128, 256, 64))
    (k,) = g.kernels()
    # smem bytes = bytes·M·N·K·(1/tile_n + 1/tile_m) = 2·4096³·(1/256 + 1/128)
    assert k.cost.bytes_by_level[Level.SMEM] == pytest.approx(2 * 4096**3 * (1 / 256 + 1 / 128))
    p = place(k, "h100", "bf16")
    assert p.bound is Unit.MATRIX and p.time_s == pytest.approx(2 * 4096**3 / 989.4e12)
    big = matmul_graph(4096, 4096, 4096, tile=(512, 512, 128)).kernels()[0]
    # 2 stages × (512 + 512) × 128 × 2 bytes = 512 KiB > 228 KiB per SM
    with pytest.raises(RooflineError, match=r"512 KiB of shared memory.*228 KiB per SM; choose smaller tiles"):
        place(big, "h100", "bf16")


def test_a_decode_gemv_reuses_nothing_and_stays_dram_bound() -> None:
    (k,) = matmul_graph(1, 8192, 8192).kernels()
    # tile_m clamps to M = 1: the weights pass through shared memory once, 2·8192²·(1/256 + 1)
    assert k.cost.bytes_by_level[Level.SMEM] == pytest.approx(2 * 8192 * 8192 * (1 / 256 + 1))
    assert place(k, "b200", "bf16").bound is Level.DRAM


def test_machines_without_chip_data_fall_back_to_dram_with_a_note(tmp_path: Path) -> None:
    tpu = _attention("tpu-v5p")
    assert set(tpu["levels"]) == {"dram"} and "exp" not in tpu["units"]
    assert "no per-SM data" in tpu["chip_notes"][0]
    text = (Path(__file__).parents[1] / "src/roofline/hardware/data/h100-sxm.toml").read_text()
    user = tmp_path / "mine.toml"
    user.write_text(text[: text.index("[chip]")].replace('id = "h100-sxm"', 'id = "mine"'))
    mine = _attention(str(user))
    h100 = _attention("h100")
    # DRAM and matrix terms are the H100's; only what needs per-SM data is left out
    assert mine["units"]["matrix"] == h100["units"]["matrix"] and mine["levels"]["dram"] == h100["levels"]["dram"]
    assert mine["bound"] == "matrix" and "smem" not in mine["levels"]


def test_amd_has_no_published_exp_rate_and_says_so() -> None:
    d = _attention("mi300x")
    assert "exp" not in d["units"] and any("no exponential rate" in n for n in d["chip_notes"])
    # LDS: 128 B/clk/CU × 304 × 2.1 GHz, the same 6·N² bytes
    assert d["levels"]["smem"]["time_s"] == pytest.approx(6 * N * N / (128 * 304 * 2.1e9))


def test_a_chip_table_that_disagrees_with_its_peak_is_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).parents[1] / "src/roofline/hardware/data/h100-sxm.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("sms = 132", "sms = 140"))  # 4096 × 140 × 1.83 GHz is 6% above 989.4
    with pytest.raises(RooflineError, match=r"bf16 4096 FLOP/clk/SM × 140 × 1.83 GHz.*\+6\.1%"):
        load_machine_file(bad)
    code, out, err = _run(capsys, "kernel", "matmul", "64", "64", "64", "--machine", str(bad))
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("roofline: error:")


def test_every_catalog_chip_figure_cites_a_source() -> None:
    for m in catalog().values():
        if m.chip is not None:
            assert all(v.strip() for v in m.chip.sources.values()), m.id


def test_machine_explain_derives_each_per_sm_figure(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "machine", "b200", "--explain")
    assert code == 0
    assert "bf16  8192 FLOP/clk/SM × 148 × 1.8558 GHz = 2.25 PFLOP/s" in out
    assert "exp: 16 exponentials/clk/SM × 148" in out
    # the attention ratio, (1/16) / (4·d/8192) = 128/d
    assert "= 128/d (d = 128: 1; d = 64: 2)" in out


def test_the_sweep_path_places_the_exponentials_as_the_graph_path_does() -> None:
    # GPT-2 (d = 64) prefill on a B200: attention is exp-bound, (1/16)/(4·64/8192) = 2
    cfg, m = load_config("gpt2"), get_machine("b200")
    dt = model_dtypes("bf16", "bf16", "bf16")
    a = analyze_model(cfg, m, "prefill", 4, 1024, "flash", dt)
    attn = next(p for p in a.placements if p.kind.startswith("attention_qk"))
    assert attn.bound is Unit.EXP
    r = StepModel.fit(cfg, "prefill", dt, Plan.FLASH).evaluate([4], [1024], m, a.dtype)
    assert float(r["time_s"][0]) == pytest.approx(a.time_s, rel=1e-9)
    assert [SWEPT_RESOURCES[int(c)] for c in r["kernel_bound"][0]] == [p.bound for p in a.placements]


def test_cli_tiles_and_fa4_options(capsys: pytest.CaptureFixture[str]) -> None:
    # 256×256 tiles: Q 256·128·2 B + 2 stages × 256 keys × (128 + 128) × 2 B = 64 + 256 = 320 KiB > 228 KiB
    code, out, err = _run(capsys, "kernel", "attention", "--seq", "8192", "--head-dim", "128", "--machine", "b200",
                          "--tile", "256x256")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "needs 320 KiB of shared memory per thread block; b200 has 228 KiB per SM" in err
    code, _, err = _run(capsys, "kernel", "matmul", "64", "64", "64", "--tile", "12x")
    assert code == 2 and "expected 3 positive whole numbers joined by x, like 256x256x32" in err
    code, out, _ = _run(capsys, "kernel", "attention", "--seq", "8192", "--head-dim", "128", "--machine", "b200",
                        "--exp-emulated", "0.25", "--conditional-rescale", "--json")
    d = json.loads(out)
    # exp: N²·(0.75 + 0.1/128) / 16 against matrix 4·N²·128 / 8192 = 0.7508: the matrix units bind again,
    # ahead of shared memory at 0.75 (6·N² B at 128 B/clk/SM): a margin of 1/0.7508
    assert code == 0 and d["bound"] == "matrix"
    assert _ratio(d) == pytest.approx((0.75 + 0.1 / 128) * 8192 / 16 / 512, rel=1e-4)
    assert d["margin"] == pytest.approx(1 / ((0.75 + 0.1 / 128) * 8192 / 16 / 512), rel=1e-3)


def test_when_exp_binds_attainable_is_flops_over_the_exp_floor(capsys: pytest.CaptureFixture[str]) -> None:
    (k,) = attention_graph(N, 128).kernels(attention_plans("attention")[Plan.FLASH])
    p = place(k, "b200", "bf16")
    assert p.bound is Unit.EXP
    # attainable = FLOPs / time floor, the floor being the exponentials' time, not min(peak, BW × I)
    assert p.attainable_flop_per_s == pytest.approx(p.flop / p.unit_times_s[Unit.EXP], rel=1e-12)
    assert p.attainable_flop_per_s < min(p.peak_flop_per_s, p.bytes_per_s * p.flop_per_byte)
    code, out, _ = _run(capsys, "kernel", "attention", "--seq", str(N), "--head-dim", "128", "--fusion", "flash",
                        "--machine", "b200", "--explain")
    assert code == 0 and "the exponential units bind, not a FLOP unit or DRAM: FLOPs / time floor" in out
