"""The measured roofline of any program: `roofline profile`, `roofline import` (Kineto JSON, ncu CSV) and
`roofline diff`, on traces these tests record with torch.profiler (a tiny Hugging Face Llama, CPU) and on
a CSV in Nsight Compute's raw format (tests/fixtures/ncu_raw_small.csv)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.tracing.ncu import load_ncu, parse_ncu_csv

FIXTURES = Path(__file__).parent / "fixtures"
NCU = FIXTURES / "ncu_raw_small.csv"

# the tiny Llama every torch test here runs: hidden 64, 2 layers, 4 heads / 2 KV heads (d = 16), MLP 128,
# vocabulary 256
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128}

SCRIPT = """import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
m = LlamaForCausalLM(LlamaConfig(**{tiny!r})).eval()
seq = int(sys.argv[1]) if len(sys.argv) > 1 else 16
with torch.no_grad():
    m(torch.randint(0, 256, (1, seq)))
"""


def _out_and_errors(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    """stdout, and stderr's lines without the profiler's own USDT notices."""
    out, err = capsys.readouterr()
    return out, [line for line in err.splitlines() if line.strip() and "USDT" not in line]


def _errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return _out_and_errors(capsys)[1]


# --- Nsight Compute raw CSV ------------------------------------------------------------------------------

def test_ncu_raw_csv_reads_time_bytes_per_level_and_flops() -> None:
    gemm, add, softmax = load_ncu(NCU)
    assert gemm.time_s == pytest.approx(180.50e-6)  # "180.50" in a usecond column
    # dram read + write, Mbyte (decimal): 67.11 + 33.55 MB; L2 402.65 MB, L1 "1,610.61" MB (thousands separator)
    assert gemm.bytes_by_level["dram"] == pytest.approx((67.11 + 33.55) * 1e6)
    assert gemm.bytes_by_level["l2"] == pytest.approx(402.65e6)
    assert gemm.bytes_by_level["l1"] == pytest.approx(1610.61e6)
    # tensor-pipe ops of a 4096³ GEMM: 2·4096³ = 137,438,953,472; tensor instructions stay counters, not FLOPs
    assert gemm.flop == 2 * 4096**3
    assert gemm.counters["sm__inst_executed_pipe_tensor.sum"] == 16_777_216
    # the add: one fadd per element of 8192²; the softmax: fadd + 2·ffma = 33,554,432 + 2·16,777,216
    assert add.flop == 8192 * 8192
    assert softmax.flop == 33_554_432 + 2 * 16_777_216
    assert add.name.startswith("void at::native::vectorized_elementwise_kernel<4")


def test_ncu_import_places_each_kernel_by_its_measured_counters(capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path) -> None:
    out = tmp_path / "k.csv"
    assert main(["import", str(NCU), "--machine", "h100", "--json", "--csv", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    gemm = d["kernels"][0]
    assert gemm["measured_time_s"] == pytest.approx(180.5e-6)
    # achieved = 2·4096³ FLOP / 180.5 µs = 761 TFLOP/s, under the H100's 989.4 TFLOP/s bf16 roof
    assert gemm["achieved_flop_per_s"] == pytest.approx(2 * 4096**3 / 180.5e-6)
    assert 0.5 < gemm["fraction_of_roof"] < 1.0
    assert gemm["verdict"].startswith("at compute")
    add = d["kernels"][1]
    # bytes measured 268.44 + 134.22 MB in 130.2 µs: 3.09 TB/s, at the 3.35 TB/s roof
    assert add["achieved_bytes_per_s"] == pytest.approx((268.44 + 134.22) * 1e6 / 130.2e-6)
    assert add["verdict"].startswith("at bandwidth")
    assert add["measured_l2_bytes"] == pytest.approx(402.65e6)
    assert out.read_text().splitlines()[0].startswith("name,kind,module,measured_time_s")


def test_ncu_csv_missing_a_metric_is_one_line_and_writes_nothing(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    import csv
    import io

    rows = list(csv.reader(io.StringIO("\n".join(line for line in NCU.read_text().splitlines()
                                                 if not line.startswith("#")))))
    drop = rows[0].index("gpu__time_duration.sum")
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL).writerows([c for i, c in enumerate(r) if i != drop] for r in rows)
    bad = tmp_path / "no_time.csv"
    bad.write_text(buf.getvalue())
    out = tmp_path / "out.csv"
    assert main(["import", str(bad), "--csv", str(out)]) == 2
    errs = _errors(capsys)
    assert len(errs) == 1 and errs[0].startswith("roofline: error:")
    assert "gpu__time_duration.sum" in errs[0] and "ncu --csv --page raw" in errs[0]
    assert not out.exists()


def test_ncu_csv_row_cut_short_is_an_error() -> None:
    text = NCU.read_text()
    cut = text[: text.rindex('"45.10"')]  # the last row stops mid-way
    with pytest.raises(Exception, match="columns where the header has"):
        parse_ncu_csv(cut)


# --- verdicts ---------------------------------------------------------------------------------------------

def _placed(flop: float, nbytes: float, seconds: float) -> Any:
    from roofline.graph import simple_cost
    from roofline.placement import place

    return place(simple_cost(flop, nbytes), "h100", "bf16").with_measured(seconds)


def test_verdicts_follow_the_stated_rules() -> None:
    from roofline.tracing.profile import LATENCY_S, verdict

    # 8192² bf16 add: 3·2·8192² bytes at 3.35 TB/s = 120 µs floor; measured 130 µs -> 92% of the roof
    at_bw = _placed(8192**2, 3 * 2 * 8192**2, 130e-6)
    assert verdict(at_bw).label == "at bandwidth"
    assert "fuse" in verdict(at_bw).advice and "precision" in verdict(at_bw).advice
    # 4096³ GEMM: 2·4096³ / 989.4e12 = 139 µs floor; measured 1 ms -> 14% of the roof, intensity 1365 FLOP/B
    slow_gemm = _placed(2 * 4096**3, 3 * 2 * 4096**2, 1e-3)
    assert verdict(slow_gemm).label == "under compute"
    assert "tiling" in verdict(slow_gemm).advice
    # a kernel of 5 µs is under LATENCY_S = 10 µs, whatever it did
    assert verdict(_placed(1e6, 1e6, 0.5 * LATENCY_S)).label == "latency-bound"
    # a 200 µs kernel that waited 300 µs for its launch: the gap is longer than the kernel
    assert verdict(slow_gemm, gap_s=2e-3).label == "latency-bound"
    assert "CUDA graphs" in verdict(slow_gemm, gap_s=2e-3).advice


# --- Kineto traces recorded here ----------------------------------------------------------------------

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _tiny_llama() -> Any:
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY)).eval()


def _record(path: Path, model: Any, ids: Any, shapes: bool = True) -> None:
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], record_shapes=shapes) as prof:
        model(ids)
    prof.export_chrome_trace(str(path))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A trace of one prefill forward (batch 1, 16 tokens) recorded with torch.profiler, and the tracer's
    record of the same forward."""
    from roofline.tracing import trace

    model = _tiny_llama()
    ids = torch.randint(0, 256, (1, 16))
    path = tmp_path_factory.mktemp("kineto") / "tiny.json"
    _record(path, model, ids)
    with trace(model) as t:
        model(ids)
    return path, t


def test_kineto_import_counts_the_same_flops_as_the_tracer(recorded: tuple[Path, Any]) -> None:
    from roofline.tracing import flop_by_kind
    from roofline.tracing.kineto import load_kineto

    path, traced = recorded
    p = load_kineto(path)
    assert p.device == "cpu" and p.shapes
    ours, theirs = flop_by_kind(p.trace.graph), flop_by_kind(traced.graph)
    for kind in ("matmul", "attention_qk", "attention_pv", "softmax", "silu", "add", "mul"):
        assert ours[kind] == theirs[kind], kind
    # matmuls by hand, N = 16 tokens, h = 64, H·d = 64, G·d = 32, f = 128, V = 256, 2 layers:
    # q 2·N·h·64 + k, v 2·(2·N·h·32) + o 2·N·64·h + gate, up 2·(2·N·h·f) + down 2·N·f·h; LM head on all 16 rows
    n = 16
    per_layer = 2 * n * 64 * 64 + 2 * (2 * n * 64 * 32) + 2 * n * 64 * 64 + 2 * (2 * n * 64 * 128) + 2 * n * 128 * 64
    assert ours["matmul"] == 2 * per_layer + 2 * n * 64 * 256
    # causal attention: 2·B·H·pairs·d, pairs = 16·17/2 = 136, per layer
    assert ours["attention_qk"] == 2 * 2 * 1 * 4 * 136 * 16


def test_kineto_import_times_every_kernel_within_the_recorded_span(recorded: tuple[Path, Any]) -> None:
    from roofline.tracing.kineto import load_kineto

    path, _ = recorded
    p = load_kineto(path)
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    span_s = (max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)) * 1e-6
    assert p.trace.times_s and all(0 < s <= span_s for s in p.trace.times_s.values())
    assert p.measured_time_s <= span_s  # ops run one after another: their sum fits in the span


def test_import_command_replots_without_running_anything(recorded: tuple[Path, Any], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = recorded
    csv, png, html = tmp_path / "k.csv", tmp_path / "k.png", tmp_path / "k.html"
    assert main(["import", str(path), "--machine", "h100", "--csv", str(csv), "--png", str(png),
                 "--html", str(html)]) == 0
    text = capsys.readouterr().out
    assert "CPU ops" in text and "time by verdict" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<html" in html.read_text().lower()
    import csv as csv_module

    rows = list(csv_module.DictReader(csv.open()))
    assert len(rows) > 10 and all(float(r["measured_time_s"]) > 0 for r in rows)


def test_trace_without_shapes_is_placed_by_time_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.tracing.kineto import load_kineto

    path = tmp_path / "noshapes.json"
    _record(path, _tiny_llama(), torch.randint(0, 256, (1, 8)), shapes=False)
    p = load_kineto(path)
    assert not p.shapes and p.trace.flop == 0
    assert all(not op.inputs and not op.outputs for op in p.trace.ops)
    assert main(["import", str(path), "--machine", "h100"]) == 0
    out = capsys.readouterr().out
    assert "time-only placement" in out and "time only" in out
    # nothing to draw: a chart asked of a time-only trace is one clear line, and nothing is written
    png = tmp_path / "t.png"
    assert main(["import", str(path), "--png", str(png)]) == 2
    assert _errors(capsys)[0].startswith("roofline: error: no kernel has both FLOPs and bytes")
    assert not png.exists()


@pytest.mark.parametrize("content, words", [
    ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1', "not valid JSON"),
    ('{"schemaVersion": 1, "events": []}', "not a Chrome/Kineto trace"),
    ('[1, 2, 3]', "not a Chrome/Kineto trace"),
    ('{"traceEvents": []}', "no operator or kernel events"),
])
def test_bad_trace_json_is_one_line_exit_2_nothing_written(content: str, words: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    out = tmp_path / "out.csv"
    assert main(["import", str(bad), "--csv", str(out)]) == 2
    errs = _errors(capsys)
    assert len(errs) == 1 and errs[0].startswith("roofline: error:") and words in errs[0]
    assert not out.exists()


def test_truncated_real_trace_is_refused(recorded: tuple[Path, Any], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = recorded
    cut = tmp_path / "cut.json"
    cut.write_text(path.read_text()[: len(path.read_text()) // 2])
    assert main(["import", str(cut)]) == 2
    assert "truncated" in _errors(capsys)[0]


# --- a CUDA trace's shape, written out by hand (no GPU here) --------------------------------------------

def _cuda_trace() -> dict[str, Any]:
    """One aten::mm 1024×1024×1024 (fp16) launching one kernel of 20 µs, launched 30 µs after the
    previous kernel (an add of 5 µs) ended on the same stream."""
    def op(name: str, ts: float, dur: float, dims: list[Any], types: list[str]) -> dict[str, Any]:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * len(dims)}}

    def launch(ts: float, corr: int) -> dict[str, Any]:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                "dur": 2.0, "args": {"correlation": corr}}

    def kernel(name: str, ts: float, dur: float, corr: int) -> dict[str, Any]:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"correlation": corr, "stream": 7, "device": 0}}

    return {"traceEvents": [
        op("aten::add", 0.0, 10.0, [[1024, 1024], [1024, 1024], []], ["c10::Half", "c10::Half", "Scalar"]),
        launch(5.0, 1), kernel("vectorized_elementwise_kernel<add>", 20.0, 5.0, 1),
        op("aten::mm", 40.0, 10.0, [[1024, 1024], [1024, 1024]], ["c10::Half", "c10::Half"]),
        launch(45.0, 2), kernel("sm80_xmma_gemm_f16f16_f16f32", 55.0, 20.0, 2),
        kernel("ncclKernel_AllReduce", 100.0, 3.0, 99),  # launched by nothing recorded
    ]}


def test_cuda_trace_times_kernels_and_their_launch_gaps() -> None:
    from roofline.tracing.kineto import parse_kineto

    p = parse_kineto(_cuda_trace(), "synthetic.json")
    assert p.device == "cuda"
    assert p.trace.times_s["mm"] == pytest.approx(20e-6)  # the kernel's 20 µs, not the CPU op's 10
    # the gemm started at 55 µs; the add's kernel ended at 20 + 5 = 25 µs: 30 µs idle on stream 7
    assert p.gaps_s["mm"] == pytest.approx(30e-6)
    assert p.trace.graph.op("mm").flop == 2 * 1024**3
    # the NCCL kernel no recorded op launched: kept, time only
    assert p.trace.times_s["ncclKernel_AllReduce"] == pytest.approx(3e-6)
    a = p.trace.analyze("h100", "fp16")
    from roofline.tracing.profile import verdict

    mm = next(x for x in a.placements if x.name == "mm")
    assert verdict(mm, p.gaps_s["mm"]).label == "latency-bound"  # waited 30 µs to run 20


def test_ncu_rows_join_the_trace_kernels_so_measured_and_predicted_bytes_stand_side_by_side() -> None:
    from roofline.tracing.kineto import parse_kineto
    from roofline.tracing.ncu import attach_ncu

    p = parse_kineto(_cuda_trace(), "synthetic.json")
    header = ('"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","dram__bytes_write.sum"\n'
              '"","","nsecond","byte","byte"\n')
    rows = ('"0","vectorized_elementwise_kernel<add>","4,800","4,194,304","2,097,152"\n'
            '"1","sm80_xmma_gemm_f16f16_f16f32","19,500","6,291,456","2,097,152"\n')
    assert attach_ncu(p, parse_ncu_csv(header + rows)) == 2
    # predicted mm bytes: A and B read, C written, 1024² fp16 each: 3·2·1024² = 6,291,456
    mm = p.trace.analyze("h100", "fp16").placements[1]
    assert mm.bytes == 3 * 2 * 1024**2
    assert p.measured_bytes["mm"]["dram"] == 6_291_456 + 2_097_152
    assert p.trace.times_s["mm"] == pytest.approx(19.5e-6)  # ncu's own time replaces the trace's


# --- diff against the analytic model -------------------------------------------------------------------

def test_diff_names_logits_for_every_position_with_the_exact_extra_flops(recorded: tuple[Path, Any],
                                                                         tmp_path: Path) -> None:
    from roofline.diff import diff_program
    from roofline.models import config_from_dict
    from roofline.tracing.kineto import load_kineto

    path, traced = recorded
    cfg = config_from_dict({**TINY, "model_type": "llama"}, "tiny")
    for program in (traced, load_kineto(path).trace):
        d = diff_program(program, cfg)
        assert (d.model.shape.batch, d.model.shape.seq) == (1, 16)
        named = {x.name: x for x in d.differences}
        logits = named["logits for every position instead of the last"]
        # HF's forward projects all S = 16 positions; prefill needs the last: 2·(S−1)·hidden·vocab
        assert logits.extra_flop == 2 * (16 - 1) * 64 * 256
        # q, k, v as three GEMMs (Llama's q_proj/k_proj/v_proj): same FLOPs, the activation read 3 times
        assert named["unfused q/k/v GEMMs"].extra_flop == 0
        assert named["unfused q/k/v GEMMs"].extra_bytes == 2 * 2 * 16 * 64 * 4  # 2·L·N·h·fp32
        assert "unfused gate/up GEMMs" in named
        matmul = next(r for r in d.rows if r.family == "matmul")
        assert matmul.program_flop - matmul.model_flop == logits.extra_flop
    # the model run as the program runs it: logits for all positions, no logits difference left
    from dataclasses import replace

    d = diff_program(traced, replace(cfg, logits="all"))
    assert "logits for every position instead of the last" not in {x.name for x in d.differences}
    assert next(r for r in d.rows if r.family == "matmul").program_flop == next(
        r for r in d.rows if r.family == "matmul").model_flop


def test_diff_command_on_a_trace_and_on_a_script(recorded: tuple[Path, Any], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = recorded
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**TINY, "model_type": "llama"}))
    assert main(["diff", str(path), "--config", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "logits for every position instead of the last" in out and "2·15·64·256" in out
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(tiny=TINY))
    assert main(["diff", str(script), "--config", str(folder), "--json", "8"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["seq"] == 8
    logits = next(x for x in d["differences"] if x["name"].startswith("logits"))
    assert logits["extra_flop"] == 2 * (8 - 1) * 64 * 256


# --- roofline profile -----------------------------------------------------------------------------------

def test_profile_command_runs_a_script_from_its_first_forward(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(tiny=TINY))
    saved, csv = tmp_path / "run.json", tmp_path / "run.csv"
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**TINY, "model_type": "llama"}))
    assert main(["profile", "--machine", "h100", "--json", "--save-trace", str(saved), "--csv", str(csv),
                 "--against", str(folder), str(script), "16"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["flop_agreement"] == 1.0  # the profile's shapes count exactly what the tracer saw
    names = [k["name"] for k in d["kernels"]]
    assert "model.layers.0.self_attn.q_proj.linear" in names  # named by the module that ran it
    # from the first forward: weight initialisation (normal_, uniform_) is not in the profile
    assert not any("normal" in n or "uniform" in n for n in names)
    assert all(k["measured_time_s"] > 0 for k in d["kernels"])
    assert any(x["name"].startswith("logits") for x in d["diff"]["differences"])
    # the saved trace re-plots with `roofline import`: the same FLOPs
    from roofline.tracing.kineto import load_kineto

    total = sum(k["flop"] for k in d["kernels"])
    assert load_kineto(saved).trace.flop == pytest.approx(total)
    assert csv.exists()


def test_profile_from_start_includes_construction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(tiny=TINY))
    assert main(["profile", "--from-start", "--json", "--top", "0", str(script), "4"]) == 0
    names = [k["name"] for k in json.loads(capsys.readouterr().out)["kernels"]]
    assert any(n.split(".")[-1].split("#")[0] in ("normal_", "uniform_", "normal", "uniform") for n in names)


def test_profile_script_without_a_forward_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "plain.py"
    script.write_text("import torch\nx = torch.ones(4) + 1\n")
    assert main(["profile", str(script)]) == 2
    errs = _errors(capsys)
    assert errs[-1].startswith("roofline: error:") and "--from-start" in errs[-1]


# --- the analytic model's new options ----------------------------------------------------------------------


CPU_TOML = """id = "review-cpu"
name = "Review CPU (measured)"
kind = "cpu"
measured = true

[peak.matrix]
source = "a test's figures"
fp32 = "400 GFLOP/s"

[memory.dram]
source = "a test's figures"
bandwidth = "40 GB/s"
capacity = "16 GiB"
"""


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A torch.profiler trace (CPU, shapes recorded) of one fp32 linear: x [32, 256] @ W [256, 512]."""
    from torch.profiler import ProfilerActivity, profile

    lin = torch.nn.Linear(256, 512, bias=False)
    x = torch.randn(32, 256)
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        lin(x)
    path = tmp_path_factory.mktemp("cpu") / "linear.json"
    prof.export_chrome_trace(str(path))
    return path


def test_cpu_trace_without_a_machine_says_the_roof_is_a_stand_in(cpu_trace: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(cpu_trace), "--json"]) == 0
    out, errs = _out_and_errors(capsys)
    d = json.loads(out)
    assert d["machine"] == "h100-sxm" and d["machine_stand_in"] is True
    assert len(errs) == 1 and errs[0].startswith("roofline: warning: CPU op times placed on NVIDIA H100")
    assert "a stand-in" in errs[0] and "roofline measure --save cpu.toml" in errs[0]
    # the same machine named on purpose is a what-if: no warning
    assert main(["import", str(cpu_trace), "--json", "--machine", "h100"]) == 0
    out, errs = _out_and_errors(capsys)
    assert json.loads(out)["machine_stand_in"] is False and errs == []


def test_cpu_trace_on_a_measured_cpu_file_sits_on_the_cpu_roof(cpu_trace: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    machine = tmp_path / "cpu.toml"
    machine.write_text(CPU_TOML, encoding="utf-8")
    assert main(["import", str(cpu_trace), "--json", "--machine", str(machine)]) == 0
    out, errs = _out_and_errors(capsys)
    d = json.loads(out)
    assert errs == [] and d["machine"] == "review-cpu" and d["machine_stand_in"] is False
    (mm,) = [k for k in d["kernels"] if k["kind"] == "matmul"]
    # 2·32·256·512 = 8,388,608 FLOPs; bytes x + W + y = (32·256 + 256·512 + 32·512)·4 = 622,592 B;
    # floor max(8,388,608 / 400e9, 622,592 / 40e9) = max(21.0 µs, 15.6 µs) = 21.0 µs
    assert mm["flop"] == 2 * 32 * 256 * 512
    assert mm["bytes"] == (32 * 256 + 256 * 512 + 32 * 512) * 4
    assert mm["time_s"] == pytest.approx(2 * 32 * 256 * 512 / 400e9)
    assert mm["fraction_of_roof"] == pytest.approx(mm["time_s"] / mm["measured_time_s"])
    # a CPU op's latency remedy is not CUDA graphs
    assert "CUDA graphs" not in " ".join(k["verdict"] for k in d["kernels"])


def test_profile_json_is_only_json_the_script_prints_on_stderr(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.py"
    from test_trace import NET_SCRIPT

    script.write_text(NET_SCRIPT, encoding="utf-8")
    assert main(["profile", "--machine", "h100", "--json", str(script)]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)  # nothing but the JSON
    assert "the script's own line" in err
    # the linear: 2·4·16·32 = 4,096 FLOPs, named by its module path
    assert [k["flop"] for k in d["kernels"] if k["name"].endswith("1.linear")] == [2 * 4 * 16 * 32]
