"""The step model from the fewest sample graphs, Decode's once-a-batch kernels and the exact ITL search:
what made `plan --output` (serving.splits.serve_search) as cheap as it is (bench/bench_serve_search.py)."""

from __future__ import annotations

import numpy as np
import pytest

import roofline.models.stepmodel as stepmodel
from roofline.models import analyze_model, describe_step
from roofline.models.dtypes import compute_dtype
from roofline.models.stepmodel import StepModel
from roofline.parallel import Deployment, Split, deploy
from roofline.serving import serve_model
from roofline.serving.decode import Decode, largest_meeting
from roofline.serving.efficiency import Efficiency
from roofline.vocab import Phase


def _fit(name: str, machine: str, split: Split, phase: Phase = Phase.DECODE) -> tuple[StepModel, Deployment]:
    step = describe_step(name)
    d = deploy(machine, split)
    return StepModel.fit(step.config, phase, step.dtypes, step.plan, None, split, d.graph_devices_per_node,
                         d.nvls), d


def test_a_dense_decode_step_is_fitted_on_four_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    # a dense decode step's kernels are linear in 1, B, B·S and its op dimensions in 1, B, S: three sample
    # points span both (e.g. (1, 1), (8, 1), (8, 33)), and CHECK_POINTS = 1 more checks the fit: 3 + 1 = 4
    # graphs, where the grid of _sample_points has 5 batches × 6 lengths = 30
    built: list[tuple[int, int]] = []
    real = stepmodel.build_graph

    def counted(cfg, phase, batch, seq, *rest):  # type: ignore[no-untyped-def]
        built.append((batch, seq))
        return real(cfg, phase, batch, seq, *rest)

    monkeypatch.setattr(stepmodel, "build_graph", counted)
    sm, _ = _fit("llama-3-70b", "dgx-h100", Split(tp=4))
    assert len(built) == 3 + stepmodel.CHECK_POINTS == 4
    assert len(stepmodel._sample_points(sm.config, Phase.DECODE)) == 5 * 6
    # the fit from four graphs is the graph path far outside the samples (batch ≤ 8, context ≤ 33)
    for b, s in ((512, 8192), (37, 4097)):
        a = analyze_model("llama-3-70b", "dgx-h100", "decode", b, s, split=Split(tp=4))
        r = sm.evaluate([b], [s], a.machine, a.dtype)
        assert float(r["time_s"][0]) == pytest.approx(a.time_s, rel=1e-9)
        assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)
        assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)


def test_only_attention_grows_with_the_context_of_a_decode_step() -> None:
    # decode reads each sequence's whole KV cache in attention; the GEMMs read their weights and B rows, the
    # norms and the all-reduces B × hidden: only the attention kernel's terms hold B·S
    sm, _ = _fit("llama-3-70b", "dgx-h100", Split(tp=4))
    grows = [n for n, free in zip(sm.names, sm.length_free(), strict=True) if not free]
    assert grows == ["attn"]
    # gemma-2: its windowed and its global layers attend in two kernels, both reading the cache
    sm, _ = _fit("gemma-2-9b", "h100", Split())
    assert all("attn" in n for n, free in zip(sm.names, sm.length_free(), strict=True) if not free)


def test_decode_steps_grow_by_the_kv_cache_read_per_context_token() -> None:
    # llama-3-70b on TP 4: each device holds 8 / 4 = 2 KV heads of 128 in bf16, K and V: 2 × 2 × 128 × 2 =
    # 1024 bytes a token and layer, × 80 layers; batch 64, the attention DRAM-bound (one query a sequence): each
    # token of context adds 64 × 80 × 1024 bytes / 3.35e12 B/s (H100 SXM) to the step's floor, and nothing else
    # moves (the once-a-batch kernels are the same at every context)
    sm, d = _fit("llama-3-70b", "dgx-h100", Split(tp=4))
    dec = Decode(sm, d.machine, compute_dtype(sm.dtypes, d.machine), Efficiency().for_device(d.machine.id), False,
                 2048, 256)
    floor, low, high = dec.steps([64])
    step = 64 * 80 * 1024 / 3.35e12
    assert np.diff(floor[0]) == pytest.approx(np.full(255, step), rel=1e-9)
    assert (low[0] <= high[0]).all() and (floor[0] < low[0]).all()
    # the same steps as every kernel at every context (StepModel.evaluate, no split into parts)
    r = sm.evaluate(np.full(256, 64), dec.contexts, d.machine, dec.dtype)
    assert floor[0] == pytest.approx(r["time_s"], rel=1e-12)


def test_the_itl_search_finds_what_every_batch_tried_finds() -> None:
    # llama-3-70b on TP 8 of a DGX H100 at 30 ms: three all-reduce regimes over batches 1-631 (the memory's
    # largest batch); the largest batch whose mean ITL meets the target, by every batch evaluated
    r = serve_model("llama-3-70b", "dgx-h100", Split(tp=8), prompt=2048, output=256, itl_slo_s=0.03)
    dec, most = r.decoder, r.max_batch_memory
    assert most == 631 and len(dec.sm.all_reduce_regimes(1, most, 2049)) == 3
    floor, low, high = dec.steps(np.arange(1, most + 1))
    every = [max((n for n, t in enumerate(x.mean(axis=1), 1) if t <= 0.03), default=None) for x in (floor, high, low)]
    found = largest_meeting(dec, 1, most, 0.03, {})
    assert found == every
    assert r.max_batch_slo == every[0] == 536 and r.max_batch_slo_expected == (every[1], every[2])
