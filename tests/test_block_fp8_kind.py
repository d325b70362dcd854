"""A matmul computing in FP8 over weights with 128×128 block scales is the tables' gemm.fp8_block kind
(roofline.expectation.model.gemm_dtype_key), in the per-kernel path and in the step model's sweep alike.

Qwen3-30B-A3B-FP8's config.json (tests/fixtures/configs) states quant_method fp8 with
weight_block_size [128, 128]: its projections' weights are fp8_e4m3_block128x128 (8 + 32/16384 bits a
weight, roofline.models.quantization), the recipe aiconfigurator's gemm tables time as gemm_dtype
fp8_block (SGLang: DeepGEMM's gemm_nt_f8f8bf16 after a per-token-group quantization of the BF16 input,
collector/sglang/collect_gemm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofline.calibration.choose import choose, total
from roofline.expectation.model import gemm_dtype_key
from roofline.expectation.placed import expect
from roofline.expectation.shipped import shipped
from roofline.models import analyze_model, dtype_steps
from roofline.models.dtypes import model_dtypes
from roofline.models.sweep import deployments, sweep

CONFIG = str(Path(__file__).parent / "fixtures" / "configs" / "Qwen3-30B-A3B-FP8" / "config.json")


def test_the_key_by_hand() -> None:
    # FP8 compute over block-scaled FP8 weights: fp8_block; per-tensor FP8 weights, or BF16 compute
    # over the same weights (a weight-only dequantizing GEMM), keep their compute dtype's key
    assert gemm_dtype_key("fp8_e4m3", ("fp8_e4m3", "fp8_e4m3_block128x128")) == "fp8_block"
    assert gemm_dtype_key("fp8_e4m3", ("fp8_e4m3", "fp8_e4m3")) == "fp8"
    assert gemm_dtype_key("bf16", ("bf16", "fp8_e4m3_block128x128")) == "bf16"
    assert gemm_dtype_key("mxfp8", ("mxfp8", "mxfp8")) == "fp8"


def _placements(machine: str):  # type: ignore[no-untyped-def]
    dt = model_dtypes(None, "bf16", None, "fp8")
    return analyze_model(CONFIG, machine, "prefill", 1, 8192, dtypes=dt).placements


def test_the_projections_take_the_block_fp8_fit() -> None:
    times = shipped("h200", "sglang")
    by_name = {p.kernel.name: expect(p, times) for p in _placements("h200") if p.kernel is not None}
    for name in ("qkv_proj", "o_proj"):
        assert by_name[name].kind == "gemm.fp8_block" and by_name[name].note == ""
        assert by_name[name].fit == times.fits["gemm.fp8_block"]


def test_a_file_without_block_fp8_rows_takes_per_tensor_fp8_and_says_so() -> None:
    # aiconfigurator-core 0.12.0's L40S SGLang gemm table has no fp8_block rows (its shipped file: gemm.bf16,
    # gemm.fp8): the nearer kind is FP8 per tensor, not BF16
    times = shipped("l40s", "sglang")
    assert "gemm.fp8_block" not in times.fits
    e = next(expect(p, times) for p in _placements("l40s") if p.kernel is not None and p.kernel.name == "qkv_proj")
    assert e.kind == "gemm.fp8_block" and e.fit == times.fits["gemm.fp8"]
    assert "the gemm.fp8 fit" in e.note


def test_sweep_band_is_the_per_kernel_band() -> None:
    # the step model's band (stepband, numpy over a grid) keys the projections the same way: the sweep row's
    # band is Σ runs × each kernel's shipped-fit band of the same step
    a = analyze_model(CONFIG, "h200", "prefill", 1, 8192, dtypes=model_dtypes(None, "bf16", None, "fp8"))
    chosen = choose(a.machine.id)
    want = total(a.placements, [chosen.band(p) for p in a.placements])
    row = sweep(dtype_steps(CONFIG, "prefill", compute_dtypes=("fp8",)), deployments(["h200"]), [1], [8192])[0]
    assert row["expected_time_s"]["low"] == pytest.approx(want["low"], rel=1e-9)
    assert row["expected_time_s"]["high"] == pytest.approx(want["high"], rel=1e-9)
