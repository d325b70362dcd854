"""Issue 11, a second look: what a user of `roofline trace`, `profile`, `import` and `diff` runs into.

- An fp32 matmul on a GPU without an fp32 matrix peak sits on the FP32 cores: its placement, and the
  trace JSON, say fp32 (its own roof: ridge 67 / 3.35 = 20 FLOP/B on an H100), not the headline bf16.
- A CPU run without --machine is placed on the default GPU only as a stand-in, said in one warning
  line with the way to a real roof; a measured CPU machine file places it on the CPU.
- `profile --json` and `diff SCRIPT --json` print only JSON: the script's own prints go to stderr.
- `diff` names the routed experts a tiny Hugging Face Mixtral hit, with its arithmetic; and for each of
  the four tiny Hugging Face families (Llama, Qwen2, Mixtral, DeepSeek-V3) the prefill differs from the
  analytic model by exactly what it names (matmul FLOPs), attention and expert FLOPs equal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _errors(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    out, err = capsys.readouterr()
    return out, [line for line in err.splitlines() if line.strip() and "USDT" not in line]


# --- the roofs: fp32 matmuls on their own roof, a CPU on a CPU's -------------------------------------------


def test_fp32_matmul_on_the_fp32_cores_is_reported_as_fp32() -> None:
    from roofline.tracing import trace

    a32, b16 = torch.randn(64, 64), torch.randn(64, 64, dtype=torch.bfloat16)
    with trace() as t:
        torch.mm(a32, a32)
        torch.mm(b16, b16)
    fp32, bf16 = t.analyze("h100").placements
    d = fp32.to_dict()
    assert d["dtype"] == "fp32" and bf16.to_dict()["dtype"] == "bf16"
    # its roof is the FP32 cores': 67 TFLOP/s, ridge 67e12 / 3.35e12 = 20 FLOP/B (bf16's is 989.4 / 3.35 = 295.3)
    assert d["peak_flop_per_s"] == 67e12
    assert d["ridge_flop_per_byte"] == pytest.approx(67e12 / 3.35e12)
    assert bf16.ridge_flop_per_byte == pytest.approx(989.4e12 / 3.35e12)
    # % of peak against its own roof: a @ a reads a once and writes c, intensity 2·64³ / (2·64·64·4 B) =
    # 16 FLOP/B, under the ridge of 20: attainable 16 · 3.35e12 = 53.6 TFLOP/s = 80% of 67 TFLOP/s
    assert d["fraction_of_peak"] == pytest.approx(2 * 64**3 / (2 * 64 * 64 * 4) * 3.35e12 / 67e12)
    # the derivation names that roof, never an fp32 matrix peak the H100 does not have
    from roofline.explain import explain_placement

    text = explain_placement(fp32)
    assert "(the fp32 vector roof)" in text and "80.000% of the fp32 vector peak" in text
    assert "fp32 matrix peak" not in text.replace("lists no fp32 matrix peak", "")


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
    out, errs = _errors(capsys)
    d = json.loads(out)
    assert d["machine"] == "h100-sxm" and d["machine_stand_in"] is True
    assert len(errs) == 1 and errs[0].startswith("roofline: warning: CPU op times placed on NVIDIA H100")
    assert "a stand-in" in errs[0] and "roofline measure --save cpu.toml" in errs[0]
    # the same machine named on purpose is a what-if: no warning
    assert main(["import", str(cpu_trace), "--json", "--machine", "h100"]) == 0
    out, errs = _errors(capsys)
    assert json.loads(out)["machine_stand_in"] is False and errs == []


def test_cpu_trace_on_a_measured_cpu_file_sits_on_the_cpu_roof(cpu_trace: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    machine = tmp_path / "cpu.toml"
    machine.write_text(CPU_TOML, encoding="utf-8")
    assert main(["import", str(cpu_trace), "--json", "--machine", str(machine)]) == 0
    out, errs = _errors(capsys)
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


# --- stdout is the report's -----------------------------------------------------------------------------

SCRIPT = """import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Embedding(32, 16), torch.nn.Linear(16, 32))
print("the script's own line")
net(torch.randint(0, 32, (1, 4)))
"""


def test_profile_json_is_only_json_the_script_prints_on_stderr(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT, encoding="utf-8")
    assert main(["profile", "--machine", "h100", "--json", str(script)]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)  # nothing but the JSON
    assert "the script's own line" in err
    # the linear: 2·4·16·32 = 4,096 FLOPs, named by its module path
    assert [k["flop"] for k in d["kernels"] if k["name"].endswith("1.linear")] == [2 * 4 * 16 * 32]


def test_trace_json_with_a_chart_is_only_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT, encoding="utf-8")
    png = tmp_path / "t.png"
    assert main(["trace", "--machine", "h100", "--json", "--png", str(png), str(script)]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)  # "wrote t.png" goes to stderr, after the JSON would have broken it
    assert f"wrote {png}" in err and png.stat().st_size > 0
    # the fp32 linear on the FP32 cores: its dtype is fp32, its ridge 67e12 / 3.35e12 = 20 FLOP/B
    (lin,) = [k for k in d["kernels"] if k["name"].endswith("1.linear")]
    assert lin["dtype"] == "fp32" and lin["ridge_flop_per_byte"] == pytest.approx(20.0)


def test_diff_of_a_script_json_is_only_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers", minversion="5")
    script = tmp_path / "m.py"
    script.write_text(_MIXTRAL_SCRIPT.format(cfg=MIXTRAL), encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(_mixtral_config().to_dict()), encoding="utf-8")
    assert main(["diff", str(script), "--config", str(config), "--json"]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert "mixtral prints" in err
    assert "routed experts hit" in [x["name"] for x in d["differences"]]


# --- diff: the routed experts a step hit ----------------------------------------------------------------

MIXTRAL = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False, num_local_experts=4,
               num_experts_per_tok=2)

_MIXTRAL_SCRIPT = """import torch, transformers
torch.manual_seed(0)
m = transformers.AutoModelForCausalLM.from_config(transformers.MixtralConfig(**{cfg!r})).eval()
for layer in m.model.layers:
    layer.mlp.gate.weight.data.zero_()  # every token's router logits equal: all pick the same 2 experts
print("mixtral prints")
with torch.inference_mode():
    m(torch.randint(0, 256, (1, 16)))
"""


def _mixtral_config() -> Any:
    import transformers

    return transformers.MixtralConfig(**MIXTRAL)


def test_diff_names_the_routed_experts_a_mixtral_step_hit(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers", minversion="5")
    from roofline.diff import diff_program
    from roofline.models import load_config
    from roofline.tracing import trace

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(_mixtral_config()).eval()
    picks: list[set[int]] = []
    for layer in model.model.layers:
        layer.mlp.gate.weight.data.zero_()  # equal router logits: every token picks the same top-2
        layer.mlp.experts.register_forward_pre_hook(
            lambda _m, args: picks.append(set(args[1].flatten().tolist())))  # (hidden, top_k_index, weights)
    model.config.save_pretrained(tmp_path)
    with torch.inference_mode(), trace(model) as t:
        model(torch.randint(0, 256, (1, 16)))
    assert [len(p) for p in picks] == [2, 2]  # 2 distinct experts per layer, read from the router's own picks
    cfg = load_config(str(tmp_path))
    d = diff_program(t, cfg)
    (x,) = [x for x in d.differences if x.name == "routed experts hit"]
    # uniform routing expects E·(1 − (1 − k/E)^N) = 4·(1 − (1/2)^16) = 3.99994, i.e. all 4 experts
    assert d.model.experts_hit == 4
    # (read − expected)·3·h·f·bytes·layers = (2 − 4)·3·64·128·4·2 = −393,216 B: fewer weights read
    assert x.extra_bytes == (2 - 4) * 3 * 64 * 128 * 4 * 2
    assert x.extra_flop == 0.0
    assert "2 of 4 experts" in x.detail and "less" in x.detail


# --- the four Hugging Face families against the analytic model: every difference named --------------------

@pytest.mark.parametrize("name", ["llama", "qwen2", "mixtral", "deepseek-v3"])
def test_hf_prefill_against_the_analytic_model_differs_only_by_what_diff_names(name: str, tmp_path: Path) -> None:
    """A 16-token prefill of each tiny model (tests/test_trace_hf.py's configs) beside roofline.models' graph
    of its own config.json: the matmul FLOPs differ by exactly the named logits difference, the attention
    and expert FLOPs are equal, and the weight bytes differ by the rotary inv_freq buffer alone."""
    transformers = pytest.importorskip("transformers", minversion="5")
    from roofline.diff import diff_program
    from roofline.models import load_config
    from roofline.tracing import trace
    from roofline.tracing.analysis import flop_by_kind
    from roofline.vocab import Role
    from test_trace_hf import CASES, PROMPT, VOCAB

    (case,) = [c for c in CASES if c.name == name]
    torch.manual_seed(0)
    hf = case.config()
    model = transformers.AutoModelForCausalLM.from_config(hf).eval()
    hf.save_pretrained(tmp_path)
    with torch.inference_mode(), trace(model) as t:
        model(torch.randint(0, VOCAB, (1, PROMPT)))
    d = diff_program(t, load_config(str(tmp_path)))
    named = {x.name: x for x in d.differences}
    logits = named["logits for every position instead of the last"]
    assert logits.extra_flop == 2 * (PROMPT - 1) * 64 * VOCAB  # 2·(N − B)·h·V = 2·15·64·256 = 491,520
    matmul = next(r for r in d.rows if r.family == "matmul")
    assert matmul.program_flop - matmul.model_flop == logits.extra_flop
    assert sum(x.extra_flop for x in d.differences) == logits.extra_flop  # the other differences are bytes
    ran, modelled = flop_by_kind(t.graph), flop_by_kind(d.model.graph)
    for kind in ("attention_qk", "attention_pv", "grouped_matmul"):
        assert ran.get(kind) == modelled.get(kind), kind
    # weights: every parameter the step reads, once; the model's graph has no rotary table, the program
    # reads inv_freq (head_dim_rope / 2 fp32 values: 8 for d = 16, 4 for DeepSeek's rope dim 8)
    read = {x.name: x.bytes for op in t.ops for x in op.inputs if x.role is Role.WEIGHT}
    counted = {x.name: x.bytes * op.count for op in d.model.graph.ops for x in op.inputs if x.role is Role.WEIGHT}
    inv_freq = model.model.rotary_emb.inv_freq.numel() * 4
    assert sum(read.values()) - sum(counted.values()) == inv_freq



def test_diff_of_a_program_without_an_embedding_names_the_options_that_exist(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "lin.py"
    script.write_text("import torch\ntorch.nn.Linear(64, 64)(torch.randn(4, 64))\n", encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "vocab_size": 256, "max_position_embeddings": 128}), encoding="utf-8")
    assert main(["diff", str(script), "--config", str(config)]) == 2
    _, errs = _errors(capsys)
    assert len(errs) == 1 and errs[0].startswith("roofline: error: the program has no embedding gather")
    assert "--batch and --seq" in errs[0]  # diff's own options (it has no --prompt or --context)
