"""`roofline serve` writes its chart and page, and takes its expected bands from a calibration file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.measure.calibration import FORMAT, VERSION

ARGS = ["serve", "llama-3-8b", "--machine", "h100", "--prompt", "512", "--output", "64", "--batch", "8"]


def test_serve_writes_chart_and_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png, html = tmp_path / "curve.png", tmp_path / "serve.html"
    assert main([*ARGS, "--png", str(png), "--html", str(html)]) == 0
    err = capsys.readouterr().err
    assert f"wrote {png}" in err and f"wrote {html}" in err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert html.read_text().startswith("<!DOCTYPE html>")


def test_calibration_sets_the_expected_band(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # kernels measured at a quarter of their roof (a bench calibration, one value a class): the expected
    # decode step is four times its floor plus the overhead, slower than the shipped fit's band
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"format": FORMAT, "version": VERSION, "machine": "h100-sxm", "date": "2026-12-01",
                               "produced_by": "test", "classes": {"memory": 0.25, "compute": 0.25}}))
    assert main([*ARGS, "--json", "--calibration", str(cal)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert main([*ARGS, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    itl = d["itl_s"]["mean"]
    assert itl["floor"] == plain["itl_s"]["mean"]["floor"]  # the floor stays the roofline
    assert itl["expected"]["low"] == pytest.approx(4 * itl["floor"] + 20e-6, rel=1e-9)
    assert itl["expected"]["low"] > plain["itl_s"]["mean"]["expected"]["high"]  # the shipped fit is faster
    code = main([*ARGS, "--calibration", str(tmp_path / "missing.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
