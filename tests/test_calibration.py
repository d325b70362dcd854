"""The calibration file: measured shares of the roof per bound class, written by bench and
measure --collectives, read by serve.

Arithmetic on constructed placements and collectives (exact values; quantiles by linear
interpolation between the sorted samples, numpy's default: h = (n − 1)·p); the real bench is
checked against bounds only (its times are measured).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import Machine, MemoryLevel
from roofline.measure.calibration import Calibration, ClassShare, Sample, load_calibration, quantile
from roofline.measure.collectives import ALL_GATHER, ALL_REDUCE, CollectivePoint, Collectives, bus_factor
from roofline.measure.timing import Timing
from roofline.placement import place_flop_bytes
from roofline.serving.efficiency import Efficiency
from roofline.vocab import Level

ROOF = Machine("test-roof", "test roof", {"fp32": 1e12}, {Level.DRAM: MemoryLevel(Level.DRAM, 100e9)},
               kind="cpu", measured=True)  # 100 GB/s, 1 TFLOP/s: ridge 10 FLOP/B


def _memory(name: str, fraction: float):  # type: ignore[no-untyped-def]
    # 1e6 FLOP over 1e8 B: memory-bound, floor 1e8 / 100e9 = 1 ms; measured 1 ms / fraction
    p = place_flop_bytes(1e6, 1e8, ROOF, "fp32", name=name)
    assert p.bound_class == "memory" and p.time_s == pytest.approx(1e-3)
    return p.with_measured(1e-3 / fraction)


def _compute(name: str, fraction: float):  # type: ignore[no-untyped-def]
    # 2e9 FLOP over 1e6 B: compute-bound, floor 2e9 / 1e12 = 2 ms
    p = place_flop_bytes(2e9, 1e6, ROOF, "fp32", name=name)
    assert p.bound_class == "compute" and p.time_s == pytest.approx(2e-3)
    return p.with_measured(2e-3 / fraction)


def _bench_calibration() -> Calibration:
    placements = [_memory(f"m{i}", f) for i, f in enumerate((0.9, 0.6, 0.8, 0.7))]
    placements += [_compute("mm", 0.75), _memory("too fast", 1.25),
                   place_flop_bytes(1e6, 1e8, ROOF, "fp32", name="unmeasured")]
    return Calibration.from_placements(placements, produced_by="test bench", date="2025-01-02")


def test_quantiles_are_linear_interpolation() -> None:
    # h = (n-1)p: n = 4, p = 0.25 -> h = 0.75 -> 0.6 + 0.75 * 0.1; p = 0.75 -> h = 2.25 -> 0.8 + 0.25 * 0.1
    assert quantile([0.9, 0.6, 0.8, 0.7], 0.25) == pytest.approx(0.675)
    assert quantile([0.9, 0.6, 0.8, 0.7], 0.75) == pytest.approx(0.825)
    assert quantile([0.5], 0.25) == quantile([0.5], 0.75) == 0.5
    assert quantile([0.2, 0.4, 0.6], 0.5) == pytest.approx(0.4)  # h = 1 exactly: the middle sample


def test_from_placements_splits_by_bound_class() -> None:
    cal = _bench_calibration()
    assert cal.machine == "test-roof" and cal.date == "2025-01-02" and cal.produced_by == "test bench"
    mem, comp = cal.classes["memory"], cal.classes["compute"]
    # fractions 0.6, 0.7, 0.8, 0.9 of the roof (floor / measured time) -> 0.675 and 0.825
    assert (mem.low, mem.high, mem.n) == (pytest.approx(0.675), pytest.approx(0.825), 4)
    assert sorted(s.fraction for s in mem.samples) == pytest.approx([0.6, 0.7, 0.8, 0.9])
    assert (comp.low, comp.high, comp.n) == (pytest.approx(0.75), pytest.approx(0.75), 1)  # a single value
    assert "communication" not in cal.classes
    # above the roof: an error, never a share; the unmeasured kernel is skipped
    assert len(cal.excluded) == 1 and cal.excluded[0].startswith("too fast: 125%")
    assert cal.efficiency_ranges() == {"compute": pytest.approx((0.75, 0.75)), "memory": pytest.approx((0.675, 0.825))}
    with pytest.raises(RooflineError, match="no measured kernels"):
        Calibration.from_placements([place_flop_bytes(1e6, 1e8, ROOF, "fp32")])


def test_efficiency_ranges_are_clamped_to_one() -> None:
    cal = Calibration("m", "2025-01-02", "hand", {"memory": ClassShare(0.95, 1.2, 3)})
    assert cal.efficiency_ranges() == {"memory": (0.95, 1.0)}


def _collectives(ranks: int = 8, catalog_id: str | None = "h100-sxm") -> Collectives:
    # all-reduce at 64 MiB in 400 us: algbw = S / t, busbw = algbw x 2(n-1)/n; all-gather likewise
    def point(c: str, size: int, t: float) -> CollectivePoint:
        return CollectivePoint(c, size, ranks, Timing((t, t, t)))

    mib = 2**20
    pts = (point(ALL_REDUCE, mib, 30e-6), point(ALL_REDUCE, 64 * mib, 400e-6), point(ALL_GATHER, 64 * mib, 200e-6))
    return Collectives("cuda", "nccl", ranks, "NVIDIA H100 80GB HBM3", (mib, 64 * mib), pts, catalog_id=catalog_id,
                       date="2025-01-03")


def test_from_collectives_busbw_over_the_link() -> None:
    link = 450e9
    cal = Calibration.from_collectives(_collectives(), link_bytes_per_s=link)
    comm = cal.classes["communication"]
    s = 64 * 2**20
    ar = s / 400e-6 * bus_factor(ALL_REDUCE, 8) / link  # the largest size only
    ag = s / 200e-6 * bus_factor(ALL_GATHER, 8) / link
    assert sorted(x.fraction for x in comm.samples) == pytest.approx(sorted([ar, ag]))
    assert (comm.low, comm.high) == (pytest.approx(quantile([ar, ag], 0.25)), pytest.approx(quantile([ar, ag], 0.75)))
    assert cal.machine == "h100-sxm" and cal.date == "2025-01-03" and set(cal.classes) == {"communication"}
    # no link given: the catalog's node link of an H100 SXM (900 GB/s bidirectional -> 450 GB/s per direction)
    assert Calibration.from_collectives(_collectives()).classes["communication"].samples == comm.samples
    # a GPU not in the catalog: left out, and a note says why
    unknown = Calibration.from_collectives(_collectives(catalog_id=None))
    assert not unknown.classes and "communication left out" in unknown.notes[0]


def test_merge_pools_the_samples() -> None:
    bench = _bench_calibration()
    comm = Calibration.from_collectives(_collectives(), link_bytes_per_s=450e9)
    both = bench.merge(comm)
    assert set(both.classes) == {"compute", "memory", "communication"}
    assert both.classes["memory"] == bench.classes["memory"] and both.machine == "test-roof + h100-sxm"
    more = Calibration("test-roof", "2025-02-01", "test bench", {"memory": ClassShare.of([Sample("m5", 1.0)])})
    pooled = bench.merge(more).classes["memory"]
    # 0.6, 0.7, 0.8, 0.9, 1.0: h = 1 and 3 -> 0.7 and 0.9
    assert (pooled.low, pooled.high, pooled.n) == (pytest.approx(0.7), pytest.approx(0.9), 5)
    assert bench.merge(more).date == "2025-02-01"


def test_json_round_trip(tmp_path: Path) -> None:
    cal = _bench_calibration().merge(Calibration.from_collectives(_collectives(), link_bytes_per_s=450e9))
    path = tmp_path / "cal.json"
    path.write_text(cal.to_json(), encoding="utf-8")
    back = load_calibration(path)
    assert back == cal
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["format"] == "roofline-calibration" and raw["quantiles"]["low"] == 0.25
    # a hand-written file: a single value, or low and high without samples
    path.write_text(json.dumps({"format": "roofline-calibration", "version": 1,
                                "classes": {"compute": 0.6, "memory": {"low": 0.7, "high": 0.8}}}))
    hand = load_calibration(path)
    assert hand.efficiency_ranges() == {"compute": (0.6, 0.6), "memory": (0.7, 0.8)}


GOOD = {"format": "roofline-calibration", "version": 1, "classes": {"memory": {"low": 0.7, "high": 0.8}}}


@pytest.mark.parametrize(("text", "says"), [
    ("{not json", "not JSON (line 1"),
    ("[1, 2]", "a JSON object"),
    (json.dumps({**GOOD, "format": "other"}), "not a calibration file"),
    (json.dumps({**GOOD, "version": 7}), "version 7 is not supported"),
    (json.dumps({**GOOD, "extra": 1}), "unknown key 'extra'"),
    (json.dumps({**GOOD, "classes": {"memroy": 0.8}}), "unknown bound class 'memroy'; did you mean memory"),
    (json.dumps({**GOOD, "classes": {}}), "no bound class"),
    (json.dumps({**GOOD, "classes": {"memory": {"low": 0.9, "high": 0.8}}}), "low 0.9 is above high 0.8"),
    (json.dumps({**GOOD, "classes": {"memory": {"low": 0, "high": 0.8}}}), "must be above 0"),
    (json.dumps({**GOOD, "classes": {"memory": {"low": "a", "high": 0.8}}}), "must be a number"),
    (json.dumps({**GOOD, "classes": {"memory": {"high": 0.8}}}), "needs low"),
    (json.dumps({**GOOD, "classes": {"memory": {"low": 0.7, "high": 0.8, "n": 3,
                                                "samples": [{"name": "a", "fraction_of_roof": 0.7}]}}}),
     "n is 3 but it lists 1 samples"),
    (json.dumps({**GOOD, "classes": {"memory": {"low": 0.7, "high": 0.8, "samples": [{"name": "a"}]}}}),
     "samples[0] must be an object"),
    (json.dumps({**GOOD, "notes": "x"}), "notes must be a list of strings"),
])
def test_malformed_files_fail_in_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RooflineError) as info:
        load_calibration(path)
    message = str(info.value)
    assert says in message and len(message.splitlines()) == 1 and str(path) in message


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(RooflineError, match="does not exist") as info:
        load_calibration(tmp_path / "nope.json")
    assert len(str(info.value).splitlines()) == 1
    with pytest.raises(RooflineError, match="is a folder"):
        load_calibration(tmp_path)


def test_serve_takes_a_bench_calibration_as_model_does(tmp_path: Path) -> None:
    """serve's kernels take a bench file's shares as `roofline model --calibration` does: band = floor /
    [high share, low share] of the kernel's bound class; the overhead and the KV transfer stay constants."""
    from roofline.placement import place_flop_bytes

    path = tmp_path / "cal.json"
    path.write_text(_bench_calibration().to_json(), encoding="utf-8")
    eff = Efficiency(calibration=str(path), step_overhead_s=(1e-5, 3e-5)).for_device("h100-sxm")
    stream = place_flop_bytes(1e6, 1e9, "h100")  # 1 FLOP per 1000 bytes: memory-bound
    band = eff.band(stream)
    assert band.low_s == pytest.approx(stream.time_s / 0.825) and band.high_s == pytest.approx(stream.time_s / 0.675)
    assert eff.communication == (0.8, 0.9) and eff.step_overhead_s == (1e-5, 3e-5)
    assert eff.to_dict()["kernels"]["file"] == str(path)


def test_bench_save_calibration_checks_the_path_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "no-such-folder" / "cal.json"
    assert main(["bench", "--quick", "--machine", "h100", "--only", "add", "--save-calibration", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not exist" in err
    assert main(["measure", "--save-calibration", str(tmp_path / "c.json")]) == 2
    assert "--collectives only" in capsys.readouterr().err
    assert main(["measure", "--collectives", "--save-calibration", str(tmp_path / "c.json")]) == 2
    assert "a CPU run" in capsys.readouterr().err


def test_bench_cli_writes_a_calibration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    path = tmp_path / "cal.json"
    assert main(["bench", "--quick", "--only", "add", "--only", "matmul", "--repeats", "3",
                 "--save-calibration", str(path)]) == 0
    assert f"saved the calibration to {path}" in capsys.readouterr().out
    cal = load_calibration(path)
    ranges = cal.efficiency_ranges()
    assert {"memory", "compute"} <= set(ranges) or cal.excluded  # a class all above its roof is excluded
    for lo, hi in ranges.values():  # measured: bounds, not values
        assert 0 < lo <= hi <= 1
    assert cal.produced_by.startswith("roofline bench --quick (cpu, fp32") and cal.date
    eff = Efficiency(calibration=str(path)).for_device("cpu")
    assert eff.kernels is not None and eff.kernels.bench is not None
