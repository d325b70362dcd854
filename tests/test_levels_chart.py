"""The hierarchical roofline and the sub-roof chart (report/charts/levels.py): the Figure's roofs and
points checked by arithmetic, and `roofline kernel ... --levels-png`."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from roofline.cli import cli
from roofline.hardware import Machine, MemoryLevel, get_machine
from roofline.kernels import attention_graph, attention_plans, matmul_graph
from roofline.placement import place
from roofline.report.charts.levels import flop_per_exp, level_bandwidths, level_points, levels_figure, subroofs
from roofline.vocab import Level, Unit

N = 4096


def _lines(ax, prefix):
    return {ln.get_gid(): ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(prefix)}


def _points(ax, prefix):
    return {c.get_gid(): c.get_offsets()[0] for c in ax.collections if (c.get_gid() or "").startswith(prefix)}


def _matmul(machine):
    (kernel,) = matmul_graph(N, N, N, "bf16").kernels()
    return place(kernel, machine, "bf16")


def test_hierarchical_roofline_of_a_matmul_on_h100():
    p = _matmul("h100")
    fig = levels_figure([p])
    left = fig.axes[0]
    roofs = _lines(left, "level-roof-")
    # H100: DRAM 3.35 TB/s (datasheet) and shared memory 128 B/clk × 132 SMs × 1.83 GHz = 30.92 TB/s; its
    # L2 has a capacity but no published bandwidth, so no roof
    assert set(roofs) == {"level-roof-smem", "level-roof-dram"} == {f"level-roof-{lv}" for lv in level_bandwidths([p])}
    assert level_bandwidths([p])[Level.SMEM] == pytest.approx(128 * 132 * 1.83e9)
    # each roof is min(peak, BW × x): at the left edge, BW × x_lo
    x_lo = left.get_xlim()[0]
    assert roofs["level-roof-dram"].get_ydata()[0] == pytest.approx(3.35e12 * x_lo)
    pts = _points(left, "level-point-")
    flop = 2.0 * N**3  # 2·M·N·K
    # DRAM: A, B, C once each, 3 · 4096² · 2 B: x = 2·4096³ / (6·4096²) = 4096 / 3 = 1365.3 FLOP/byte
    assert pts["level-point-1-dram"][0] == pytest.approx(flop / (3 * N * N * 2))
    # shared memory: 2 B · M·N·K · (1/256 + 1/256) (256×256 tiles): x = 2 / (2 · 2/256) = 128 FLOP/byte
    assert pts["level-point-1-smem"][0] == pytest.approx(128.0)
    # one kernel, one height: FLOPs / time floor at every level
    assert pts["level-point-1-dram"][1] == pytest.approx(flop / p.time_s)
    assert pts["level-point-1-smem"][1] == pts["level-point-1-dram"][1]


def _cpu_with_caches() -> Machine:
    levels = {Level.DRAM: 10e9, Level.L1: 200e9, Level.L2: 100e9, Level.L3: 40e9}
    return Machine("test-cpu", "Test CPU", {"fp32": 1e12},
                   {lv: MemoryLevel(lv, bw) for lv, bw in levels.items()}, kind="cpu", measured=True)


def test_a_measured_cpu_has_one_roof_per_cache_level():
    m = _cpu_with_caches()
    (kernel,) = matmul_graph(1024, 1024, 1024, "fp32").kernels()
    p = place(kernel, m, "fp32")
    fig = levels_figure([p])
    roofs = _lines(fig.axes[0], "level-roof-")
    # four levels with a bandwidth (l1, l2, l3, dram): four roofs
    assert len(roofs) == 4 == len(level_bandwidths([p]))
    pts = {pt.level: pt.x for pt in level_points([p])}
    # the matmul's tiling puts bytes through L2 (2·4·1024³·(2/256) B: x = 2 / (4 · 2/256) = 64) and DRAM
    # (3·1024²·4 B: x = 2·1024 / 12 = 170.7); no bytes are counted at l1 or l3, so no point there
    assert pts == {Level.L2: pytest.approx(64.0), Level.DRAM: pytest.approx(2.0 * 1024 / 12)}


def test_subroofs_of_naive_attention_on_b200():
    g = attention_graph(N, 128, "bf16", heads=32)
    ps = [place(k, "b200", "bf16") for k in g.kernels(attention_plans("attention")["none"])]
    chip = get_machine("b200").chip
    assert chip is not None and chip.exp_per_s
    # only the softmax evaluates exponentials: 5 FLOPs and 1 exp per score, so 5 FLOP per exp
    assert flop_per_exp(ps) == pytest.approx(5.0)
    roofs = subroofs(ps)
    assert roofs[Unit.EXP] == pytest.approx(chip.exp_per_s * 5.0)
    fig = levels_figure(ps)
    right = fig.axes[1]
    lines = _lines(right, "unit-roof-")
    assert set(lines) == {"unit-roof-matrix", "unit-roof-vector", "unit-roof-exp"}
    assert lines["unit-roof-exp"].get_ydata()[0] == pytest.approx(chip.exp_per_s * 5.0)
    assert lines["unit-roof-matrix"].get_ydata()[0] == pytest.approx(get_machine("b200").peak_flop_per_s("bf16"))
    pts = _points(right, "unit-point-")
    softmax = ps[1]
    # the softmax's point: x = FLOPs / DRAM bytes, y = FLOPs / time floor
    assert pts["unit-point-2"][0] == pytest.approx(softmax.flop / softmax.bytes)
    assert pts["unit-point-2"][1] == pytest.approx(softmax.flop / softmax.time_s)


def test_kernel_levels_png_writes_a_png(tmp_path):
    out = tmp_path / "levels.png"
    r = CliRunner().invoke(cli, ["kernel", "attention", "--seq", "2048", "--head-dim", "128", "--machine", "b200",
                                 "--levels-png", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_kernel_levels_png_refuses_another_format(tmp_path, capsys):
    from roofline.cli import main

    assert main(["kernel", "matmul", "64", "64", "64", "--levels-png", str(tmp_path / "x.svg")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofline: error: --levels-png writes PNG") and err.count("\n") == 1
    assert not (tmp_path / "x.svg").exists()


def test_model_levels_png_draws_every_kernel(tmp_path, capsys):
    from roofline.cli import main

    out = tmp_path / "step.png"
    assert main(["model", "llama-3-70b", "--machine", "b200", "--phase", "decode", "--batch", "8", "--context",
                 "4096", "--levels-png", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in capsys.readouterr().err
