"""The closed-form counts the graph builder and the numpy step model share, written once.

Each is plain arithmetic that works on Python ints and on numpy arrays alike: the builder calls it
with one step's ints, `roofline.models.stepmodel` with whole grids of (batch, length). Only the
three operations arithmetic lacks (min, max, round) differ between the two; `minimum`, `maximum`
and `round_half_even` pick the builtin for numbers and numpy for arrays, and numpy is imported only
when an array is given (importing roofline.models loads no numpy).

    windowed_pairs(N, W)        causal (query, key) pairs of an N-token prompt under a window W
    expected_experts_hit(E,k,N) the expected distinct experts N tokens hit, k of E each, uniformly
    experts_hit(E, k, N)        that, rounded to a whole expert, at least k, at most E and N·k
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING, Any, TypeVar

from roofline.errors import RooflineError

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import NDArray

# an int, a float or a numpy array: what the formulas below take and give back
Num = TypeVar("Num", int, float, "NDArray[Any]")


def _is_number(x: object) -> bool:
    return isinstance(x, int | float)


def minimum(*xs: Any) -> Any:
    """min of numbers; numpy's element-wise minimum as soon as one of them is an array."""
    if all(_is_number(x) for x in xs):
        return min(xs)
    import numpy as np

    return reduce(np.minimum, xs)


def maximum(*xs: Any) -> Any:
    """max of numbers; numpy's element-wise maximum as soon as one of them is an array."""
    if all(_is_number(x) for x in xs):
        return max(xs)
    import numpy as np

    return reduce(np.maximum, xs)


def round_half_even(x: Any) -> Any:
    """`round` for a number (to an int, ties to even), `numpy.round` for an array (ties to even too)."""
    if _is_number(x):
        return round(x)
    import numpy as np

    return np.round(x)


def windowed_pairs(queries: Num, window: int | None, chunked: bool = False) -> Num:
    """Causal (query, key) pairs of a prompt of `queries` tokens: Σ_i min(i, W); N(N+1)/2 without a
    window. With m = min(N, W): m(m+1)/2 + (N − m)·W (the second term is 0 when N ≤ W).
    `chunked` (Llama 4's attention_chunk_size C = W): each token attends within its chunk of C, so
    with N = q·C + r: q·C(C+1)/2 + r(r+1)/2."""
    if window is None:
        return queries * (queries + 1) // 2
    if chunked:
        whole, rest = queries // window, queries % window
        return whole * (window * (window + 1) // 2) + rest * (rest + 1) // 2
    m = minimum(queries, window)
    return m * (m + 1) // 2 + (queries - m) * window


def expected_experts_hit(num_experts: int, per_token: int, tokens: Num) -> Any:
    """E·(1 − (1 − k/E)^N): the expected number of distinct experts N tokens hit when each picks k
    of E uniformly at random, independently of the other tokens. Exact under that assumption, with
    a token's k picks distinct: a given expert is outside one token's k-subset with probability
    C(E−1, k)/C(E, k) = 1 − k/E, and outside all N tokens' with (1 − k/E)^N."""
    return num_experts * (1.0 - (1.0 - per_token / num_experts) ** tokens)


def experts_hit(num_experts: int, per_token: int, tokens: Num, override: int | None = None) -> Any:
    """Distinct experts one MoE layer reads the weights of: `override`, else the uniform-routing
    expectation rounded to a whole expert, never below k nor above E or N·k:
    max(k, min(E, N·k, round(E·(1 − (1 − k/E)^N))))."""
    e, k = num_experts, per_token
    if override is not None:
        if isinstance(override, bool) or not isinstance(override, int) or not (1 <= override <= e):
            raise RooflineError(f"experts hit must be an integer in 1..{e}, got {override!r}")
        return override
    return maximum(k, minimum(e, tokens * k, round_half_even(expected_experts_hit(e, k, tokens))))


def experts_read_per_device(hit: Num, num_experts: int, redundant: int, ep: int) -> Any:
    """Experts one device of an ep group reads: the group's `hit` experts spread over its E + R slots
    (R replicas, --redundant-experts: a hit expert's tokens split over its copies), ⌈hit·(E + R)/E / ep⌉
    (floor division first: whole slots), at most its (E + R)/ep slots; `hit` itself without expert parallel."""
    if ep == 1:
        return hit
    slots = num_experts + redundant
    return minimum(slots // ep, -(-(hit * slots // num_experts) // ep))


__all__ = ["expected_experts_hit", "experts_hit", "experts_read_per_device", "maximum", "minimum", "round_half_even",
           "windowed_pairs"]
