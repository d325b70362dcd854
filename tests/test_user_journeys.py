"""A first-time user's journeys through the CLI, and the warts they found, each pinned by a test.

Every number below is written as the arithmetic that gives it: Llama 3 70B has 80 layers, 8 K/V
heads of width 128 (KV cache 2·8·128·80·2 = 327,680 B per token); an H200 has 989.4 TFLOP/s BF16
and 4.8 TB/s; an H100 989.4 TFLOP/s, 67 TFLOP/s FP32 vector and 3.35 TB/s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str, script_traceback: bool = False) -> str:
    """The one error line, last on stderr; no traceback but a traced script's own."""
    lines = [ln for ln in err.splitlines() if ln.startswith("roofline: error:")]
    assert len(lines) == 1 and lines[0] == err.rstrip("\n").splitlines()[-1], err
    assert script_traceback or "Traceback" not in err, err
    return lines[0]


# --- the journey: decode on an H200 at batch 64, 32k context, and what an FP8 KV cache buys -------

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


# --- a failed command never replaces a good file --------------------------------------------------

def test_a_bad_last_output_path_leaves_the_earlier_files_alone(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    good_csv, good_png = tmp_path / "keep.csv", tmp_path / "keep.png"
    good_csv.write_text("GOOD\n")
    good_png.write_text("GOOD\n")
    missing = tmp_path / "no-such-folder" / "x.html"
    # before: keep.csv and keep.png were replaced, then the command failed on --html
    code, out, err = run(capsys, "model", "gpt2", "--context", "512", "--csv", str(good_csv), "--png", str(good_png),
                         "--html", str(missing))
    assert code == 2 and out == ""
    assert "(--html)" in one_error_line(err) and "does not exist" in err
    assert good_csv.read_text() == "GOOD\n" and good_png.read_text() == "GOOD\n"
    code, _, err = run(capsys, "kernel", "matmul", "64", "64", "64", "--png", str(good_png), "--html", str(missing))
    assert code == 2 and good_png.read_text() == "GOOD\n"
    code, _, err = run(capsys, "sweep", "gpt2", "--batch", "1:4", "--csv", str(good_csv), "--png", str(missing))
    assert code == 2 and good_csv.read_text() == "GOOD\n"
    code, _, err = run(capsys, "machines", "h100", "--png", str(good_png), "--svg", str(missing))
    assert code == 2 and good_png.read_text() == "GOOD\n"


def test_two_outputs_naming_one_file_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    same = tmp_path / "chart.png"
    # before: the PNG was written, then the SVG replaced it under the .png name, exit 0
    code, _, err = run(capsys, "kernel", "matmul", "64", "64", "64", "--png", str(same), "--svg", str(same))
    assert code == 2 and "--png and --svg name the same file" in one_error_line(err)
    assert not same.exists()
    code, _, err = run(capsys, "compare", "gpt2", "--csv", str(same), "--output", str(tmp_path / "." / "chart.png"))
    assert code == 2 and "name the same file" in one_error_line(err)


# --- sweeps too large to build -------------------------------------------------------------------

def test_a_huge_sweep_range_is_refused_before_it_is_built(capsys: pytest.CaptureFixture[str]) -> None:
    # before: 1:100000000:1 built 10^8 analyses and the process was killed for memory (exit 137)
    code, _, err = run(capsys, "sweep", "gpt2", "--batch", "1:100000000:1")
    assert code == 2
    assert "is 100,000,000 values; at most 10,000" in one_error_line(err)  # (10^8 − 1)//1 + 1 values
    # 1000 batches × 1000 contexts = 1,000,000 rows, each axis under the cap
    code, _, err = run(capsys, "sweep", "gpt2", "--batch", "1:1000:1", "--context", "1:1000:1")
    assert code == 2 and "1,000,000 rows" in one_error_line(err)


def test_a_backwards_range_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    # before: the specific message was swallowed (RooflineError is a ValueError) into "cannot read '256:1'"
    code, _, err = run(capsys, "sweep", "gpt2", "--batch", "256:1")
    assert code == 2 and "range '256:1' must go from a positive start up to its end" in one_error_line(err)


# --- --set of a field no parser reads ---------------------------------------------------------------

def test_set_of_a_field_the_model_does_not_read_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    # before: --set num_kv_heads=4 was ignored and the table still showed 8 K/V heads (128 KiB/token)
    code, _, err = run(capsys, "model", "llama-3-8b", "--set", "num_kv_heads=4")
    assert code == 2
    line = one_error_line(err)
    assert "--set num_kv_heads" in line and "did you mean num_key_value_heads" in line
    # GPT-2 names its heads n_head: another architecture's field name does nothing to it
    code, _, err = run(capsys, "model", "gpt2", "--set", "num_key_value_heads=4")
    assert code == 2 and "--set num_key_value_heads" in one_error_line(err)
    # a field it does read works: Llama 3 8B with 4 K/V heads: 2·4·128·32·2 = 65,536 B per token
    code, out, _ = run(capsys, "model", "llama-3-8b", "--set", "num_key_value_heads=4", "--json")
    assert code == 0 and json.loads(out)["kv_cache_bytes_per_token"] == 2 * 4 * 128 * 32 * 2


# --- conflicting options -------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [("kernel", "matmul", "64", "64", "64"), ("model", "gpt2"), ("machine", "h100")])
def test_json_and_explain_together_is_an_error(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    # before: --explain was dropped without a word and JSON printed
    code, out, err = run(capsys, *argv, "--json", "--explain")
    assert code == 2 and out == ""
    assert "--json and --explain" in one_error_line(err)


# --- the sweep chart draws one series; it says which ---------------------------------------------

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


# --- the label of a kernel's own ridge -------------------------------------------------------------------

def test_mixed_unit_kernel_ridge_is_not_called_vector(capsys: pytest.CaptureFixture[str]) -> None:
    # fused attention: 4·N²·d = 4·8192²·128 = 34.36 GFLOP on the matrix units, softmax 5·N² = 0.336 GFLOP on
    # the vector units; before, its blended ridge was labelled "(vector units)"
    code, out, _ = run(capsys, "kernel", "attention", "--seq", "8192", "--head-dim", "128")
    assert code == 0
    assert "(matrix and vector units, each at its own peak)" in out and "(vector units)" not in out
    # RMSNorm is all vector work: its ridge is 67 TFLOP/s / 3.35 TB/s = 20 FLOP/B, on the vector units
    code, out, _ = run(capsys, "kernel", "rmsnorm", "8192", "8192")
    assert code == 0 and "20 FLOP/B" in out and "(vector units)" in out


# --- a traced script that raises ------------------------------------------------------------------------

def test_trace_of_a_failing_script_is_its_traceback_then_one_error_line(capsys: pytest.CaptureFixture[str],
                                                                        tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "broken.py"
    script.write_text("import torch\nx = torch.ones(2, 2) @ torch.ones(2, 2)\n1 / 0\n")
    # before: exit 1 and a traceback through cli.py, click, the tracer and runpy
    code, out, err = run(capsys, "trace", str(script))
    assert code == 2 and out == ""
    line = one_error_line(err, script_traceback=True)
    assert line == f"roofline: error: {script} raised ZeroDivisionError: division by zero"
    assert f'File "{script}", line 3' in err  # the script's own frame is kept ...
    roofline_frames = ("cli.py", "recorder.py", "script.py", "runpy")
    assert not [f for f in roofline_frames if f in err]  # ... roofline's are not


def test_an_output_named_for_another_format_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    assert main(["kernel", "add", "1000", "--png", str(tmp_path / "chart.jpg")]) == 2
    err = capsys.readouterr().err
    assert "--png writes PNG, but" in err and "chart.png" in err and err.count("\n") == 1
    assert not (tmp_path / "chart.jpg").exists()


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
