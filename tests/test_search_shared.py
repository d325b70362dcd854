"""What one split search works out once for all its layouts (roofline.models.shared), and the query-tile
roof over columns of one head width (the width taken once, roofline.expectation.columns)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from roofline.expectation.columns import Columns, expected_columns
from roofline.expectation.model import Fit
from roofline.models.shared import shared, sharing


def test_shared_inside_a_search_only() -> None:
    made: list[str] = []

    def make(key: str) -> str:
        made.append(key)
        return key.upper()

    assert shared(("k",), lambda: make("a")) == "A" and shared(("k",), lambda: make("a")) == "A"
    assert made == ["a", "a"]  # outside a search: every call its own
    made.clear()
    with sharing():
        assert shared(("k",), lambda: make("a")) == "A"
        assert shared(("k",), lambda: make("b")) == "A"  # the key's first value, make not called again
        assert shared(("j",), lambda: make("c")) == "C"
        with sharing():  # a nested block shares the outer one's
            assert shared(("k",), lambda: make("d")) == "A"
    assert made == ["a", "c"]
    with sharing():  # a new search starts empty
        assert shared(("k",), lambda: make("e")) == "E"
    assert made == ["a", "c", "e"]


def test_a_search_fits_its_sample_points_once() -> None:
    # llama-3-70b on dgx-h100 (8 H100s a node): TP 1 is refused by the memory fit (140 GB of BF16 weights),
    # TP 2, 4 and 8 are served; their decode step models read the same of the split (dp 1, ep 1) and so
    # the same sample grid: the sample points (_spanning) are worked out once, not three times
    import roofline.models.stepmodel  # noqa: F401
    from roofline.models import describe_step
    from roofline.serving.splits import serve_search
    from roofline.vocab import Phase

    sm = sys.modules["roofline.models.stepmodel"]
    calls = []
    original = sm._spanning

    def counted(*args: object) -> list[int]:
        calls.append(1)
        return original(*args)

    step = describe_step("llama-3-70b", Phase.PREFILL, 1, 2048)
    mp = pytest.MonkeyPatch()
    mp.setattr(sm, "_spanning", counted)
    try:
        s = serve_search(step, "dgx-h100", output=256, itl_slo_s=0.03)
    finally:
        mp.undo()
    served = [c for c in s.candidates if c.report is not None]
    assert {str(c.split) for c in served} == {"TP 2", "TP 4", "TP 8"}
    assert len(calls) == 1


def test_the_query_tile_roof_over_columns_of_one_width_and_of_several() -> None:
    # H200 TRT-LLM decode with an FP8 cache, b2048 h32/2 (test_expectation_terms.test_the_query_tile_roof_by_hand):
    # B_g = 2048·2 = 4096 blocks, 4096/132 = 31.03 an SM, the first n0 = 2 hidden under t0; λ_q = 0.2 µs;
    # ⌈H/G⌉₈ = 16 query heads a tile; the head width padded to 64, 128 or 256 (TensorRT-LLM kernels/xqa/mha.h):
    # d 192 -> 256: tile 16·256/256 = 16; d 100 -> 128: 16·128/256 = 8; d 64: 16·64/256 = 4
    fit = Fit("generation_attention.fp8", 1.0, 7.3e-6, 1.0, 1.0, 1, max_group=32, query_tile_latency_s=0.2e-6)
    q_per_tile = 0.2e-6 * (4096 / 132 - 2)

    def t(head_dims: list[float]) -> np.ndarray:
        n = len(head_dims)
        mem, zero = np.full(n, 10.5e-6), np.zeros(n)
        out, _, _ = expected_columns(fit, Columns(mem, zero, mem, zero, zero, zero, np.full(n, 4096.0),
                                                  np.full(n, 2048.0 * 32), np.full(n, 4096.0), np.array(head_dims),
                                                  zero, zero, 132))
        return out

    assert t([192.0, 192.0, 192.0]) == pytest.approx([q_per_tile * 16 + 7.3e-6] * 3, rel=1e-12)
    assert t([192.0, 100.0, 64.0]) == pytest.approx([q_per_tile * 16 + 7.3e-6, q_per_tile * 8 + 7.3e-6,
                                                     q_per_tile * 4 + 7.3e-6], rel=1e-12)
    # one width wider than 256 (no such XQA kernel): the width as it is, 320 -> 16·320/256 = 20
    assert t([320.0, 320.0]) == pytest.approx([q_per_tile * 20 + 7.3e-6] * 2, rel=1e-12)
