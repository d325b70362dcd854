"""What the split search ranks a layout by (roofline.serving.quote): serve's batch, the workload's throughput
and its cost, worked out at the floor and banded at the chosen batch alone (issue 21: `serve` and `plan`
answer one question, and `plan` with targets is about as cheap as `plan`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import roofline.models.stepmodel as stepmodel
from roofline.models import describe_step
from roofline.parallel import Split
from roofline.serving import serve_model
from roofline.serving.decode import Decode
from roofline.serving.quote import Quote
from roofline.serving.splits import ServeSearch, serve_search
from roofline.vocab import Phase

# the bench's workload (bench/bench_serve_search.py): Llama 3 70B on a DGX H100, 2048 in / 256 out, 30 ms ITL
MODEL, MACHINE, P, O, ITL, PRICE = "llama-3-70b", "dgx-h100", 2048, 256, 0.03, 2.5


def _search() -> ServeSearch:
    return serve_search(describe_step(MODEL, Phase.PREFILL, 1, P), MACHINE, output=O, itl_slo_s=ITL,
                        price_per_device_hour=PRICE)


def _quotes(s: ServeSearch) -> dict[str, Quote]:
    return {str(c.split): c.report for c in s.candidates if c.report is not None}


@pytest.fixture(scope="module")
def search() -> ServeSearch:
    return _search()


def test_each_quote_is_serves_report_of_that_split(search: ServeSearch) -> None:
    # serve --tp N of the same workload: the same batch (the largest meeting 30 ms at the floor), the same
    # workload throughput and cost at it; the quote works them out without the curve, so only rounding may
    # differ (measured: <= 2.2e-16 relative)
    quotes = _quotes(search)
    assert set(quotes) == {"TP 2", "TP 4", "TP 8"}  # TP 1: 140 GB of BF16 weights on one 80 GB H100
    for q in quotes.values():
        r = serve_model(MODEL, MACHINE, q.split, prompt=P, output=O, itl_slo_s=ITL, price_per_device_hour=PRICE)
        assert (q.batch, q.max_batch_slo, q.max_batch_memory) == (r.batch, r.max_batch_slo, r.max_batch_memory)
        assert q.cost_output is not None and r.cost_output is not None
        for a, b in ((q.throughput.ceiling, r.throughput.ceiling), (q.throughput.low, r.throughput.low),
                     (q.throughput.high, r.throughput.high), (q.cost_output.floor, r.cost_output.floor),
                     (q.cost_output.high, r.cost_output.high), (q.ttft.floor, r.ttft.floor)):
            assert a == pytest.approx(b, rel=1e-12)
        # the winner's full report is serve's, from the same prepared deployment
        full = q.report()
        assert full.batch == r.batch and full.throughput.ceiling == pytest.approx(r.throughput.ceiling, rel=1e-12)


def test_the_quote_by_hand_from_its_own_times(search: ServeSearch) -> None:
    # workload_rate (roofline.serving.decode, continuous batching with chunked prefill as vLLM, SGLang and
    # TRT-LLM schedule it): tokens/s = 1 / (1 / (B / ITL) + T_prefill / (dp · O)); TP alone: dp = 1, no
    # pipeline share. Cost per 1M output tokens: price/3600 × devices × 1e6 / tokens/s
    for name, q in _quotes(search).items():
        devices = int(name.split()[1])
        rate = 1 / (1 / (q.batch / q.itl_mean.floor) + q.ttft.floor / (1 * O))
        assert q.throughput.ceiling == pytest.approx(rate, rel=1e-12)
        assert q.cost_output is not None
        assert q.cost_output.floor == pytest.approx(PRICE / 3600 * devices * 1e6 / rate, rel=1e-12)
        # the expected band lies under the floor's ceiling, and costs more
        assert q.throughput.low <= q.throughput.high <= q.throughput.ceiling
        assert q.cost_output.floor <= q.cost_output.low <= q.cost_output.high
        # the batch meets the target at the floor and is the largest that does within memory
        assert q.itl_mean.floor <= ITL and q.max_batch_slo == q.batch
        assert q.max_batch_memory is not None and q.batch <= q.max_batch_memory
        if q.batch < q.max_batch_memory:  # one sequence more misses 30 ms (the mean ITL grows with the batch)
            assert q.prepared.decode().itl([q.batch + 1])[0][0].floor > ITL


def test_the_ranking_cost_order(search: ServeSearch) -> None:
    # the cheapest per output token wins, and the winner is the quote of least cost; TP 8 runs 8 devices
    # where TP 4 runs 4 at a batch not twice as large; TP 2's batch is the memory's, far below what 30 ms allows
    q = _quotes(search)
    costs = {k: v.cost_output.floor for k, v in q.items() if v.cost_output is not None}
    assert search.winner is not None and str(search.winner.split) == min(costs, key=costs.__getitem__) == "TP 4"
    assert costs["TP 4"] < costs["TP 8"] < costs["TP 2"]
    # TP 2: 0.9 of 80 GiB a device (roofline.models.memory's default utilization) less half of Llama 3 70B's
    # 141,107,412,992 bytes of BF16 weights (the model's safetensors index, total_size), over one sequence's
    # cache: 80 layers × K and V × 4 KV heads (8 over 2 devices) × 128 × 2 bytes × (2048 + 256) tokens;
    # the step's workspace takes less than one sequence's cache
    tp2 = q["TP 2"]
    room = 0.9 * 80 * 2**30 - 141_107_412_992 / 2
    per_seq = 80 * 2 * (8 // 2) * 128 * 2 * (P + O)
    assert tp2.batch == tp2.max_batch_memory
    assert int(room / per_seq) - 1 <= tp2.batch <= room / per_seq  # 17.9 -> 17


def test_the_floor_search_bands_the_chosen_batch_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # the ITL search (largest_meeting) evaluates its probes at the floor (Decode.floors, bands=False); the
    # expected band is worked out once a layout, at the one batch the quote reports
    banded: list[list[int]] = []
    real = Decode._evaluate

    def counted(self: Any, b: Any, bands: bool = True) -> tuple[Any, ...]:
        if bands:
            banded.append([int(x) for x in np.asarray(b)])
        return real(self, b, bands)

    monkeypatch.setattr(Decode, "_evaluate", counted)
    quotes = _quotes(_search())
    assert sorted(banded) == sorted([q.batch] for q in quotes.values())


def test_a_search_builds_three_sample_graphs_a_layout_and_one_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # a dense decode step model is fitted on 3 sample graphs that span its features, and CHECK_POINTS = 1
    # more (test_step_model_samples); within one search the layouts share the sample grid, so the check
    # point is built for the first layout fitted only: TP 2, 4 and 8 -> 3 × 3 + 1 graphs; serve of one split
    # outside a search builds its 3 + 1
    built: list[int] = []
    real = stepmodel.build_graph

    def counted(*args: Any, **kw: Any) -> Any:
        built.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(stepmodel, "build_graph", counted)
    _search()
    assert len(built) == 3 * 3 + stepmodel.CHECK_POINTS == 10
    built.clear()
    serve_model(MODEL, MACHINE, Split(tp=4), prompt=P, output=O, itl_slo_s=ITL)
    assert len(built) == 3 + stepmodel.CHECK_POINTS == 4
