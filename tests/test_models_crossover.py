"""The crossover batch from a few graphs (roofline.models.crossover), held to its definition.

The crossover is the smallest batch whose step's intensity (FLOPs over DRAM bytes, the graph's totals)
reaches the machine's ridge. Each test checks the batch found against graphs built at that batch and
one batch unit below it: the definition itself, not another of our functions.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from roofline.models import analyze_model
from roofline.models import crossover as cross_module
from roofline.models.crossover import _solve
from roofline.parallel import Split


@pytest.mark.parametrize(("model", "machine", "phase", "seq", "split", "unit"), [
    # MoE decode with tensor-parallel attention and expert parallel: each rank routes 1/tp of the
    # tokens, so batches are multiples of tp = 4 (roofline.models.stepmodel.batch_unit)
    ("mixtral-8x7b", "dgx-h100", "decode", 16, Split(tp=4, ep=4), 4),
    # MoE decode under expert parallel with data-parallel attention: batches are multiples of dp = 4
    ("mixtral-8x7b", "dgx-h100", "decode", 16, Split(ep=4, dp=4), 4),
    # MoE on one device (DeepSeek-V3's MLA and 8 of 256 experts): the experts hit grow with the batch
    ("deepseek-v3", "h100", "decode", 16, Split(), 1),
    # dense, tensor- and data-parallel: batches are multiples of dp = 4
    ("llama-3-70b", "dgx-h100", "decode", 16, Split(tp=2, dp=4), 4),
    # dense on one device; a prefill too
    ("llama-3-8b", "h100", "decode", 64, Split(), 1),
    ("llama-3-8b", "h100", "prefill", 1, Split(), 1),
])
def test_the_batch_found_is_the_first_at_the_ridge(model: str, machine: str, phase: str, seq: int, split: Split,
                                                   unit: int) -> None:
    a = analyze_model(model, machine, phase, unit, seq, split=split)
    b = a.crossover.batch
    assert b is not None and b % unit == 0
    ridge = a.ridge_flop_per_byte
    at = analyze_model(model, machine, phase, b, seq, split=split)
    assert at.flop / at.bytes >= ridge  # the step's totals at the batch found reach the ridge
    if b > unit:
        below = analyze_model(model, machine, phase, b - unit, seq, split=split)
        assert below.flop / below.bytes < ridge  # and one batch unit below does not


def test_never_names_the_limit_the_graphs_tend_to() -> None:
    # Llama 3 70B decode at 8192 tokens never reaches the ridge: each sequence adds its KV cache
    # (80 layers × 2 × 8 KV heads × 128 × 2 B × 8192 tokens = 2.68 GB) for ~2 × 70.6e9 FLOPs + attention
    a = analyze_model("llama-3-70b", "h100", "decode", 64, 8192)
    c = a.crossover
    assert c.batch is None and c.reason.startswith("never")
    big = analyze_model("llama-3-70b", "h100", "decode", 1 << 16, 8192)
    # the limit is the intensity as the batch grows: the graph at 65,536 sequences is within 0.1% of it
    assert big.flop / big.bytes == pytest.approx(c.limit_flop_per_byte, rel=1e-3)


def test_the_linear_solve() -> None:
    # x = (1, 2, 3): rows · x by hand; the first pivot is 0, so the rows must be swapped
    rows = [[0.0, 1.0, 1.0], [2.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
    ys = [0 * 1 + 1 * 2 + 1 * 3, 2 * 1 + 0 * 2 + 1 * 3, 1 * 1 + 1 * 2 + 0 * 3]
    assert _solve(rows, ys) == pytest.approx([1.0, 2.0, 3.0], rel=1e-12)


def test_a_step_that_is_not_linear_falls_back_to_the_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    # the graph at the batch found is the check: where it disagrees with the three-graph solution,
    # the fitted step model answers (here the check's graph is made to disagree)
    fitted: list[str] = []
    real_fit, real_totals = cross_module.StepModel.fit, cross_module._totals
    calls = {"n": 0}

    def totals(kernels: list) -> tuple[float, float]:
        calls["n"] += 1
        flop, byt = real_totals(kernels)
        return (flop * 1.5, byt) if calls["n"] == 3 else (flop, byt)  # the 3rd graph (dense: the check)

    def fit(*args: object, **kwargs: object) -> object:
        fitted.append("fit")
        return real_fit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cross_module, "_totals", totals)
    monkeypatch.setattr(cross_module.StepModel, "fit", fit)
    a = analyze_model("llama-3-8b", "h100", "decode", 1, 64)
    assert a.crossover.batch is not None and fitted == ["fit"]


def test_a_decode_analysis_imports_no_numpy() -> None:
    # the crossover line of `roofline model` needs no step-model fit, hence no numpy (start-up, issue 24)
    code = ("import sys\nfrom roofline.cli import main\n"
            "main(['model', 'llama-3-8b', '--machine', 'h100', '--phase', 'decode', '--batch', '8', "
            "'--context', '2048'])\nprint('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "False"
