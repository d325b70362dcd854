"""`roofline model`, `roofline sweep`, `roofline compare` from the command line."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.explain.model import TIGHT_HEADROOM
from roofline.models.config import preset_names


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_model_json_carries_params_kv_cache_kernels_and_totals(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "model", "llama-3-70b", "--machine", "h100", "--phase", "decode", "--batch", "64",
                         "--context", "8192", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["params"]["total"] == d["params"]["active"]
    assert d["params"]["total"] / 1e9 == pytest.approx(70.6, abs=0.1)
    assert d["kv_cache_bytes_per_token"] == 327_680  # 2·8·128·80·2
    for k in d["kernels"]:
        assert {"name", "count", "flop", "bytes", "flop_per_byte", "time_s", "bound"} <= set(k)
    assert d["totals"]["flop_per_byte"] == pytest.approx(33, rel=0.02)  # the issue: batch 64 at about 33
    assert d["decode_limit_flop_per_byte"] == pytest.approx(60, rel=0.02)  # the seed: about 60 at 8k
    assert d["crossover"]["never"] is True
    # 141 GB + 172 GB: TP 4 would hold 78.2 GB a device, over 0.9 × 80 GiB = 77.3 GB; TP 8 fits
    assert "does not fit" in err and "TP 8 (8 devices" in err


def test_model_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model", "llama-3-8b", "--phase", "prefill", "--prompt", "4096", "--fusion", "fused")
    assert code == 0
    assert "gate_up_proj" in out and "plan fused" in out
    assert "none" in out and "flash" in out  # plans side by side
    assert "131,072 B (128 KiB) per token" in out  # 2·8·128·32·2


def test_model_explain_derives_kv_and_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model", "llama-3-70b", "--batch", "8", "--context", "8192", "--explain")
    assert code == 0
    assert "2 × 8 × 128 × 80 × 2 (bf16) = 327,680 B (320 KiB" in out
    assert "59.78 FLOP/B" in out  # (2·69.50e9 + 4·8192·8192·80) / (8192·327,680)
    assert "I = FLOPs / bytes" in out  # every kernel's own derivation follows


def test_model_dtypes_and_block_scaled_formats(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model", "llama-3-8b", "--machine", "b200", "--weights-dtype", "nvfp4",
                       "--kv-dtype", "fp8", "--dtype", "fp4", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["dtypes"] == {"weights": "nvfp4", "activations": "bf16", "kv_cache": "fp8_e4m3", "compute": "fp4"}
    assert d["kv_cache_bytes_per_token"] == 131_072 / 2


@pytest.mark.parametrize(("argv", "names"), [
    # each error names the option (or argument) at fault and the value given
    (["model", "llama-3-8b", "--batch", "0"], ["--batch", "positive integer", "got 0"]),
    (["model", "llama-3-8b", "--context", "-5"], ["--context", "positive integer", "got -5"]),
    (["model", "llama-3-8b", "--phase", "prefill", "--context", "100"], ["prefill", "--prompt", "--context"]),
    (["model", "llama-3-9b"], ["unknown model", "'llama-3-9b'", "llama-3-8b"]),  # and the nearest preset
    (["model", "llama-3-8b", "--kv-dtype", "fp7"], ["unknown dtype", "'fp7'"]),
    (["sweep", "llama-3-8b", "--batch", "0:4"], ["--batch", "'0:4'", "positive start"]),
    (["compare", "llama-3-8b", "--set", "hidden_size"], ["--set", "KEY=VALUE", "'hidden_size'"]),
])
def test_bad_input_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str],
                                         names: list[str]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("roofline: error:") and err.count("\n") == 1
    assert "Traceback" not in err
    assert all(name in err for name in names), err


def test_malformed_config_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "llama", "hidden_size": 64}')
    code, _, err = run(capsys, "model", str(tmp_path))
    assert code == 2 and "missing field" in err
    (tmp_path / "config.json").write_text('{"model_type": "rwkv"}')
    code, _, err = run(capsys, "model", str(tmp_path / "config.json"))
    assert code == 2 and "supported: llama" in err


def test_context_beyond_maximum_warns_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "model", "llama-3-8b", "--context", "16384", "--json")
    assert code == 0
    assert "beyond llama-3-8b's max_position_embeddings (8192)" in err
    assert json.loads(out)["context"] == 16384


def test_sweep_csv_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "sweep", "llama-3-70b", "--batch", "1:64", "--context", "8192,131072",
                       "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 7 * 2  # batches 1, 2, 4, ..., 64 × two contexts
    assert {"batch", "context", "flop_per_byte", "time_s", "bound"} <= set(rows[0])
    target = tmp_path / "sweep.json"
    code, _, err = run(capsys, "sweep", "mixtral-8x7b", "--machine", "h100,b200", "--batch", "8:32:8",
                       "--kv-dtype", "bf16,fp8", "--format", "json", "--output", str(target))
    assert code == 0 and "wrote" in err
    data = json.loads(target.read_text())
    assert len(data) == 2 * 2 * 4
    assert {r["machine"] for r in data} == {"h100-sxm", "b200"}


def test_compare_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "compare", "llama-3-70b", "deepseek-v3", "--batch", "16", "--context", "32768")
    assert code == 0
    assert "llama-3-70b" in out and "deepseek-v3" in out and "never" in out
    assert "320 KiB" in out and "68.6 KiB" in out  # 327,680 B and 70,272 B per token


def test_chart_options_go_through_the_report_contract(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import roofline.report.outputs as outputs

    calls: list[dict[str, Any]] = []

    def fake_model(scenarios: Any, *, png: Any = None, svg: Any = None, html: Any = None,
                   title: str = "") -> list[Path]:
        calls.append({"plans": [s.plan for s in scenarios], "png": png, "html": html})
        return [Path(p) for p in (png, html) if p]

    def fake_sweep(rows: Any, x: str, *, png: Any = None, svg: Any = None, ridge: float, limit: Any = None,
                   title: str = "") -> list[Path]:
        calls.append({"x": x, "n": len(rows), "ridge": ridge, "limit": limit})
        return [Path(png)]

    monkeypatch.setattr(outputs, "write_model_outputs", fake_model)
    monkeypatch.setattr(outputs, "write_sweep_chart", fake_sweep)
    code, _, _ = run(capsys, "model", "gpt2", "--context", "512", "--png", str(tmp_path / "a.png"),
                     "--html", str(tmp_path / "a.html"))
    assert code == 0
    assert calls[0]["plans"] == ["flash", "none", "fused"]
    code, _, _ = run(capsys, "sweep", "llama-3-70b", "--batch", "1:256", "--context", "8192",
                     "--png", str(tmp_path / "s.png"))
    assert code == 0
    assert calls[1]["x"] == "batch" and calls[1]["n"] == 9
    assert calls[1]["ridge"] == pytest.approx(989.4 / 3.35)
    assert calls[1]["limit"] == pytest.approx(59.78, abs=0.01)


def test_model_csv_file_holds_every_kernel(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "k.csv"
    code, out, err = run(capsys, "model", "llama-3-70b", "--batch", "64", "--context", "8192", "--csv", str(target))
    assert code == 0 and "wrote" in err and "gate_up_proj" in out  # the table still goes to the terminal
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert [r["name"] for r in rows][:3] == ["embedding", "attn_norm", "qkv_proj"]
    assert sum(float(r["share"]) for r in rows) == pytest.approx(1.0)
    down = next(r for r in rows if r["name"] == "down_proj")
    assert int(down["count"]) == 80
    assert float(down["flop"]) == 2 * 64 * 28672 * 8192  # 2·M·N·K for the 64 tokens


def test_explain_states_the_experts_hit_assumption(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model", "mixtral-8x7b", "--batch", "4", "--explain")
    assert code == 0
    # 8·(1 − (3/4)^4) = 5.47 distinct experts for 4 tokens × top-2 of 8, rounded to 5
    assert "8·(1 − (1 − 2/8)^4) = 5.469 → 5" in out
    code, out, _ = run(capsys, "model", "mixtral-8x7b", "--batch", "4", "--experts-hit", "8", "--explain")
    assert code == 0 and "set by hand: 8 of 8" in out


GiB = 2**30


def test_compare_groups_identical_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "compare", "llama-3-70b", "mistral-7b", "--machine", "h100,b200", "--batch", "64",
                       "--context", "32768")
    assert code == 0
    lines = err.strip().splitlines()
    # one line for the context past Llama 3's 8192 positions, naming both machines' rows
    beyond = [ln for ln in lines if "max_position_embeddings (8192)" in ln]
    assert len(beyond) == 1 and beyond[0].endswith("(llama-3-70b on h100-sxm, llama-3-70b on b200)")
    # Llama 3 70B at batch 64 × 32768 tokens: KV 64·32768·327,680 B = 640 GiB + 131 GiB of weights: TP 8
    # leaves 96 GiB a device over H100's 72 GiB usable (TP 8 × PP 2: 16 devices), under B200's 162 (8);
    # Mistral 7B keeps a 4096-token window: 64·4096·131,072 B = 32 GiB + 13.5 GiB fits one H100 and one B200
    fit = [ln for ln in lines if "do not fit" in ln]
    assert len(fit) == 1 and "2 of 4 rows" in fit[0]
    assert "llama-3-70b on h100-sxm (16 devices), llama-3-70b on b200 (8 devices)" in fit[0]
    assert len(lines) == 2


def test_models_lists_every_preset(capsys: pytest.CaptureFixture[str], wide: None) -> None:
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0
    rows = {r["id"]: r for r in json.loads(out)}
    assert sorted(rows) == preset_names() and len(rows) == 28  # 26 + minimax-m3, qwen3-next-80b-a3b (issue 22)
    # Qwen3-Next-80B-A3B: full_attention_interval 4 over 48 layers: 36 Gated DeltaNet, 12 gated full attention
    assert rows["qwen3-next-80b-a3b"]["layer_kinds"] == "36 Gated DeltaNet + 12 gated full attention + 48 MoE"
    # DeepSeek-V4-Flash's compress_ratios: 2 window-only layers, 21 CSA at 4 (top-512), 20 HCA at 128; mHC on all;
    # its MTP layer (compress_ratios' 44th entry), in memory only
    assert rows["deepseek-v4-flash"]["layer_kinds"] == (
        "2 window 128 (K = V) + 21 window 128 + CSA 1/4 top-512 + 20 window 128 + HCA 1/128 + 43 mHC (4 streams) "
        "+ 43 MoE (3 hash-routed) + 1 MTP")
    # GLM-5: DSA on its 78 layers, 3 dense, 75 MoE, and its multi-token-prediction layer (in memory only)
    assert rows["glm-5"]["layer_kinds"] == "78 MLA + DSA top-2048 + 3 dense MLP + 75 MoE + 1 MTP"
    # Nemotron 3 Nano's hybrid_override_pattern MEMEM*E...: 23 M, 6 *, 23 E blocks
    assert rows["nemotron-3-nano"]["layer_kinds"] == "23 Mamba2 + 6 full attention (no RoPE) + 23 MoE"
    # Nemotron 3 Super's: 40 M, 8 *, 40 E blocks, its experts in a latent of 1024
    assert rows["nemotron-3-super"]["layer_kinds"] == "40 Mamba2 + 8 full attention (no RoPE) + 40 LatentMoE (1024)"
    llama = rows["llama-3-70b"]
    assert (llama["family"], llama["layers"], llama["attention"]) == ("llama", 80, "GQA 64/8")
    assert llama["params_total"] == 70_553_706_496  # Meta's "70B"
    assert rows["deepseek-v3"]["attention"] == "MLA 128 heads (latent 512 + 64)"  # kv_lora_rank + rope dims
    assert rows["mixtral-8x7b"]["experts"] == "2 of 8"
    assert rows["gemma-2-9b"]["attention"] == "GQA 16/8, window 4,096 on 21 of 42 layers"  # every other layer
    assert rows["gpt2"]["attention"] == "MHA 12"
    assert rows["llama-3-8b"]["default_dtypes"] == "bf16 / bf16 / bf16"
    code, text, _ = run(capsys, "models")
    assert code == 0 and all(f"│ {name} " in text for name in rows)


def test_prefill_warns_that_it_ignores_context(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "model", "llama-3-8b", "--phase", "prefill", "--prompt", "1024", "--context",
                         "8192", "--json")
    assert code == 0 and json.loads(out)["prompt"] == 1024
    assert err.strip().splitlines() == [
        "roofline: warning: --context 8192 ignored: a prefill step's length is its prompt (--prompt 1024); "
        "--context is decode's"]
    code, out, err = run(capsys, "model", "llama-3-8b", "--phase", "prefill", "--context", "8192")
    assert code == 2 and out == ""
    assert err.startswith("roofline: error: prefill takes --prompt") and "write --prompt 8192" in err


def main_help(capsys: pytest.CaptureFixture[str]) -> str:
    main(["model", "--help"])
    return capsys.readouterr().out


def test_model_help_says_what_prefill_does_with_context(capsys: pytest.CaptureFixture[str]) -> None:
    words = " ".join(main_help(capsys).split())
    assert "Prefill refuses it alone and warns that it ignores it beside --prompt." in words
    assert f"under {TIGHT_HEADROOM:.0%} of the usable memory free is reported as tight" in words


def test_model_reports_a_tight_fit(capsys: pytest.CaptureFixture[str], wide: None) -> None:
    # Llama 3 8B on one H100, batch 55 × 8192 tokens: KV 55·8192·131,072 B = 55 GiB, weights
    # 8.03e9 · 2 B = 15 GiB, workspace 13.9 MiB: 70 GiB of 0.9 · 80 = 72 GiB usable, 2.03 GiB (2.8%) left
    _, out, _ = run(capsys, "model", "llama-3-8b", "--batch", "55", "--context", "8192")
    assert "fits, tight (<5% headroom): 2.03 GiB (2.8%) left on one h100-sxm" in out
    _, out, _ = run(capsys, "model", "llama-3-8b", "--batch", "1", "--context", "8192")
    # batch 1: 1 GiB of KV; 72 − 15 − 1 − workspace = 56 GiB (78%) left
    assert re.search(r"fits, 56 GiB \(78%\) headroom on one h100-sxm", out)


def test_models_names_what_the_checkpoint_stores(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main
    assert main(["models", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    # DeepSeek-V3's config.json: quantization_config {quant_method: fp8, fmt: e4m3, weight_block_size: [128, 128]}
    assert rows["deepseek-v3"]["checkpoint_dtype"] == "fp8 e4m3"
    assert rows["llama-3-8b"]["checkpoint_dtype"] == "bfloat16"  # no quantization_config: its torch_dtype


def last_error_line(err: str, script_traceback: bool = False) -> str:
    """The one error line, last on stderr; no traceback but a traced script's own."""
    lines = [ln for ln in err.splitlines() if ln.startswith("roofline: error:")]
    assert len(lines) == 1 and lines[0] == err.rstrip("\n").splitlines()[-1], err
    assert script_traceback or "Traceback" not in err, err
    return lines[0]


# Llama 3 70B: 80 layers, 8 K/V heads of width 128; an H200: 989.4 TFLOP/s BF16 and 4.8 TB/s (its datasheet)
def test_h200_decode_at_32k_and_the_fp8_kv_cache(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "compare", "llama-3-70b", "--machine", "h200", "--batch", "64", "--context", "32768",
                       "--kv-dtype", "bf16,fp8", "--format", "json")
    assert code == 0
    bf16, fp8 = json.loads(out)
    assert bf16["kv_cache_bytes_per_token"] == 2 * 8 * 128 * 80 * 2  # 327,680 B = 320 KiB
    assert fp8["kv_cache_bytes_per_token"] == 2 * 8 * 128 * 80 * 1  # 163,840 B = 160 KiB
    assert bf16["ridge_flop_per_byte"] == pytest.approx(989.4e12 / 4.8e12)  # 206.1 FLOP/B
    # the attention kernel alone reads 64·32768·(2·8·128·2) B = 8.59 GB per layer; 80 layers at 4.8 TB/s
    # take 80 · 8.59e9 / 4.8e12 = 143 ms of the 173 ms step; FP8 halves that read
    assert bf16["time_s"] == pytest.approx(0.173, rel=0.01)
    assert fp8["time_s"] == pytest.approx(0.101, rel=0.01)
    # the seed's limit: 2·P/(L·KV) + 4·h·layers/KV with P = 69.50e9 multiplied parameters:
    # bf16: 2·69.50e9/(32768·327680) + 4·8192·80/327680 = 12.95 + 8 = 20.95; fp8 doubles both terms
    assert bf16["decode_limit_flop_per_byte"] == pytest.approx(20.95, abs=0.01)
    assert fp8["decode_limit_flop_per_byte"] == pytest.approx(2 * 20.95, abs=0.02)
    assert bf16["crossover_batch"] is None and fp8["crossover_batch"] is None  # both limits < 206


def test_a_huge_sweep_range_is_refused_before_it_is_built(capsys: pytest.CaptureFixture[str]) -> None:
    # before: 1:100000000:1 built 10^8 analyses and the process was killed for memory (exit 137)
    code, _, err = run(capsys, "sweep", "gpt2", "--batch", "1:100000000:1")
    assert code == 2
    assert "is 100,000,000 values; at most 10,000" in last_error_line(err)  # (10^8 − 1)//1 + 1 values
    # 1000 batches × 1000 contexts = 1,000,000 rows, each axis under the cap
    code, _, err = run(capsys, "sweep", "gpt2", "--batch", "1:1000:1", "--context", "1:1000:1")
    assert code == 2 and "1,000,000 rows" in last_error_line(err)


def test_a_backwards_range_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    # before: the specific message was swallowed (RooflineError is a ValueError) into "cannot read '256:1'"
    code, _, err = run(capsys, "sweep", "gpt2", "--batch", "256:1")
    assert code == 2 and "range '256:1' must go from a positive start up to its end" in last_error_line(err)


def test_set_of_a_field_the_model_does_not_read_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    # before: --set num_kv_heads=4 was ignored and the table still showed 8 K/V heads (128 KiB/token)
    code, _, err = run(capsys, "model", "llama-3-8b", "--set", "num_kv_heads=4")
    assert code == 2
    line = last_error_line(err)
    assert "--set num_kv_heads" in line and "did you mean num_key_value_heads" in line
    # GPT-2 names its heads n_head: another architecture's field name does nothing to it
    code, _, err = run(capsys, "model", "gpt2", "--set", "num_key_value_heads=4")
    assert code == 2 and "--set num_key_value_heads" in last_error_line(err)
    # a field it does read works: Llama 3 8B with 4 K/V heads: 2·4·128·32·2 = 65,536 B per token
    code, out, _ = run(capsys, "model", "llama-3-8b", "--set", "num_key_value_heads=4", "--json")
    assert code == 0 and json.loads(out)["kv_cache_bytes_per_token"] == 2 * 4 * 128 * 32 * 2


def test_sweep_chart_names_the_series_it_draws(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    import roofline.report.outputs as outputs

    calls: list[dict[str, Any]] = []

    def fake_sweep(rows: Any, x: str, *, png: Any = None, svg: Any = None, ridge: float, limit: Any = None,
                   title: str = "") -> list[Path]:
        calls.append({"n": len(rows), "title": title, "limit": limit})
        return [Path(png)]

    monkeypatch.setattr(outputs, "write_sweep_chart", fake_sweep)
    # before: 18 rows swept (9 batches × 2 KV dtypes), 9 drawn, no word about the FP8 ones
    code, _, err = run(capsys, "sweep", "llama-3-70b", "--machine", "h200", "--batch", "1:256", "--context", "32768",
                       "--kv-dtype", "bf16,fp8", "--png", str(tmp_path / "s.png"))
    assert code == 0
    assert calls[0]["n"] == 9  # 1, 2, 4, ..., 256
    assert "the chart shows 9 of the 18 rows" in err and "KV bf16" in err
    assert "KV bf16" in calls[0]["title"]
    assert calls[0]["limit"] == pytest.approx(20.95, abs=0.01)  # the bf16 series' limit, as in the journey above


def test_default_length_stays_within_the_trained_maximum(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.cli import main

    # GPT-2 was trained on 1024 positions; the default 2048 is capped there instead of warning
    assert main(["model", "gpt2", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["context"] == 1024 and "warning" not in err
    # asked for explicitly, a longer context is analysed with a warning
    assert main(["model", "gpt2", "--context", "2048", "--json"]) == 0
    assert "beyond gpt2's max_position_embeddings (1024)" in capsys.readouterr().err


def test_experts_hit_on_a_dense_model_warns(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    assert main(["model", "gpt2", "--experts-hit", "3", "--context", "64"]) == 0
    assert "--experts-hit ignored: gpt2 is not a mixture of experts" in capsys.readouterr().err
