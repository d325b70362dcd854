"""One run, one set of numbers (issue 24 item 9): the terminal, the CSV, the PNG and the page of one
command agree, and where two figures differ the output says why."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from test_hostile_sweep import _cuda_trace

FIXTURES = Path(__file__).parent / "fixtures"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def test_a_collectives_intensity_is_one_figure_in_table_csv_and_page(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # llama-3-8b at TP 2, batch 1: each all-reduce sums S = 4096 (hidden) × 2 B (bf16) = 8192 B; a ring
    # sends 2(n−1)/n · S = 8192 B on the link and adds (n−1)/n · 4096 = 2048 elements: I = 2048 / 8192 =
    # 0.25 FLOP per link byte (it was 0.125 per DRAM byte in the table and CSV, 0.25 on the page)
    out, _ = run(capsys, "model", "llama-3-8b", "--machine", "dgx-h100", "--tp", "2", "--csv", str(tmp_path / "k.csv"),
                 "--html", str(tmp_path / "k.html"))
    row = next(line for line in out.splitlines() if "attn.all_reduce" in line)
    assert "0.25 FLOP/B" in row, row
    assert "FLOP/B of a communication kernel: per byte on its link" in out
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO((tmp_path / "k.csv").read_text()))}
    ar = rows["attn.all_reduce"]
    assert float(ar["link_bytes"]) == 2 * (2 - 1) / 2 * 4096 * 2
    assert float(ar["flop_per_link_byte"]) == 2048 / 8192
    assert float(ar["flop_per_byte"]) == 2048 / 16384  # per DRAM byte, kept beside it, named apart
    page = (tmp_path / "k.html").read_text()
    assert re.search(r'"name":"attn\.all_reduce".*?"x":0\.25,', page)
    assert rows["attn_norm"]["flop_per_link_byte"] == ""  # not a collective: no link figure


def _trace_with_an_unlaunched_kernel() -> dict[str, Any]:
    """One aten::mm 1024³ (fp16) launching a 20 µs kernel (the hostile sweep's trace), and a 5 µs NCCL
    kernel no op launched."""
    doc: dict[str, Any] = _cuda_trace()
    doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 7,
                               "ts": 90.0, "dur": 5.0, "args": {"correlation": 99, "stream": 7, "device": 0}})
    return doc


def test_imports_chart_counts_the_kernels_its_table_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the NCCL kernel has a time and no FLOPs: listed on the chart, not drawn (was: left off, 23 of 24)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(_trace_with_an_unlaunched_kernel()))
    out, _ = run(capsys, "import", str(trace), "--machine", "h100", "--html", str(tmp_path / "t.html"),
                 "--png", str(tmp_path / "t.png"))
    assert "over 2 kernels" in out
    page = (tmp_path / "t.html").read_text()
    assert re.findall(r'"n":(\d+),"name":"([^"]+)"', page) == [("1", "mm"), ("2", "ncclKernel_AllReduce")]


def test_the_two_decode_limits_say_why_they_differ(capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "model", "llama-3-8b", "--batch", "64")
    line = next(x for x in out.splitlines() if x.startswith("decode limit as the batch grows"))
    formula, graph = (float(v) for v in re.findall(r"([\d.]+) FLOP/B", line))
    assert graph < formula  # the graph's limit also counts each sequence's activations: it is lower
    assert "the matmuls and the KV cache alone" in line
    assert "lower because each sequence also moves its activations and logits" in line


def _attainable_line(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, dict[str, Any]]:
    out, _ = run(capsys, "kernel", *argv)
    line = next(x for x in out.splitlines() if x.startswith("attainable"))
    d = json.loads(run(capsys, "kernel", *argv, "--json")[0])
    return line, d


def test_attainable_is_a_share_of_the_peak_its_flops_run_at(capsys: pytest.CaptureFixture[str]) -> None:
    # flash attention on a B200 is limited by its exponentials: the share is of the matrix + vector peak its
    # FLOPs run at, below 100% since the exp time sets the floor (was: "100.19% of the bf16 matrix peak")
    line, d = _attainable_line(capsys, "attention", "--seq", "8192", "--head-dim", "128", "--machine", "b200")
    share = d["attainable_flop_per_s"] / d["peak_flop_per_s"]
    assert share < 1 and d["bound"] == "exp"
    assert f"{share:.2%} of the" in line and "its FLOPs run at; FLOPs / the exp time (the floor)" in line
    # a softmax of 8192 × 8192 bf16 on an H100: 5 FLOPs an element over 2 + 2 bytes read and written:
    # I = 5 / 4 = 1.25 FLOP/B, min(67 TFLOP/s, 3.35 TB/s × 1.25) = 4.1875 TFLOP/s = 6.25% of the FP32
    # vector peak (67 TFLOP/s) it runs at: the formula named gives the share printed
    line, _ = _attainable_line(capsys, "softmax", "8192", "8192", "--machine", "h100")
    assert "6.25% of the 67 TFLOP/s its FLOPs run at; min(peak, BW × I)" in line, line
    # a bf16 matmul keeps its words: 100% of the bf16 peak (README's example)
    line, _ = _attainable_line(capsys, "matmul", "4096", "4096", "4096", "--machine", "h100")
    assert "100.00% of the bf16 peak; min(peak, BW × I)" in line


def test_the_sweeps_devices_column_says_it_counts_devices_to_fit(capsys: pytest.CaptureFixture[str]) -> None:
    # llama-3-70b's 141 GB of bf16 weights need 2 H100s (80 GiB each) while the times are for one device
    out, _ = run(capsys, "sweep", "llama-3-70b", "--batch", "1,64", "--machine", "h100")
    assert "devices to fit" in out
    assert "time floor and tokens/s: each row's own split (one device without --tp, --pp or --dp)" in out
    out, _ = run(capsys, "sweep", "gpt2", "--batch", "1,8")
    assert "devices to fit" in out and "each row's own split" not in out  # it fits: nothing to explain


def test_an_ncu_kernel_above_its_roof_is_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the fixture's 4096×4096×8192 bf16 GEMM (137.4 GFLOP) timed at 120 µs: its floor on an H100 is
    # 137.4e9 / 989.4e12 = 138.9 µs, so it ran at 138.9 / 120 = 116% of the roof: flagged, as bench flags
    lines = [x for x in (FIXTURES / "ncu_raw_small.csv").read_text().splitlines() if not x.startswith("#")]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    rows[2][rows[0].index("gpu__time_duration.sum")] = "120.00"
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path = tmp_path / "k.csv"
    path.write_text(buf.getvalue())
    out, _ = run(capsys, "import", str(path), "--machine", "h100")
    gemm = next(x for x in out.splitlines() if "sm90_xmma_gemm" in x)
    assert "116%" in gemm and "ABOVE THE ROOF" in gemm and "at compute" not in gemm
    assert "! 1 kernel measured ABOVE the roof (sm90_xmma_gemm" in out


TRACED = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.SiLU(), torch.nn.Linear(256, 64)).to(torch.bfloat16)
with torch.inference_mode():
    y = model(torch.randn(8, 64, dtype=torch.bfloat16))
    z = y.float() * 2.0 + 1.0
"""


@pytest.mark.torch
def test_trace_labels_fp32_elementwise_fp32_and_leaves_out_weight_init(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.py"
    script.write_text(TRACED)
    out, _ = run(capsys, "trace", "--machine", "h100", "--json", str(script))
    d = json.loads(out)
    dtypes = {k["name"]: k["dtype"] for k in d["kernels"]}
    assert dtypes["mul"] == "fp32" and dtypes["add"] == "fp32"  # y.float() * 2 + 1: fp32 (was: "bf16")
    assert dtypes["0.linear"] == "bf16"
    # nn.Linear's constructor fills weight and bias with uniform_ (kaiming_uniform_): 2 layers × 2 = 4 calls,
    # outside any forward: left out of the step and counted
    assert not [k for k in dtypes if k.startswith(("uniform_", "normal_"))]
    assert d["left_out_initialisation"] == {"uniform_": 2 * 2}
