"""The vectorised sweep path against the graph path, sweeps and comparisons, and the speed targets."""

from __future__ import annotations

import pytest

from roofline.hardware import get_machine
from roofline.models import (
    StepModel,
    analyze_model,
    compare,
    deployments,
    dtype_steps,
    load_config,
    model_dtypes,
    sweep,
    sweep_arrays,
)
from roofline.models.sweep import SWEPT_RESOURCES

CASES = [
    ("llama-3-70b", "decode"), ("llama-3-70b", "prefill"), ("deepseek-v3", "decode"), ("deepseek-v3", "prefill"),
    ("mixtral-8x7b", "decode"), ("mistral-7b", "prefill"), ("mistral-7b", "decode"), ("gemma-2-9b", "decode"),
    ("gemma-2-9b", "prefill"), ("gpt2", "prefill"), ("qwen3-30b-a3b", "decode"), ("qwen2.5-7b", "decode"),
]
POINTS = [(1, 1), (3, 700), (17, 5000), (64, 8192), (200, 12000)]


@pytest.mark.parametrize("name,phase", CASES)
@pytest.mark.parametrize("plan", ["none", "flash", "fused"])
def test_sweep_path_agrees_with_the_graph_path(name: str, phase: str, plan: str) -> None:
    cfg = load_config(name)
    m = get_machine("h100")
    dt = model_dtypes("bf16", "bf16", "fp8")
    fitted = StepModel.fit(cfg, phase, dt, plan)
    points = [(b, min(s, 1024)) if name == "gpt2" else (b, s) for b, s in POINTS]
    for b, s in points:
        a = analyze_model(cfg, m, phase, b, s, plan, dt)
        r = fitted.evaluate([b], [s], m, a.dtype)
        assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)
        assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)
        assert float(r["time_s"][0]) == pytest.approx(a.time_s, rel=1e-9)
        assert float(r["memory_bound_time_s"][0]) == pytest.approx(a.analysis.memory_bound_time_s, rel=1e-9, abs=1e-15)
        # the bound rule, vectorised, names the same resource as `binding` on the placed kernels
        assert SWEPT_RESOURCES[int(r["bound"][0])] == a.bound
        assert [SWEPT_RESOURCES[int(c)] for c in r["kernel_bound"][0]] == [p.bound for p in a.placements]


def test_sweep_rows_cover_the_grid_and_agree() -> None:
    rows = sweep(dtype_steps("llama-3-8b", "decode", "flash", ["bf16"], ["bf16", "fp8"]), deployments(["h100", "b200"]),
                 [1, 64], [1024, 8192])
    assert len(rows) == 2 * 2 * 2 * 2  # machines × kv dtypes × batches × contexts
    r = next(r for r in rows if (r["machine"], r["kv_dtype"], r["batch"], r["seq"]) == ("b200", "fp8_e4m3", 64, 8192))
    a = analyze_model("llama-3-8b", "b200", "decode", 64, 8192, dtypes=model_dtypes(kv_cache="fp8"))
    assert r["flop_per_byte"] == pytest.approx(a.flop_per_byte, rel=1e-9)
    assert r["tokens_per_s"] == pytest.approx(64 / a.time_s, rel=1e-9)
    # the sweep counts weights + KV cache (no activation workspace), searched for the same smallest split
    assert r["memory_bytes"] == pytest.approx(a.memory.weights_bytes + a.memory.kv_cache_bytes)
    assert r["devices"] == a.memory.devices
    big = sweep(dtype_steps("llama-3-70b"), deployments(["h100"]), [64], [8192])[0]
    assert big["devices"] == 8  # TP 4 holds 78.2 GB a device > 77.3 GB usable: TP 8 (tests/test_parallel.py)


def test_compare_rows_show_what_mla_and_fp8_change() -> None:
    rows = compare(["llama-3-70b", "deepseek-v3"], ["h100"], "decode", 8, 32768, kv_dtypes=["bf16", "fp8"])
    by = {(r["model"], r["kv_dtype"]): r for r in rows}
    assert by[("llama-3-70b", "bf16")]["kv_cache_bytes_per_token"] == 327_680
    assert by[("llama-3-70b", "fp8_e4m3")]["kv_cache_bytes_per_token"] == 327_680 / 2
    assert by[("deepseek-v3", "bf16")]["kv_cache_bytes_per_token"] == 70_272
    # halving the KV bytes nearly doubles the limit (the weights term is unchanged in the numerator)
    ratio = by[("llama-3-70b", "fp8_e4m3")]["decode_limit_flop_per_byte"] / \
        by[("llama-3-70b", "bf16")]["decode_limit_flop_per_byte"]
    assert ratio == pytest.approx(2.0)
    assert by[("deepseek-v3", "bf16")]["decode_limit_flop_per_byte"] > 4 * by[("llama-3-70b", "bf16")][
        "decode_limit_flop_per_byte"]


def test_ten_thousand_point_sweep_has_every_point() -> None:
    # its speed (≤ 1 s, and 5 ms for a whole model's two phases) is bench/bench_model.py's to check
    import numpy as np

    b, s = np.meshgrid(np.arange(1, 101), np.arange(1, 101) * 1310, indexing="ij")
    r = sweep_arrays("llama-3-70b", "h100", "decode", b.ravel(), s.ravel())
    assert r["flop_per_byte"].shape == (10_000,)


def test_sweep_per_kernel_times_add_up_to_the_step() -> None:
    rows = sweep(dtype_steps("llama-3-70b"), deployments(["h100"]), [1, 256], [8192], per_kernel=True)
    for r in rows:
        assert sum(k["total_time_s"] for k in r["kernels"]) == pytest.approx(r["time_s"], rel=1e-12)
    attn = {r["batch"]: next(k for k in r["kernels"] if k["name"] == "attn") for r in rows}
    # at batch 256 the attention kernel streams the KV cache: 80 layers · 256 · 8192 tokens · 4096 B
    # (K and V, 8 heads · 128 · 2 B each) / 3.35 TB/s = 205 ms, plus q and o, which are small
    assert attn[256]["total_time_s"] == pytest.approx(80 * 256 * 8192 * 4096 / 3.35e12, rel=0.01)
    assert attn[256]["bound_class"] == "memory"
    assert "kernels" not in sweep(dtype_steps("llama-3-70b"), deployments(["h100"]), [1], [8192])[0]


@pytest.mark.parametrize("verb", ["sweep llama-3-8b --batch 1,4 --context 8192", "compare llama-3-8b --batch 1,4"])
def test_sweep_and_compare_take_json_as_every_command_does(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.cli import main

    assert main([*verb.split(), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["batch"] for r in rows] == [1, 4]  # one row per batch asked for, in order
    # Llama 3 8B decode at 8192 tokens: the KV cache is 2 (K, V) × 8 heads × 128 × 32 layers × 2 B = 131,072 B a
    # token (its config.json): the memory held grows by 3 more sequences' cache, 3 × 8192 × 131,072 B, and by
    # the activation workspace's growth, under 1% of that
    if verb.startswith("sweep"):
        grown, kv = rows[1]["memory_bytes"] - rows[0]["memory_bytes"], 3 * 8192 * 131_072
        assert kv <= grown <= 1.01 * kv
    assert main([*verb.split(), "--json", "--format", "csv"]) == 2
    assert capsys.readouterr().err.strip().endswith("--json and --format csv ask for two formats: give one")
