"""Every time has its band (issue 20 item 3): sweep, compare and plan print the calibrated expected band
beside the floor, from the expected-time model `roofline model` uses, and plan ranks by it."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from roofline.calibration.choose import choose, total
from roofline.cli import main
from roofline.models import analyze_model, compare, deployments, dtype_steps
from roofline.models.search import search_splits
from roofline.models.sweep import sweep
from roofline.parallel import Split
from test_serving import _flat_fit  # every kind t = floor / e + t0, the band t × [1, 1]

REL = 1e-9


@pytest.mark.parametrize(("machine", "split", "phase", "batch", "seq"), [
    ("h100", Split(), "decode", 64, 8192), ("b200", Split(), "prefill", 2, 2048),
    ("dgx-h100", Split(tp=8), "decode", 256, 4096)])
def test_sweep_and_compare_band_is_models_band(machine: str, split: Split, phase: str, batch: int, seq: int) -> None:
    """A sweep row's band (numpy over the step model) and a compare row's (the graph path) are the
    total `roofline model` prints for the same step: Σ runs × each kernel's shipped-fit band."""
    a = analyze_model("llama-3-8b", machine, phase, batch, seq, split=split)
    chosen = choose(a.machine.id)
    want = total(a.placements, [chosen.band(p) for p in a.placements])
    row = sweep(dtype_steps("llama-3-8b", phase), deployments([machine], [split]), [batch], [seq])[0]
    assert row["time_s"] == pytest.approx(a.time_s, rel=REL)
    assert row["expected_time_s"]["low"] == pytest.approx(want["low"], rel=REL)
    assert row["expected_time_s"]["high"] == pytest.approx(want["high"], rel=REL)
    c = compare(["llama-3-8b"], [machine], phase, batch, seq, splits=[split])[0]
    assert c["expected_time_s"] == pytest.approx(want, rel=REL)
    assert a.time_s <= want["low"] <= want["high"]


def test_sweep_csv_and_json_carry_the_band_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # every kernel at half its roof plus 2 µs a launch: expected = 2 × floor + (kernel runs) × 2 µs
    cal = _flat_fit(tmp_path / "half.json", "h100-sxm", 0.5, 2e-6)
    args = ["sweep", "llama-3-8b", "--machine", "h100", "--batch", "1,64", "--context", "2048", "--calibration", cal]
    assert main([*args, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    runs = sum(p.count for p in analyze_model("llama-3-8b", "h100", "decode", 1, 2048).placements)
    for r in rows:
        assert r["expected_time_s"]["low"] == pytest.approx(2 * r["time_s"] + runs * 2e-6, rel=REL)
        assert r["expected_time_s"]["high"] == pytest.approx(r["expected_time_s"]["low"], rel=REL)
    assert main([*args, "--format", "csv"]) == 0
    flat = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert float(flat[1]["expected_time_s.low"]) == pytest.approx(rows[1]["expected_time_s"]["low"], rel=1e-6)
    assert main(args) == 0
    assert "expected" in capsys.readouterr().out


def test_plan_ranks_by_expected_time_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    s = search_splits("llama-3-70b", "dgx-h100", "decode", 64, 8192, devices=8)
    ranked = [r for r in s.rows if r.rank]
    mids = [r.expected_s for r in ranked]
    assert mids == sorted(mids)  # the ranking's order is the expected time's
    w = ranked[0]
    a = analyze_model("llama-3-70b", "dgx-h100", "decode", 64, 8192, split=w.split)
    chosen = choose(a.machine.id)
    want = total(a.placements, [chosen.band(p) for p in a.placements])
    assert w.expected_time_s == pytest.approx((want["low"], want["high"]), rel=REL)
    assert w.expected_s == pytest.approx((want["low"] + want["high"]) / 2, rel=REL)
    assert s.ranked_by.startswith("ranked by the expected step time")
    assert main(["plan", "llama-3-70b", "--machine", "dgx-h100", "--batch", "64", "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert "ranked by the expected step time" in out and "expectation/data/h100-sxm." in out
    assert main(["plan", "llama-3-70b", "--machine", "dgx-h100", "--batch", "64", "--context", "8192", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["winner"]["expected_time_s"]) == {"low", "high"} and d["ranked_by"] == s.ranked_by
