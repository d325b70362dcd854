"""The live recorder (roofline.tracing.recorder) on what real programs run: grouped matmuls (the MoE
experts path), in-place indexed writes charged for the rows they touch, one attention convention on
every path (the pairs the mask keeps), module paths in op and weight names, each matmul on its own
dtype's roof, the `roofline trace` report, and the overhead's hot spots (version counters, per-call
schema work) gone. Found by tracing Hugging Face transformers 5 models on CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.dtypes import get_dtype
from roofline.tracing import trace, trace_call
from roofline.vocab import Role, Unit

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


F = torch.nn.functional


def test_a_traced_grouped_mm_counts_every_row_and_reads_only_the_routed_experts() -> None:
    a = torch.randn(64, 512, dtype=torch.bfloat16)
    b = torch.randn(8, 512, 256, dtype=torch.bfloat16)
    offs = torch.arange(8, 65, 8, dtype=torch.int32)  # 8, 16, ..., 64: eight rows per group
    t = trace_call(lambda: torch._grouped_mm(a, b, offs=offs))
    assert t.flop == 2 * 64 * 512 * 256  # 16,777,216, where it was 0
    assert not t.unknown
    routed = torch.tensor([8, 8, 24, 24, 24, 24, 64, 64], dtype=torch.int32)  # groups 0, 2 and 6 have rows
    (op,) = trace_call(lambda: torch._grouped_mm(a, b, offs=routed)).ops
    assert op.flop == 2 * 64 * 512 * 256
    weight = next(x for x in op.inputs if x.shape[-2:] == (512, 256))
    assert weight.bytes == 3 * 512 * 256 * 2  # three experts' bf16 [512, 256]: 786,432 of 2,097,152 bytes


def test_index_copy_into_a_cache_charges_the_rows_it_writes() -> None:
    cache = torch.zeros(1, 2, 64, 16)  # [B, H_kv, max length, head dim]: a static KV cache
    new = torch.randn(1, 2, 1, 16)
    pos = torch.tensor([16])
    with trace() as t:
        cache.index_copy_(2, pos, new)
    (op,) = t.ops
    row = 1 * 2 * 1 * 16 * 4  # one position of two heads, fp32: 128 bytes
    assert sum(x.bytes for x in op.inputs) == row + 8  # the source and the int64 position, not the cache
    assert sum(x.bytes for x in op.outputs) == row  # the row written, not the 8,192-byte cache
    assert op.flop == 0


def test_index_add_and_scatter_add_read_and_write_the_rows_they_accumulate_into() -> None:
    dest, src, idx = torch.zeros(100, 8), torch.randn(3, 8), torch.tensor([1, 5, 7])
    at, values = torch.zeros(2, 8, dtype=torch.long), torch.randn(2, 8)
    with trace() as t:
        dest.index_add_(0, idx, src)
        dest.scatter_add_(0, at, values)
    add, scatter = t.ops
    assert add.flop == 3 * 8  # one add per element written
    assert sum(x.bytes for x in add.outputs) == 3 * 8 * 4  # 3 rows of 8 fp32, not 100
    assert sum(x.bytes for x in add.inputs) == 3 * 8 * 4 + 3 * 8 + 3 * 8 * 4  # source, index, rows read
    assert scatter.flop == 2 * 8  # one add per index element
    assert sum(x.bytes for x in scatter.outputs) == 2 * 8 * 4


def test_index_put_in_place_writes_the_indexed_rows() -> None:
    dest = torch.zeros(50, 4)
    with trace() as t:
        dest[torch.tensor([3, 9])] = torch.ones(2, 4)
    (op,) = [o for o in t.ops if o.kind == "index_put"]
    assert sum(x.bytes for x in op.outputs) == 2 * 4 * 4  # 2 rows of 4 fp32 (not 50 rows)


def _attention_flop(t: object) -> float:
    return sum(op.flop for op in t.ops if op.kind in ("attention_qk", "softmax", "attention_pv"))  # type: ignore[attr-defined]


def test_every_attention_path_counts_the_pairs_the_mask_keeps() -> None:
    """causal flag (flash on CPU), the math fallback (d ≠ dv), a boolean mask, eager attention with
    an additive mask: one count, the kept pairs, 2·d + 5 + 2·dv per pair per head."""
    b, h, n, d, dv = 1, 2, 8, 16, 8
    q, k = torch.randn(b, h, n, d), torch.randn(b, h, n, d)
    v, v_same = torch.randn(b, h, n, dv), torch.randn(b, h, n, d)
    pairs = n * (n + 1) // 2  # 36 of 64: query i sees keys 0..i
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    additive = torch.zeros(n, n).masked_fill(~keep, torch.finfo(torch.float32).min)

    def eager() -> object:
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d) + additive
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    paths = {
        "math fallback, causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "boolean mask": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
        "additive mask": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=additive),
        "eager": eager,
    }
    expected = b * h * pairs * (2 * d + 5 + 2 * dv)  # 2·36·(32 + 5 + 16) = 3,816
    for label, fn in paths.items():
        assert _attention_flop(trace_call(fn)) == expected, label
    flash = trace_call(lambda: F.scaled_dot_product_attention(q, k, v_same, is_causal=True))
    assert _attention_flop(flash) == b * h * pairs * (2 * d + 5 + 2 * d)  # 2·36·69 = 4,968, same rule


def test_eager_attention_without_a_mask_counts_every_pair_as_attention() -> None:
    q = torch.randn(1, 2, 4, 8)
    t = trace_call(lambda: torch.matmul(torch.softmax(q @ q.transpose(2, 3), dim=-1), q))
    assert [op.kind for op in t.ops if op.flop_by_unit.get(Unit.MATRIX)] == ["attention_qk", "attention_pv"]
    assert sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) for op in t.ops) == 2 * (2 * 2 * 4 * 4 * 8)  # full squares


def test_a_matmul_of_scores_not_softmaxed_stays_a_matmul() -> None:
    a = torch.randn(1, 2, 4, 4)
    t = trace_call(lambda: (a @ a) @ a)
    assert [op.kind for op in t.ops] == ["matmul", "matmul"]


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x: object) -> object:
        return self.down(F.silu(self.up(x)))


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([_Block(), _Block()])

    def forward(self, x: object) -> object:
        for layer in self.layers:
            x = layer(x)
        return x


def test_module_paths_name_ops_and_weights_without_the_module_handed_over() -> None:
    x = torch.randn(2, 16)
    with trace() as t:  # as trace_script runs: no module given, the hooks find the root
        net = _Net().eval()  # its weights initialized in the trace, before the module's path is known
        net(x)
    names = [op.name for op in t.ops]
    assert "layers.1.down.linear" in names
    weights = {i.name for op in t.ops for i in op.inputs if i.role is Role.WEIGHT}
    assert "layers.0.up.weight" in weights


def test_each_matmul_is_placed_on_its_own_dtype_roof() -> None:
    a32, b16 = torch.randn(64, 64), torch.randn(64, 64, dtype=torch.bfloat16)
    t = trace_call(lambda: (a32 @ a32, b16 @ b16))
    analysis = t.analyze("h100")
    fp32, bf16 = analysis.placements
    assert bf16.dtype.name == "bf16"
    # the H100 lists no fp32 matrix peak and TF32 is off by default: the FP32 cores, 67 TFLOP/s
    assert fp32.kernel is not None and fp32.kernel.ops[0].compute_dtype == get_dtype("fp32")
    assert fp32.cost.flop_by_unit == {Unit.VECTOR: 2 * 64 * 64 * 64}
    assert fp32.peak_by_unit[Unit.VECTOR] == 67e12
    # floor: max(compute 2·64³ / 67e12 = 7.8 ns, memory (a read once, c written) 2·16,384 B / 3.35e12 = 9.8 ns)
    assert fp32.time_s == pytest.approx(max(2 * 64**3 / 67e12, 2 * 64 * 64 * 4 / 3.35e12))
    assert bf16.peak_by_unit[Unit.MATRIX] == 989.4e12
    assert analysis.dtype.name == "bf16"
    # a dtype given puts both on its roof (a what-if), as before
    assert {p.dtype.name for p in t.analyze("h100", "bf16").placements} == {"bf16"}


SCRIPT = """
import torch
from torch import nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
print("the script's own line")
net(torch.randn(2, 8))
"""


def test_trace_json_stdout_is_only_json_and_keeps_module_paths(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT, encoding="utf-8")
    assert main(["trace", "--machine", "h100", "--json", str(script)]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)  # nothing but the JSON
    assert "the script's own line" in err
    assert d["machine"] == "h100-sxm" and d["machine_name"] == "NVIDIA H100 SXM5 80GB"
    assert "2.linear" in [k["name"] for k in d["kernels"]]  # nn.Sequential's third module
    assert d["roof_dtypes"] == {"fp32 (vector cores)": 2 * 2 * 8 * 8 + 2 * 2 * 8 * 4}  # the two fp32 linears
    assert "pairs the mask keeps" in d["conventions"]["attention"]


def test_trace_text_names_the_machine_the_roofs_and_the_attention_convention(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "a.py"
    script.write_text("import torch\nq = torch.randn(1, 2, 8, 16)\n"
                      "torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)\n", encoding="utf-8")
    assert main(["trace", "--machine", "h100", str(script)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 SXM5 80GB (h100-sxm)" in out
    assert "roofs on NVIDIA H100 SXM5 80GB (h100-sxm): fp32" in out
    assert "pairs the mask keeps" in out


def test_recording_reads_no_version_counter_of_an_inference_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The overhead's main cost was asking an inference tensor its version (it raises: ~8 µs each)."""
    import roofline.tracing.capture as tracer  # the hot path reads each tensor's version

    with torch.inference_mode():
        x = torch.randn(4, 4)
    calls: list[bool] = []
    real = tracer._version
    monkeypatch.setattr(tracer, "_version", lambda t: calls.append(t.is_inference()) or real(t))
    trace_call(lambda: x @ x + x)  # under inference mode: every tensor an inference tensor
    assert calls == []  # never asked
    y = torch.randn(4, 4)
    trace_call(lambda: y.add_(1), inference=False)  # a normal tensor written in place: its counter is read
    assert calls and not any(calls)


def test_schemas_are_worked_out_once_per_op_overload() -> None:
    from roofline.tracing.recorder import _SCHEMAS, _Recorder

    _SCHEMAS.clear()  # kept across traces: start from none worked out

    x = torch.randn(4, 4)
    seen: list[int] = []
    real = _Recorder.schema

    def counting(self: _Recorder, func: object) -> object:
        before = len(self.schemas)
        made = real(self, func)
        seen.append(len(self.schemas) - before)
        return made

    _Recorder.schema = counting  # type: ignore[method-assign,assignment]
    try:
        for _ in range(2):
            trace_call(lambda: [x + x for _ in range(5)])
            # aten::add.Tensor: worked out on the first call only; the four after it read the cache in
            # the hot path (roofline.tracing.capture) without calling schema(), and so does a second trace
            assert seen == [1]
    finally:
        _Recorder.schema = real  # type: ignore[method-assign]


def test_the_hot_path_holds_no_tensor_past_its_call() -> None:
    """The calls are written down while the program runs (roofline.tracing.capture) and replayed into
    the graph when the block ends; what is written down holds no live tensor, so a tensor the program
    drops is freed at once, as untraced, and autograd's AccumulateGrad, which takes a gradient it
    holds the only reference to as the parameter's .grad and copies it otherwise
    (torch/csrc/autograd/functions/accumulate_grad.h), runs no copy it would not run untraced."""
    import weakref

    x = torch.randn(8, 16)
    with trace() as t:
        y = x @ x.T
        dropped = weakref.ref(y)
        del y
        assert dropped() is None  # freed at its del: nothing of the tracer's kept it
    assert [op.kind for op in t.ops] == ["matmul"]

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.SiLU(), torch.nn.Linear(32, 16))
    with torch.enable_grad(), trace(model, inference=False) as t:  # grad mode whatever an earlier test left
        model(x).sum().backward()
    # the backward of two Linear layers: each weight's gradient an mm, each bias's a sum over the batch,
    # none copied into .grad; silu_backward between them
    kinds = [op.name for op in t.ops]
    assert not [k for k in kinds if k.startswith("copy_")], kinds
    assert sum(k.startswith("mm") for k in kinds) == 3  # dW2, dX1 (input of layer 2), dW1
    assert model[0].weight.grad is not None and model[0].weight.grad.shape == (32, 16)


def test_calls_of_one_shape_are_counted_once_each_with_its_own_names_and_tensors() -> None:
    """The recorder counts a call once per shape it comes in and renames the ops for the calls after
    it (roofline.tracing.memo): each call keeps its own name, its own tensors and how many distinct
    tensors it reads; a dtype or a repeated argument makes another call."""
    x, y = torch.randn(64, 32), torch.randn(64, 32)
    t = trace_call(lambda: (x + y, x + y, x + x, x.double() + y.double()))
    adds = [op for op in t.ops if op.kind == "add"]
    assert [op.name for op in adds] == ["add", "add#2", "add#3", "add#4"]
    assert [op.flop for op in adds] == [64 * 32] * 4  # 1 FLOP per element (kernels.FLOP_PER_ELEMENT["add"])
    assert [len(op.inputs) for op in adds] == [2, 2, 1, 2]  # x + x reads x once
    # bytes read: two fp32 64×32 tensors, then x alone; the fp64 copies 8 bytes an element
    assert [sum(i.bytes for i in op.inputs) for op in adds] == [2 * 64 * 32 * 4] * 2 + [64 * 32 * 4, 2 * 64 * 32 * 8]
    outs = [op.outputs[0].name for op in adds]
    assert len(set(outs)) == 4 and outs[0] == "add.out" and outs[1] == "add#2.out"
    assert adds[0].inputs == adds[1].inputs and adds[2].inputs == (adds[0].inputs[0],)
