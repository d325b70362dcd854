"""Collectives on a real engine: gloo over 2 processes on this CPU, the nccl-tests arithmetic, the α-β
fit, the system file it writes, the CLI.

The arithmetic (bus factors, the fit, the TOML section) is tested on exact, synthetic numbers and
needs no process. The tests marked `torch` start 2 gloo processes on 127.0.0.1 with small sizes and a
budget, and check measured quantities against bounds only: a loaded two-core machine makes any
single time noisy, never wrong in kind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.measure.collectives import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COLLECTIVES,
    REDUCE_SCATTER,
    SEND_RECV,
    CollectivePoint,
    Collectives,
    bus_factor,
    default_sizes,
    fit_alpha_beta,
    round_size,
)
from roofline.measure.collectives_run import CollectivesSettings, measure_collectives
from roofline.measure.timing import Timing
from roofline.units import parse_quantity

KiB, MiB = 2**10, 2**20
SMALL = (4 * KiB, 64 * KiB, 1 * MiB)


# --- arithmetic, no processes ---------------------------------------------------------------------

def test_bus_factors_are_nccl_tests() -> None:
    # n = 2: all-reduce 2·(2−1)/2 = 1.0; all-gather, reduce-scatter, all-to-all (2−1)/2 = 0.5; send/recv 1
    assert [bus_factor(c, 2) for c in COLLECTIVES] == [1.0, 0.5, 0.5, 0.5, 1.0]
    # n = 8: all-reduce 2·7/8 = 1.75; the (n−1)/n ones 7/8 = 0.875
    assert [bus_factor(c, 8) for c in COLLECTIVES] == [1.75, 0.875, 0.875, 0.875, 1.0]
    with pytest.raises(RooflineError, match="unknown collective"):
        bus_factor("broadcast", 2)


def test_sizes_are_whole_fp32_chunks_per_rank() -> None:
    # 4 KiB over 3 ranks: the largest multiple of 4·3 = 12 bytes at most 4096 is 4092 (341 floats a rank)
    assert round_size(4096, 3) == 4092 and round_size(4096, 2) == 4096
    assert default_sizes("cpu", True) == (4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB)
    assert default_sizes("cpu", False)[-1] == 64 * MiB and default_sizes("cuda", False)[-1] == 2**30


def test_the_fit_recovers_alpha_and_beta_exactly() -> None:
    alpha, beta = 35e-6, 12.3e9
    for factor in (1.0, 0.5, 1.75):
        bus = [factor * s for s in (4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB)]
        fit = fit_alpha_beta(bus, [alpha + b / beta for b in bus], ALL_REDUCE)
        assert fit.alpha_s == pytest.approx(alpha, rel=1e-9)
        assert fit.beta_bytes_per_s == pytest.approx(beta, rel=1e-9)
        assert fit.residual < 1e-9 and fit.max_residual < 1e-9 and not fit.clamped and fit.points == 5


def test_a_negative_latency_is_refitted_through_zero() -> None:
    # times 2 µs short of pure bandwidth: the free fit's α would be −2 µs; through zero, β is near 1 GB/s
    bus = [1e5, 1e6, 1e7]
    fit = fit_alpha_beta(bus, [b / 1e9 - 2e-6 for b in bus])
    assert fit.clamped and fit.alpha_s == 0.0 and 0.9e9 < fit.beta_bytes_per_s < 1.1e9


def test_a_fit_needs_two_sizes_and_growing_times() -> None:
    with pytest.raises(RooflineError, match="at least two sizes"):
        fit_alpha_beta([1e6, 1e6], [1e-3, 1e-3])
    with pytest.raises(RooflineError, match="do not grow"):
        fit_alpha_beta([1e3, 1e6], [2e-3, 1e-3])


def synthetic(device_name: str = 'Lab "CPU" \\ v2', catalog_id: str | None = None, device: str = "cpu",
              ranks: int = 2, alpha: float = 35e-6, beta: float = 12.3e9) -> Collectives:
    """Every collective at three sizes with times α + bus bytes / β exactly (three equal samples)."""
    points = []
    for c in COLLECTIVES:
        for s in SMALL:
            t = alpha + bus_factor(c, ranks) * s / beta
            points.append(CollectivePoint(c, s, ranks, Timing((t, t, t))))
    return Collectives(device=device, backend="gloo" if device == "cpu" else "nccl", ranks=ranks,
                       device_name=device_name, sizes=SMALL, points=tuple(points), catalog_id=catalog_id,
                       date="2026-01-02", repeats=3, warmup=1)


def test_algbw_and_busbw_of_a_point() -> None:
    p = CollectivePoint(ALL_GATHER, 1 * MiB, 2, Timing((1e-3, 2e-3, 3e-3)))
    assert p.time_s == 2e-3  # the median repeat
    assert p.algbw_bytes_per_s == MiB / 2e-3 and p.busbw_bytes_per_s == MiB / 2e-3 * 0.5
    assert p.bus_bytes == 0.5 * MiB


def test_the_link_section_round_trips_through_tomllib() -> None:
    c = synthetic()
    text = c.to_link_section()
    d = tomllib.loads(text)
    assert list(d) == ["id", "name", "kind", "device", "devices_per_node", "max_nodes", "link"]
    assert d["id"] == "measured-lab-cpu-v2-2x-gloo" and d["name"] == 'Lab "CPU" \\ v2 x 2 (gloo, measured)'
    assert d["kind"] == "system" and d["device"] == "cpu" and "not a catalog machine" in text
    assert d["devices_per_node"] == 2 and d["max_nodes"] == 1
    link = d["link"]["node"]
    assert list(link) == ["name", "bandwidth", "latency", "topology", "measured", "source"]
    assert link["name"] == "measured: gloo all-reduce over 2 processes"
    assert link["bandwidth"] == "12.3 GB/s" and link["latency"] == "35 us"  # β and α of the all-reduce fit
    assert parse_quantity(link["bandwidth"], "bytes_per_s") == pytest.approx(12.3e9, rel=1e-9)
    assert parse_quantity(link["latency"], "time_s") == pytest.approx(35e-6, rel=1e-9)
    assert link["topology"] == "switch" and link["measured"] is True
    assert link["source"] == ("roofline measure --collectives (2026-01-02, gloo, 4 KiB-1 MiB, 3 sizes, "
                              "fitted on all-reduce busbw)")


def test_the_link_section_of_a_catalog_gpu_and_odd_names() -> None:
    d = tomllib.loads(synthetic("NVIDIA H200", "h200", "cuda", ranks=8, beta=3.6e11).to_link_section())
    assert d["device"] == "h200" and d["devices_per_node"] == 8 and d["id"] == "measured-h200-8x-nccl"
    assert d["link"]["node"]["bandwidth"] == "360 GB/s"
    # control characters and quotes in a given name or id survive the round trip
    odd = 'a\tb\n"c"\x01\x7f'
    d = tomllib.loads(synthetic().to_link_section(machine_id=odd, name=odd))
    assert d["id"] == odd and d["name"] == odd
    d = tomllib.loads(synthetic("Odd\nGPU", device="cuda").to_link_section())
    assert d["device"] == "odd-gpu"  # not in the catalog: a placeholder, said so in a comment


def test_a_latency_fitted_at_zero_is_written_as_the_smallest_time() -> None:
    # pure bandwidth, no latency: the fit clamps α to 0, and a system file's latency must be positive
    c = synthetic(alpha=0.0, beta=1e9)
    assert c.link_fit.alpha_s == 0.0
    text = c.to_link_section()
    link = tomllib.loads(text)["link"]["node"]
    assert link["latency"] == "4.096 us" and "an upper bound" in text  # 4 KiB / 1 GB/s = 4.096 µs
    assert link["bandwidth"] == "1 GB/s"


def test_no_all_reduce_fit_is_one_clear_error() -> None:
    c = synthetic()
    one_size = Collectives(**{**c.__dict__, "points": tuple(p for p in c.points if p.size_bytes == SMALL[0])})
    with pytest.raises(RooflineError, match="no all-reduce fit for the link"):
        one_size.to_link_section()


# --- gloo, 2 processes ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def measured() -> tuple[Collectives, float]:
    t0 = time.perf_counter()
    c = measure_collectives(CollectivesSettings(devices=2, sizes=SMALL, repeats=3, warmup=1, budget_s=60))
    return c, time.perf_counter() - t0


def _children_left() -> list[int]:
    """Worker processes of this test process that were not reaped."""
    me, left = os.getpid(), []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            stat = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"worker_main" in cmd and int(stat.rsplit(")", 1)[1].split()[1]) == me:
            left.append(int(proc.name))
    return left


@pytest.mark.torch
@pytest.mark.slow
def test_every_collective_over_gloo_has_a_positive_time(measured: tuple[Collectives, float]) -> None:
    c, wall = measured
    assert c.complete and c.backend == "gloo" and c.ranks == 2 and not c.not_measured
    assert c.collectives == COLLECTIVES
    for name in COLLECTIVES:
        pts = c.points_of(name)
        assert [p.size_bytes for p in pts] == list(SMALL)
        for p in pts:
            assert p.timing.repeats == 3
            assert 0 < p.time_s < 5.0  # 1 MiB over loopback: milliseconds; 5 s would be a hang
            assert 1e3 < p.algbw_bytes_per_s < 1e12
    assert wall < 60 and c.wall_s <= wall
    json.dumps(c.to_dict(), allow_nan=False)
    if sys.platform.startswith("linux"):
        assert _children_left() == []


@pytest.mark.torch
@pytest.mark.slow
def test_busbw_over_algbw_is_the_nccl_tests_factor_exactly(measured: tuple[Collectives, float]) -> None:
    c, _ = measured
    # n = 2: all-reduce 2·1/2 = 1.0, all-gather, reduce-scatter, all-to-all 1/2 = 0.5, send/recv 1.0
    want = {ALL_REDUCE: 1.0, ALL_GATHER: 0.5, REDUCE_SCATTER: 0.5, ALL_TO_ALL: 0.5, SEND_RECV: 1.0}
    for p in c.points:
        assert p.busbw_bytes_per_s / p.algbw_bytes_per_s == want[p.collective]
    for f in c.fits.values():  # whatever the noise: a latency and a bandwidth in physical ranges
        assert 0 <= f.alpha_s < 1.0 and 1e5 < f.beta_bytes_per_s < 1e13 and f.residual >= 0


@pytest.mark.torch
def test_the_budget_kills_the_process_group_and_reports_what_finished() -> None:
    # half a second is spent before the processes have even imported torch: nothing finishes, nothing is left
    t0 = time.perf_counter()
    c = measure_collectives(CollectivesSettings(devices=2, sizes=SMALL, budget_s=0.5))
    assert time.perf_counter() - t0 < 15
    assert not c.complete and c.points == ()
    assert set(c.not_measured) == set(COLLECTIVES)
    assert any("killed" in n for n in c.notes)
    if sys.platform.startswith("linux"):
        assert _children_left() == []


@pytest.mark.torch
@pytest.mark.slow
def test_cli_collectives_json_and_save(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "node.toml"
    code = main(["measure", "--collectives", "--devices", "2", "--quick", "--json", "--save", str(path)])
    captured = capsys.readouterr()
    d: dict[str, Any] = json.loads(captured.out)
    assert d["ranks"] == 2 and d["backend"] == "gloo" and d["quick"] and d["complete"]
    assert d["sizes"] == list(default_sizes("cpu", True))
    assert {p["collective"] for p in d["points"]} == set(COLLECTIVES)
    assert all(p["time_s"] > 0 and p["median_s"] == p["time_s"] for p in d["points"])
    if ALL_REDUCE in d["fits"]:  # the usual case; a machine too noisy for a fit says so in one line
        assert code == 0 and d["saved"] == str(path)
        saved = tomllib.loads(path.read_text())
        assert saved["devices_per_node"] == 2 and saved["link"]["node"]["measured"] is True
        beta = parse_quantity(saved["link"]["node"]["bandwidth"], "bytes_per_s")
        assert beta == pytest.approx(d["link"]["beta_bytes_per_s"], rel=1e-3)
        # the CPU is no catalog machine: its ceilings were measured and saved beside, and --machine works
        assert saved["device"] == "node.device.toml" and (tmp_path / "node.device.toml").is_file()
        from roofline.hardware import get_system
        from roofline.vocab import Level

        system = get_system(str(path))
        assert system.devices_per_node == 2 and system.node_link.measured
        link = system.device_machine().memory[Level.LINK]
        assert link.bytes_per_s == pytest.approx(beta, rel=1e-3)  # the fitted β is the link's roof
    else:
        assert code == 2 and "no all-reduce fit" in captured.err and not path.exists()


def _one_line_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("roofline: error:"), err
    return err


def test_one_device_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    assert "at least 2 devices" in _one_line_error(["measure", "--collectives", "--devices", "1"], capsys)
    assert "--devices applies to --collectives" in _one_line_error(["measure", "--devices", "2"], capsys)
    assert "not --collectives" in _one_line_error(["measure", "--collectives", "--dtype", "fp32"], capsys)


def test_more_gpus_than_present_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a 2-GPU machine, wherever this runs
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    err = _one_line_error(["measure", "--collectives", "--device", "cuda", "--devices", "4"], capsys)
    assert "--devices 4 needs 4 GPUs; torch sees 2" in err
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # every visible GPU, and there is one
    assert "at least 2 devices; got 1 GPU" in _one_line_error(["measure", "--collectives", "--device", "cuda"],
                                                               capsys)


def test_collectives_without_torch_says_what_to_install() -> None:
    code = ("import sys\nsys.modules['torch'] = None\nfrom roofline.cli import main\n"
            "sys.exit(main(['measure', '--collectives']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "needs torch" in r.stderr and "pip install -e '.[torch]'" in r.stderr
