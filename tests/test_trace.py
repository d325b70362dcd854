"""The tracer: a PyTorch program recorded onto the same graph the analytic models produce.

Includes the small Llama-style model of the acceptance test (also used by bench/gpu_check.py):
Meta's reference structure (RMSNorm, RoPE as a complex multiply, GQA through
scaled_dot_product_attention, SwiGLU), q/k/v in one projection and gate/up in one, as the analytic
model fuses them, and logits for the last token only, as generation computes them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import roofline  # noqa: E402
from roofline.graph import UNFUSED  # noqa: E402
from roofline.tracing import FORMULAS, OpCall, Registry, bytes_by_kind, flop_by_kind, trace_call  # noqa: E402

pytestmark = pytest.mark.torch


# --- the small Llama-style model --------------------------------------------------------------------

@dataclass(frozen=True)
class TinyConfig:
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 160
    vocab: int = 256
    max_seq: int = 128

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def hf_config(self) -> dict[str, Any]:
        """The same shape as a Hugging Face config.json (model_type llama)."""
        return {"model_type": "llama", "hidden_size": self.hidden, "num_hidden_layers": self.layers,
                "num_attention_heads": self.heads, "num_key_value_heads": self.kv_heads,
                "intermediate_size": self.intermediate, "vocab_size": self.vocab,
                "max_position_embeddings": self.max_seq, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Any) -> Any:
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-5)


def rope(x: Any, freqs: Any) -> Any:
    """x [B, T, H, d] rotated by freqs [T, d/2] (complex), as Llama's reference code does it: in fp32
    (a no-op for an fp32 model; a cast each way for bf16), then back to x's dtype."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs[None, :, None, :]).flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, c: TinyConfig) -> None:
        super().__init__()
        self.c = c
        self.qkv = nn.Linear(c.hidden, (c.heads + 2 * c.kv_heads) * c.head_dim, bias=False)
        self.o = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)

    def forward(self, x: Any, freqs: Any) -> Any:
        c = self.c
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split([c.heads * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim], -1)
        q = rope(q.view(b, t, c.heads, c.head_dim), freqs)
        k = rope(k.view(b, t, c.kv_heads, c.head_dim), freqs)
        v = v.view(b, t, c.kv_heads, c.head_dim)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True, enable_gqa=True)
        return self.o(y.transpose(1, 2).reshape(b, t, c.heads * c.head_dim))


class MLP(nn.Module):
    def __init__(self, c: TinyConfig) -> None:
        super().__init__()
        self.gate_up = nn.Linear(c.hidden, 2 * c.intermediate, bias=False)
        self.down = nn.Linear(c.intermediate, c.hidden, bias=False)

    def forward(self, x: Any) -> Any:
        gate, up = self.gate_up(x).chunk(2, -1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, c: TinyConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(c.hidden)
        self.attn = Attention(c)
        self.mlp_norm = RMSNorm(c.hidden)
        self.mlp = MLP(c)

    def forward(self, x: Any, freqs: Any) -> Any:
        h = x + self.attn(self.attn_norm(x), freqs)
        return h + self.mlp(self.mlp_norm(h))


class TinyLlama(nn.Module):
    def __init__(self, c: TinyConfig) -> None:
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden)
        self.lm_head = nn.Linear(c.hidden, c.vocab, bias=False)
        inv = 1.0 / (10000.0 ** (torch.arange(0, c.head_dim, 2).float() / c.head_dim))
        angles = torch.outer(torch.arange(c.max_seq).float(), inv)
        self.register_buffer("freqs", torch.polar(torch.ones_like(angles), angles), persistent=False)

    def forward(self, ids: Any) -> Any:
        x = self.embed(ids)
        freqs = self.freqs[: ids.shape[1]]
        for layer in self.layers:
            x = layer(x, freqs)
        return self.lm_head(self.norm(x[:, -1, :]))  # logits of the last token only


def tiny_llama(c: TinyConfig | None = None, dtype: Any = None, device: str = "cpu") -> TinyLlama:
    torch.manual_seed(0)
    model = TinyLlama(c or TinyConfig()).to(device)
    if dtype is not None:
        for p in model.parameters():
            p.data = p.data.to(dtype)
    return model.eval()


# how the traced ops' kinds map onto the analytic model's kernel kinds: eager PyTorch runs SwiGLU as
# silu then a multiply (4 + 1 = FLOP_PER_ELEMENT["swiglu"] = 5 per element), and Llama's RoPE is a
# complex multiply (6 real FLOPs per complex element = 3 per real element = FLOP_PER_ELEMENT["rope"])
FAMILY = {"silu": "swiglu", "mul": "swiglu", "complex_mul": "rope"}


def families(by_kind: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind, value in by_kind.items():
        key = FAMILY.get(kind, kind)
        out[key] = out.get(key, 0.0) + value
    return out


def test_tiny_llama_traced_flops_match_the_analytic_model_per_kind() -> None:
    """Acceptance: FLOPs within 1% per kernel kind of roofline.models' graph of the same config;
    bytes equal for the kernels that run alike (no fusion difference)."""
    from roofline.models import build_graph, config_from_dict, model_dtypes

    c = TinyConfig()
    model = tiny_llama(c)
    batch, seq = 2, 32
    ids = torch.randint(0, c.vocab, (batch, seq))
    with roofline.trace(model) as t:
        model(ids)
    analytic = build_graph(config_from_dict(c.hf_config(), "tiny-llama"), "prefill", batch, seq,
                           model_dtypes("fp32", "fp32"))
    traced_flop = families(flop_by_kind(t.graph))
    model_flop = flop_by_kind(analytic.graph)
    assert set(traced_flop) == set(model_flop)
    for kind, expected in model_flop.items():
        assert traced_flop[kind] == pytest.approx(expected, rel=0.01, abs=0.5), kind
    # spot check the matmuls by hand: per layer qkv 2·N·h·(H+2G)·d, o 2·N·h·h, gate_up 2·N·h·2f,
    # down 2·N·f·h; lm_head on the last token of each sequence: 2·B·h·V
    n, h, f, hd = batch * seq, c.hidden, c.intermediate, c.head_dim
    per_layer = 2 * n * h * (c.heads + 2 * c.kv_heads) * hd + 2 * n * h * h + 2 * n * h * 2 * f + 2 * n * f * h
    assert traced_flop["matmul"] == c.layers * per_layer + 2 * batch * h * c.vocab
    # causal attention: pairs = N(N+1)/2 per (batch, head): 2·B·H·pairs·d per layer for q·kᵀ
    assert traced_flop["attention_qk"] == c.layers * 2 * batch * c.heads * (seq * (seq + 1) // 2) * hd
    # bytes: the kernels that run the same way in both (GEMMs, norms, residual adds, fused attention)
    traced_bytes = bytes_by_kind(t.graph, t.plan)
    model_bytes = bytes_by_kind(analytic.graph, analytic.plan("flash"))
    for kind in ("matmul", "rmsnorm", "add", "attention_qk+softmax+attention_pv"):
        assert traced_bytes[kind] == model_bytes[kind], kind
    assert not t.unknown


def test_bf16_model_traces_with_the_same_flops() -> None:
    """In bf16 the rotary embedding casts to fp32 and back (two copies, no FLOPs): FLOPs per kind
    are those of the fp32 model, bytes of the bf16 GEMMs half those of the fp32 ones."""
    c = TinyConfig(layers=1)
    ids = torch.randint(0, c.vocab, (1, 16))
    flops, gemm_bytes = [], []
    for dtype in (torch.float32, torch.bfloat16):
        model = tiny_llama(c, dtype=dtype)
        with roofline.trace(model) as t:
            model(ids)
        flops.append({k: v for k, v in families(flop_by_kind(t.graph)).items() if v})
        assert not t.unknown
        gemm_bytes.append(bytes_by_kind(t.graph, t.plan)["matmul"])
        if dtype == torch.bfloat16:
            assert any(op.kind == "copy" for op in t.ops)
    assert flops[0] == flops[1]
    assert gemm_bytes[1] == gemm_bytes[0] / 2


def test_linear_and_matmul_flops_are_two_m_n_k() -> None:
    x = torch.randn(3, 4, 5)
    w = torch.randn(7, 5)
    t = trace_call(lambda: (F.linear(x, w), x[0] @ w.t()))
    ops = [op for op in t.ops if op.kind == "matmul"]
    assert [op.flop for op in ops] == [2 * 12 * 7 * 5, 2 * 4 * 7 * 5]  # rows M = 3·4, then M = 4
    # bytes: x, w and the output, fp32: (3·4·5 + 7·5 + 3·4·7)·4
    assert t.graph.kernels()[0].bytes == (60 + 35 + 84) * 4


def test_views_move_nothing_and_are_skipped() -> None:
    x = torch.randn(8, 16)
    t = trace_call(lambda: (x.t().reshape(-1, 8).unsqueeze(0), x.view(16, 8)[:4]))
    assert t.ops == []


def test_in_place_op_reads_and_writes_a_new_version() -> None:
    x = torch.randn(1024)
    t = trace_call(lambda: x.add_(1.0))
    (k,) = t.graph.kernels()
    assert [r.name for r in k.reads] == ["input1"] and [w.name for w in k.writes] == ["input1@1"]
    assert k.bytes == 2 * 1024 * 4  # read once, written once


def test_out_argument_is_written_not_read() -> None:
    a, b, c = torch.randn(256), torch.randn(256), torch.empty(256)
    t = trace_call(lambda: torch.add(a, b, out=c))
    assert t.graph.kernels()[0].bytes == 3 * 256 * 4  # a and b read, c written


def test_conv2d_flops() -> None:
    conv = nn.Conv2d(3, 8, 3, padding=1)
    img = torch.randn(2, 3, 10, 10)
    t = trace_call(lambda: conv(img), conv)
    (op,) = [o for o in t.ops if o.kind == "conv"]
    assert op.flop == 2 * (2 * 8 * 10 * 10) * 3 * 3 * 3  # 2 · output elements · C_in · 3·3
    assert op.name == "conv2d"  # a module with no children is the top level: no path prefix


def test_embedding_reads_only_the_rows_it_gathers() -> None:
    emb = nn.Embedding(1000, 32)
    ids = torch.randint(0, 1000, (4, 5))
    t = trace_call(lambda: emb(ids), emb)
    (k,) = t.graph.kernels()
    assert k.bytes == 20 * 32 * 4 + 20 * 8 + 20 * 32 * 4  # rows read, int64 ids read, rows written
    assert any(r.role == "weight" for r in k.reads)


def test_fused_attention_is_one_kernel_and_unfused_writes_the_scores() -> None:
    b, h, n, d = 1, 2, 64, 16
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))
    t = trace_call(lambda: F.scaled_dot_product_attention(q, k, v))
    assert [op.kind for op in t.ops] == ["attention_qk", "softmax", "attention_pv"]
    assert t.flop == 4 * b * h * n * n * d + 5 * b * h * n * n  # 4·N²·d per head (two matmuls), + softmax
    (fused,) = t.graph.kernels(t.plan)
    assert fused.bytes == 4 * b * h * n * d * 4  # only q, k, v and the output cross memory
    naive = t.graph.kernels(UNFUSED)
    assert sum(x.bytes for x in naive) == 4 * b * h * n * d * 4 + 4 * b * h * n * n * 4  # + scores, probs twice


def test_math_backend_attention_is_traced_unfused() -> None:
    """With only the math backend allowed, attention writes its scores: the trace's plan keeps the
    three ops apart (inference mode), and with autograd on it decomposes into matmuls and a softmax."""
    q, k, v = (torch.randn(1, 1, 8, 4) for _ in range(3))
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        t = trace_call(lambda: F.scaled_dot_product_attention(q, k, v))
        assert [op.kind for op in t.ops] == ["attention_qk", "softmax", "attention_pv"] and t.groups == {}
        t = trace_call(lambda: F.scaled_dot_product_attention(q, k, v), inference=False)
    kinds = [op.kind for op in t.ops]
    assert "softmax" in kinds and kinds.count("matmul") == 2
    assert t.groups == {}


def test_complex_multiply_is_six_flops_per_element() -> None:
    a = torch.randn(10, dtype=torch.complex64)
    b = torch.randn(10, dtype=torch.complex64)
    t = trace_call(lambda: a * b)
    assert t.ops[0].kind == "complex_mul" and t.ops[0].flop == 6 * 10


def test_autograd_mode_traces_decomposed_ops_with_the_same_flops() -> None:
    lin = nn.Linear(16, 32, bias=False)
    x = torch.randn(4, 16)
    t = trace_call(lambda: lin(x), lin, inference=False)
    assert [op.flop for op in t.ops if op.kind == "matmul"] == [2 * 4 * 32 * 16]


def test_timed_trace_attaches_measured_times() -> None:
    x = torch.randn(256, 256)
    t = trace_call(lambda: x @ x, time_ops=True)
    a = t.analyze("h100")
    (p,) = a.placements
    assert p.measured_time_s is not None and 0 < p.measured_time_s < 5.0


def test_trace_command_runs_a_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import sys, torch\nn = int(sys.argv[1])\nx = torch.randn(n, n)\ny = (x @ x).relu()\n")
    assert main(["trace", "--machine", "h100", "--json", str(script), "64"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["flop_by_kind"]["matmul"] == 2 * 64**3
    assert out["flop_by_kind"]["relu"] == 64 * 64  # FLOP_PER_ELEMENT["relu"] = 1
    assert math.isclose(out["totals"]["flop"], 2 * 64**3 + 64 * 64)
    assert out["unknown_ops"] == {}  # randn is a fill: bytes written, no FLOPs


def test_trace_fusion_option_and_its_old_spelling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import torch\nx = torch.randn(32, 32)\ny = (x @ x).relu()\n")
    assert main(["trace", "--fusion", "none", "--json", str(script)]) == 0
    assert json.loads(capsys.readouterr().out)["plan"] == "none"
    assert main(["trace", "--plan", "none", "--json", str(script)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["plan"] == "none"
    assert "--plan none is now spelled --fusion none" in captured.err


def test_trace_command_missing_script_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "/nonexistent/prog.py"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no script" in err


def test_detached_tensor_keeps_its_data_flow() -> None:
    """detach shares storage: the op after it reads the tensor the op before it wrote."""
    x = torch.randn(64)
    t = trace_call(lambda: (x.exp().detach() * 2.0), inference=False)
    exp_op, mul_op = t.ops
    assert mul_op.inputs[0].name == exp_op.outputs[0].name


def test_cpu_flash_variant_with_autograd_counts_causal_pairs() -> None:
    """With autograd on, CPU attention dispatches aten::_scaled_dot_product_flash_attention_for_cpu
    directly: still one fused kernel, causal pairs N(N+1)/2 = 16·17/2 = 136 per head."""
    q, k, v = (torch.randn(1, 2, 16, 8, requires_grad=True) for _ in range(3))
    t = trace_call(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), inference=False)
    qk = next(op for op in t.ops if op.kind == "attention_qk")
    assert qk.flop == 2 * 1 * 2 * 136 * 8
    assert len(t.groups) == 1 and "flash_attention_for_cpu" in next(iter(t.groups))


def test_traced_graph_works_with_tables_and_plans() -> None:
    from roofline.report.text.tables import placements_table

    model = tiny_llama(TinyConfig(layers=1))
    with roofline.trace(model) as t:
        model(torch.randint(0, 256, (1, 8)))
    traced = t.analyze("h100")
    unfused = t.analyze("h100", plan=UNFUSED)
    assert traced.flop == unfused.flop  # same ops, same FLOPs under any plan
    assert traced.bytes < unfused.bytes  # fused attention keeps the scores on chip
    assert "layers.0.attn.qkv.linear" in placements_table(traced.placements)


def test_an_op_the_tracer_fails_on_is_reported_not_fatal() -> None:
    """The traced program always runs to the end; an op the tracer cannot count is named in errors."""
    def broken(call: OpCall) -> list[Any]:
        raise ValueError("no formula today")

    mine = Registry()  # every formula but relu's, and a relu that fails
    for name, f in FORMULAS.items():
        if name != "relu":
            mine.register(name)(f)
    mine.register("relu")(broken)
    x = torch.randn(8)
    t = trace_call(lambda: (x.relu() + 1.0), formulas=mine)
    assert [op.kind for op in t.ops] == ["add"]
    assert list(t.errors) == ["aten.relu.default"] and "no formula today" in t.errors["aten.relu.default"]


def test_unnamed_dtypes_are_stored_by_width() -> None:
    x = torch.ones(16, dtype=torch.uint16)
    t = trace_call(lambda: x.clone())
    assert t.graph.kernels()[0].bytes == 2 * 16 * 2  # two bytes per element, read once, written once


def test_torch_dtypes_resolve_through_the_one_dtype_table() -> None:
    """Every torch dtype is stored at its element size; a name roofline.dtypes knows (ALIASES or
    DTYPES) at that size is that dtype, so there is no second torch -> roofline table to drift."""
    from types import SimpleNamespace

    from roofline.dtypes import ALIASES, DTYPES, get_dtype
    from roofline.tracing.recorder import dtype_of

    seen = 0
    for name in dir(torch):
        dt = getattr(torch, name)
        if not isinstance(dt, torch.dtype) or str(dt) != f"torch.{name}":
            continue
        ours = dtype_of(SimpleNamespace(dtype=dt))  # what the tracer reads of a tensor
        assert ours.bytes_per_element == dt.itemsize, name
        if name in ALIASES or name in DTYPES:
            known = get_dtype(name)
            assert ours == known or known.bytes_per_element != dt.itemsize, name
        seen += 1
    assert seen > 20
    # the names the tracer met before this table was shared: each still the same dtype
    for name, expected in (("float64", "fp64"), ("float32", "fp32"), ("bfloat16", "bf16"), ("float16", "fp16"),
                           ("float8_e4m3fn", "fp8_e4m3"), ("float8_e5m2", "fp8_e5m2"), ("uint8", "int8"),
                           ("int64", "int64"), ("bool", "bool"), ("complex64", "complex64")):
        assert dtype_of(SimpleNamespace(dtype=getattr(torch, name))).name == expected


def test_formula_argument_positions_match_the_schemas() -> None:
    """Formulas read arguments by schema position (as a profiler's Input Dims lists them); these are
    the positions they read, checked against this PyTorch's schemas."""
    from roofline.tracing.registry import ATTENTION, CONVOLUTION

    def names(op: str) -> list[str]:
        return [a.name for a in getattr(torch.ops.aten, op).default._schema.arguments]

    for op, (mask_at, causal_at) in ATTENTION.items():
        args = names(op)
        assert args[:3] == ["query", "key", "value"], op
        assert args[causal_at] in ("is_causal", "custom_mask_type"), op
        assert mask_at is None or args[mask_at] in ("attn_mask", "attn_bias"), op
    for op in CONVOLUTION:
        assert names(op)[:2] == ["input", "weight"] and names(op)[6] == "transposed"
    for op in ("addmm", "addmv", "_addmm_activation", "baddbmm", "addbmm"):
        assert names(op)[0] == "self" and names(op)[1] in ("mat1", "mat", "batch1"), op
    assert names("linear")[:2] == ["input", "weight"] and names("embedding")[:2] == ["weight", "indices"]


def test_the_facade_trace_is_the_rooms_tracer() -> None:
    """roofline.trace (the facade's function) and roofline.tracing (the room) never share a name."""
    import roofline.tracing
    import roofline.tracing.registry as registry

    x = torch.randn(4, 4)
    with roofline.trace() as t:
        x @ x
    assert t.flop == 2 * 4**3 and roofline.tracing.trace_call(lambda: x @ x).flop == t.flop  # 2·4·4·4 FLOP
    assert registry.FORMULAS is roofline.tracing.FORMULAS


NET_SCRIPT = """import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Embedding(32, 16), torch.nn.Linear(16, 32))
print("the script's own line")
net(torch.randint(0, 32, (1, 4)))
"""


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


def test_trace_json_with_a_chart_is_only_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.py"
    script.write_text(NET_SCRIPT, encoding="utf-8")
    png = tmp_path / "t.png"
    assert main(["trace", "--machine", "h100", "--json", "--png", str(png), str(script)]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)  # "wrote t.png" goes to stderr, after the JSON would have broken it
    assert f"wrote {png}" in err and png.stat().st_size > 0
    # the fp32 linear on the FP32 cores: its dtype is fp32, its ridge 67e12 / 3.35e12 = 20 FLOP/B
    (lin,) = [k for k in d["kernels"] if k["name"].endswith("1.linear")]
    assert lin["dtype"] == "fp32" and lin["ridge_flop_per_byte"] == pytest.approx(20.0)


def test_trace_of_a_failing_script_is_its_traceback_then_one_error_line(capsys: pytest.CaptureFixture[str],
                                                                        tmp_path: Path) -> None:
    from test_cli_model import last_error_line

    script = tmp_path / "broken.py"
    script.write_text("import torch\nx = torch.ones(2, 2) @ torch.ones(2, 2)\n1 / 0\n")
    # before: exit 1 and a traceback through cli.py, click, the tracer and runpy
    code = main(["trace", str(script)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    line = last_error_line(err, script_traceback=True)
    assert line == f"roofline: error: {script} raised ZeroDivisionError: division by zero"
    assert f'File "{script}", line 3' in err  # the script's own frame is kept ...
    roofline_frames = ("cli.py", "recorder.py", "script.py", "runpy")
    assert not [f for f in roofline_frames if f in err]  # ... roofline's are not
