"""serve's decode step is `roofline model`'s step: the numpy step model (serve's ITL) against the graph
path (analyze) at the same batch and context, over models × machines × dtypes, and one step by hand.

Tolerance: 1e-9 relative. Both sides sum the same kernels' floors; the step model's coefficients are
least-squares solves that reproduce the sample graphs to 1e-6 of each count at worst (stepmodel._solve),
and in practice the two agree to 1e-13 (the float sums' order)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofline.models import StepModel, analyze, describe_step, model_dtypes
from roofline.parallel import Split, deploy
from roofline.serving import serve_model

REL = 1e-9

# (model, machine, split) that hold the model and a batch of 8 sequences of 1 + 64 tokens
DEPLOYED = [("llama-3-8b", "h100", None), ("gemma-2-9b", "mi300x", None), ("gpt-oss-20b", "b200", None),
            ("mixtral-8x7b", "dgx-h100", Split(tp=2)), ("qwen3-30b-a3b", "h200", None),
            ("nemotron-3-nano", "b200", None), ("llama-3-70b", "dgx-b200", Split(tp=4))]
# weights, KV cache, compute: the checkpoint's; an FP8 KV cache; NVFP4 weights and compute (Blackwell's peak only)
DTYPES = [(None, None, None), (None, "fp8", None), ("nvfp4", "fp8", "nvfp4")]


CASES = [(*where, dt) for where in DEPLOYED for dt in DTYPES if dt[2] != "nvfp4" or "b200" in where[1]]


@pytest.mark.parametrize(("model", "machine", "split", "dtypes"), CASES)
def test_serve_itl_last_is_the_model_step(model: str, machine: str, split: Split | None,
                                          dtypes: tuple[str | None, str | None, str | None]) -> None:
    r = serve_model(model, machine, split, prompt=512, output=64, batch=8 * (split.dp if split else 1),
                    dtypes=model_dtypes(dtypes[0], "bf16", dtypes[1], dtypes[2]))
    # ITL last is the decode step at prompt + output = 576; `model --phase decode --context 576` builds it
    assert r.itl_last.floor == pytest.approx(r.decode_analysis().time_s, rel=REL)


@pytest.mark.parametrize(("batch", "context"), [(403, 2176), (300, 129), (1024, 40000), (257, 8192)])
def test_step_model_past_the_tiles_is_the_graph(batch: int, context: int) -> None:
    """The sample graphs stop at batch 8 and length 33; these points pass the matmul's 256-row tile and
    attention's 128-key tile, where shared memory and L2 reuse change (the clamp in kernels.py)."""
    step = describe_step("llama-3-70b", "decode", batch, context, model_dtypes("nvfp4", "bf16", "fp8", "nvfp4"))
    d = deploy("b200")
    a = analyze(step, d)
    sm = StepModel.fit(step.config, "decode", step.dtypes, step.plan)
    r = sm.evaluate([batch], [context], d.machine, a.dtype)
    assert float(r["time_s"][0]) == pytest.approx(a.time_s, rel=REL)
    for j, p in enumerate(a.placements):
        assert float(r["kernel_time_s"][0, j]) == pytest.approx(p.total_time_s, rel=REL), p.name


def test_llama_70b_nvfp4_qkv_projection_by_hand() -> None:
    """Llama 3 70B NVFP4 on a B200, decode at batch 403 and context 2176 (issue 20 item 5: serve said
    25.9 ms, model 32.1 ms). The QKV projection is shared-memory bound:

        M = 403 rows, N = (64 + 2·8)·128 = 10240, K = 8192 (config: 64 query heads, 8 K/V heads, head 128)
        smem bytes = 2 B (the BF16 activations, the wider operand) · M·N·K · (1/256 + 1/256)
                   = 528,220,160 B a layer (M > 256: the tile is the full 256 × 256)
        bandwidth  = 128 B/clk/SM × 148 SMs × 1.8558 GHz (b200.toml [chip])
        time       = 80 layers × 528,220,160 B / bandwidth = 1.202 ms

    while its DRAM term, 10240 × 8192 × 4.5 bits of weights + BF16 rows, is 0.06 ms a layer × 80 at 7.67 TB/s."""
    smem_bytes = 2 * 403 * 10240 * 8192 * (1 / 256 + 1 / 256)
    assert smem_bytes == 528_220_160
    by_hand = 80 * smem_bytes / (128 * 148 * 1855.8e6)
    step = describe_step("llama-3-70b", "decode", 403, 2176, model_dtypes("nvfp4", "bf16", "fp8", "nvfp4"))
    d = deploy("b200")
    sm = StepModel.fit(step.config, "decode", step.dtypes, step.plan)
    r = sm.evaluate([403], [2176], d.machine, analyze(step, d).dtype)
    j = sm.names.index("qkv_proj")
    assert float(r["kernel_time_s"][0, j]) == pytest.approx(by_hand, rel=1e-9)
    assert by_hand == pytest.approx(1.202e-3, rel=1e-3)
    # and the whole step: serve's last ITL is model's 32.05 ms, no longer 25.9 ms
    serve_last = serve_model("llama-3-70b", "b200", prompt=2048, output=128, batch=403,
                             dtypes=model_dtypes("nvfp4", "bf16", "fp8", "nvfp4")).itl_last.floor
    assert serve_last == pytest.approx(analyze(replace(step, batch=403, seq=2176), d).time_s, rel=REL)
    assert serve_last > 0.030  # 32.1 ms, where the step model without shared memory said 25.9 ms
