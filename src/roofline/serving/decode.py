"""Decode over a generation: the step model's decode steps at every context prompt + 1 ... prompt +
output for any batches, as floors and expected bands (numpy); throughput with pipeline micro-batches;
and the largest batch whose mean inter-token latency meets a target.

    ITL mean, last   the mean of the decode steps over the generation's contexts, and the last one
    decode rate      batch / ITL mean; with pp stages and at least pp sequences a replica, pp
                     micro-batches of batch/pp in flight: (batch / pp) / (micro-batch ITL × ⌈L/pp⌉/L)
                     (ModelAnalysis.tokens_per_s counts them the same way)
    throughput       the workload's, prefill counted (workload_rate): 1 / (1/decode rate + T_prefill/(dp·O))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from roofline.dtypes import DType
from roofline.hardware import Machine
from roofline.models.experts import overlapped_all_to_all
from roofline.models.stepband import expected_band, share_band
from roofline.models.stepmodel import StepModel
from roofline.parallel import Split
from roofline.serving.efficiency import Band, Efficiency, Rate, per_rate


class Decode:
    """Decode steps over the generation's contexts for any batches: floors and bands, with numpy."""

    def __init__(self, sm: StepModel, machine: Machine, dtype: DType, eff: Efficiency, overlap: bool,
                 prompt: int, output: int) -> None:
        import numpy as np

        self.sm, self.machine, self.dtype, self.eff, self.overlap = sm, machine, dtype, eff, overlap
        self.contexts = np.arange(prompt + 1, prompt + output + 1, dtype=np.int64)
        comm = None
        if sm.link_mask is not None:
            comm = np.asarray(sm.link_mask) | np.asarray(sm.network_mask)
        self.comm = comm if overlap and comm is not None and comm.any() else None
        # --two-batch-overlap (without --overlap): the MoE all-to-all under the other micro-batch's
        # compute, the other collectives in full (ModelAnalysis.step_time_s counts a step the same way)
        hidden = None if overlap or comm is None else overlapped_all_to_all(sm.names, sm.config, sm.split.ep)
        self.tbo = None if hidden is None or comm is None else (np.asarray(hidden), np.asarray(comm))
        self._memo: dict[int, dict[Any, Any]] = {}  # id(step model) -> what its bands work out once
        self._rows: dict[int, tuple[Any, Any, Any]] = {}  # batch -> its (floor, low, high) over the contexts
        self._floors: dict[int, Any] = {}  # batch -> its floor alone (floors()), where its band was not asked for
        # id(step model) -> batch -> what sm.evaluate gave at its points in floors(): its band, when then asked
        # for, is taken from them (a quote bands the one batch its floor search chose: roofline.serving.quote)
        self._evaluated: dict[int, dict[int, dict[str, Any]]] = {}
        # the kernels nothing of which grows with the context (GEMMs, norms, collectives: StepModel.length_free)
        # are evaluated once a batch, the others at every context
        free = sm.length_free() if self.contexts.size > 1 else np.zeros(len(sm.names), dtype=bool)
        self._parts = None
        if free.any() and not free.all():
            grows, flat = np.flatnonzero(~free), np.flatnonzero(free)
            self._parts = (sm.kernels_only(grows), grows, sm.kernels_only(flat), flat)

    def steps(self, batches: Any) -> tuple[Any, Any, Any]:
        """Step times [batches, contexts]: floor, expected low, expected high. A batch is evaluated once:
        serve asks for the curve's batches, the ITL target's search's and then the chosen ones again, and
        each evaluation costs every kernel's band over every context (the rows kept on this object)."""
        import numpy as np

        b = np.asarray(batches, dtype=np.int64).ravel()
        todo = [int(n) for n in dict.fromkeys(b.tolist()) if int(n) not in self._rows]
        if todo:
            rows = self._evaluate(np.array(todo, dtype=np.int64))
            for i, n in enumerate(todo):
                self._rows[n] = (rows[0][i], rows[1][i], rows[2][i])
        got = [self._rows[int(n)] for n in b.tolist()]
        if not got:
            empty = np.zeros((0, self.contexts.size))
            return empty, empty, empty
        return (np.stack([g[0] for g in got]), np.stack([g[1] for g in got]), np.stack([g[2] for g in got]))

    def floors(self, batches: Any) -> Any:
        """The floors alone [batches, contexts] (steps()'s first), without the bands: what a search at the
        floor reads (roofline.serving.quote), at a third of the cost (no kernel's band is evaluated)."""
        import numpy as np

        b = np.asarray(batches, dtype=np.int64).ravel()
        todo = [int(n) for n in dict.fromkeys(b.tolist()) if int(n) not in self._rows and int(n) not in self._floors]
        if todo:
            rows = self._evaluate(np.array(todo, dtype=np.int64), bands=False)[0]
            for i, n in enumerate(todo):
                self._floors[n] = rows[i]
        if not b.size:
            return np.zeros((0, self.contexts.size))
        return np.stack([self._rows[n][0] if n in self._rows else self._floors[n] for n in b.tolist()])

    def _evaluate(self, b: Any, bands: bool = True) -> tuple[Any, ...]:
        """steps() for batches not yet evaluated (`bands` False: the floor alone, floors())."""
        import numpy as np

        nb, nc = b.size, self.contexts.size
        bs, cs = np.repeat(b, nc), np.tile(self.contexts, nb)
        total: Callable[[int, Any], Any]
        if self._parts is not None:  # the kernels that do not grow with the context: at the first, once a batch
            grows, at_grows, flat, at_flat = self._parts
            once = self._kernels(b, np.full(nb, self.contexts[0]), flat, bands, b)
            each = self._kernels(bs, cs, grows, bands, b)

            def total(i: int, mask: Any) -> Any:  # Σ over the kernels `mask` of the floor (0), low (1), high (2)
                return each[i][:, mask[at_grows]].sum(axis=1) + np.repeat(once[i][:, mask[at_flat]].sum(axis=1), nc)
        else:
            whole = self._kernels(bs, cs, None, bands, b)

            def total(i: int, mask: Any) -> Any:
                return whole[i][:, mask].sum(axis=1)

        overhead = (0.0, *self.eff.overhead)
        everything = np.ones(len(self.sm.names), dtype=bool)

        def step(i: int) -> Any:
            if self.tbo is not None:
                a2a, every = self.tbo
                return np.maximum(total(i, ~every), total(i, a2a)) + total(i, every & ~a2a) + overhead[i]
            if self.comm is None:
                return total(i, everything) + overhead[i]
            return np.maximum(total(i, ~self.comm), total(i, self.comm)) + overhead[i]

        return tuple(step(i).reshape(nb, nc) for i in range(3 if bands else 1))

    def _kernels(self, b: Any, c: Any, sm: StepModel | None, bands: bool, batches: Any) -> tuple[Any, ...]:
        """Each kernel's floor and band over all its runs [points, kernels] at batches `b` and contexts `c`, the
        points of `batches` in turn, as many each (`bands` False: the floor alone)."""
        import numpy as np

        sm = sm or self.sm
        kept = self._evaluated.setdefault(id(sm), {})
        rows = batches.tolist()
        if bands and all(n in kept for n in rows):  # evaluated by floors(): the same points
            got = [kept[n] for n in rows]
            r = got[0] if len(got) == 1 else {k: np.concatenate([g[k] for g in got]) for k in got[0]}
        else:
            r = sm.evaluate(b, c, self.machine, self.dtype, totals=False)
        if not bands:
            per = len(b) // len(rows)
            for i, n in enumerate(rows):
                kept[n] = {k: v[i * per:(i + 1) * per] for k, v in r.items()}
            return (r["kernel_time_s"],)
        # the kernels' kinds and fits worked out once a step model (this object keeps every one it asks of)
        fast, slow = kernel_bands(sm, r, b, c, self.machine, self.dtype, self.eff, self._memo.setdefault(id(sm), {}))
        return r["kernel_time_s"], fast, slow

    def itl(self, batches: Any) -> tuple[list[Band], list[Band]]:
        """(mean, last) over the generation per batch."""
        f, lo, hi = self.steps(batches)
        means = [Band(float(a), float(b), float(c)) for a, b, c in
                 zip(f.mean(axis=1), lo.mean(axis=1), hi.mean(axis=1), strict=True)]
        lasts = [Band(float(a), float(b), float(c)) for a, b, c in zip(f[:, -1], lo[:, -1], hi[:, -1], strict=True)]
        return means, lasts


def kernel_bands(sm: StepModel, r: dict[str, Any], batch: Any, seq: Any, machine: Machine, dtype: DType,
                 eff: Efficiency, memo: dict[Any, Any] | None = None) -> tuple[Any, Any]:
    """Each kernel's band over all its runs [points, kernels], as `roofline model` gives it: the
    calibrated fit (roofline.models.stepband), or a bench calibration's floor / measured share of
    the roof of each kernel's bound class. `memo`: kept by the caller for this step model and machine
    (expected_band's, one a fit)."""

    def band(times: Any) -> tuple[Any, Any]:
        mine = None if memo is None else memo.setdefault(id(times), {})
        return expected_band(sm, r, batch, seq, machine, dtype, times, mine)

    chosen = eff.chosen
    if chosen.times is not None:
        return band(chosen.times)
    assert chosen.bench is not None
    shipped = eff.fallback.times if eff.fallback is not None else None
    otherwise = band(shipped) if shipped is not None else None
    return share_band(r, eff.shares, chosen.file, otherwise)


def throughputs(dec: Decode, batches: list[int], means: list[Band], split: Split, share: float,
                 unit: int) -> tuple[list[Rate], list[bool]]:
    """Output tokens/s over every replica per batch, as ModelAnalysis.tokens_per_s counts them: with pp
    stages and at least pp sequences a replica, pp micro-batches of batch/pp are in flight."""
    pp, dp = split.pp, split.dp
    ranks = unit // dp  # a micro-batch's sequences a replica must be a multiple of this (sequence split)
    filled = [pp > 1 and b // dp >= pp and (b // dp // pp) % ranks == 0 for b in batches]
    micro_batches = [b // dp // pp * dp for b, f in zip(batches, filled, strict=True) if f]
    micro = iter(dec.itl(micro_batches)[0] if micro_batches else [])
    out = []
    for b, m, f in zip(batches, means, filled, strict=True):
        out.append(per_rate(b / pp, next(micro).scaled(share)) if f else per_rate(float(b), m))
    return out, filled


def workload_rate(decode: Rate, prefill: Band, output: int, dp: int, share: float = 1.0) -> Rate:
    """Output tokens/s of the workload in steady state, prefill counted, as engines' throughput
    benchmarks report it (output tokens over the run's time: vLLM's benchmark_serving "Output token
    throughput", SGLang's bench_serving, TensorRT-LLM's trtllm-bench).

    Continuous batching keeps the batch full: as each sequence finishes its O output tokens, a new
    request takes its slot, and its P-token prompt is prefilled on the same devices, in chunks that
    ride the decode steps (chunked prefill: vLLM's and SGLang's default scheduler, TensorRT-LLM's
    enable_chunked_context), so the chunk's time is added to the steps it shares. The engines' own
    documents of that schedule:
      vLLM      https://docs.vllm.ai/en/latest/configuration/optimization.html (chunked prefill: every
                pending decode is batched first, then prefills up to max_num_batched_tokens, the last
                one chunked; first written at https://docs.vllm.ai/en/v0.4.2/models/performance.html)
      SGLang    https://docs.sglang.io/docs/advanced_features/server_arguments (--chunked-prefill-size:
                a longer prompt is prefilled in chunks of that many tokens; -1 turns it off)
      TRT-LLM   https://nvidia.github.io/TensorRT-LLM/features/long-sequence.html (chunked context:
                the input split into chunks batched with the decode requests) and
                https://nvidia.github.io/TensorRT-LLM/features/paged-attention-ifb-scheduler.html
                (in-flight batching: context and generation sequences in one step) One period of the
    steady state is one generation: each replica decodes its B/dp sequences O times and prefills B/dp
    new prompts, so

        period = B·O / (decode tokens/s) + (B/dp) · T_prefill(P) · share
        tokens/s = B·O / period = 1 / (1 / decode tokens/s + T_prefill · share / (dp · O))

    with T_prefill the prompt's prefill step (TTFT's) and `share` ⌈L/pp⌉/L when pp stages pipeline the
    prompts as they do the decode micro-batches (each stage is busy for its share of the step). Each
    end of the band from the same end of both times."""
    k = share / (dp * output)
    return Rate(1 / (1 / decode.ceiling + prefill.floor * k), 1 / (1 / decode.low + prefill.high * k),
                1 / (1 / decode.high + prefill.low * k))


NO_CAPACITY_SEARCH = 1 << 24  # how far the SLO search looks on a machine without a memory capacity


def search_units(max_mem: int | None, unit: int) -> int:
    """The most batch units the ITL search looks at: the memory's, or NO_CAPACITY_SEARCH without a capacity."""
    return (max_mem if max_mem is not None else NO_CAPACITY_SEARCH * unit) // unit


def first_look(dec: Decode, unit: int, max_mem: int | None, curve: list[int]) -> list[tuple[int, int]]:
    """The ITL search's first look, in one evaluation with the curve's batches: each all-reduce regime's first
    batch and the memory's largest (largest_meeting); the regimes, for slo_batches."""
    most = search_units(max_mem, unit)
    regimes = dec.sm.all_reduce_regimes(unit, most, int(dec.contexts[0]))
    dec.steps([*curve, *(first * unit for first, _ in regimes), most * unit])
    return regimes


def slo_batches(dec: Decode, unit: int, max_mem: int | None, itl_slo: float | None, curve: list[int],
                curve_means: list[Band], regimes: list[tuple[int, int]] | None = None
                ) -> tuple[int | None, tuple[int | None, int | None] | None]:
    """The largest batch meeting the ITL target at the floor, and with the band's high and low times, from
    the curve's batches and their means (`regimes`: first_look's, when taken)."""
    if itl_slo is None:
        return None, None
    most = search_units(max_mem, unit)
    known = {b // unit: (mn.floor, mn.low, mn.high) for b, mn in zip(curve, curve_means, strict=True)}
    if max_mem is not None and most not in known:  # the memory's largest batch, taken with the curve
        top = dec.itl([most * unit])[0][0]
        known[most] = (top.floor, top.low, top.high)
    found, lo_n, hi_n = largest_meeting(dec, unit, most, itl_slo, known, regimes)  # floor; expected high, low
    return (None if found is None else found * unit,
            (None if lo_n is None else lo_n * unit, None if hi_n is None else hi_n * unit))


def largest_meeting(dec: Decode, unit: int, most: int, target: float, known: Mapping[int, tuple[float, ...]],
                    regimes: list[tuple[int, int]] | None = None, orders: tuple[int, ...] | None = None
                    ) -> list[int | None]:
    """The largest n in [1, most] whose batch n × unit has ITL mean ≤ target, for the floor, the
    expected high and the expected low times. `known`: n → (floor, low, high) means already evaluated
    (the curve's), which bracket each search. Within one regime of the all-reduce algorithms (the
    batches over which every all-reduce runs the same one, `StepModel.all_reduce_regimes`) ITL mean is
    increasing and convex in the batch (each kernel's time is the larger of two linear functions of
    it); across regimes it may fall (past 8 MiB an NVSwitch system's all-reduce runs NVLS, S once
    instead of the two-shot's 2(n−1)/n · S). So each regime's first batch is looked at (serve takes
    them with the curve's): a regime whose first batch misses the target has no batch that meets it,
    and the answer is in the highest regime whose first batch meets it, searched for each of the three
    times at once (`regimes`: StepModel.all_reduce_regimes(unit, most, the first context) when taken).
    `orders` FLOOR: the floor's search alone (`known` then holds the floor alone), its batches evaluated
    without their bands (Decode.floors)."""
    orders = ORDER if orders is None else orders
    if regimes is None:
        regimes = dec.sm.all_reduce_regimes(unit, most, int(dec.contexts[0]))
    firsts = [first for first, _ in regimes if first not in known]
    if firsts:
        known = {**known, **mean_times(dec, unit, firsts, orders)}
    # per time (floor, expected high, expected low: the indices into known's (floor, low, high)) its regime
    where = [next(((a, z) for a, z in reversed(regimes) if known[a][k] <= target), None) for k in orders]
    return _largest_in(dec, unit, where, target, known, orders)


ORDER = (0, 2, 1)  # the three searches: the floor, the expected high and the expected low times
FLOOR = (0,)  # the floor's alone


def mean_times(dec: Decode, unit: int, ns: list[int], orders: tuple[int, ...] = ORDER) -> dict[int, tuple[float, ...]]:
    """n -> the ITL means of batch n × unit: (floor, low, high), or (floor,) for the FLOOR search alone."""
    if orders == FLOOR:
        return dict(zip(ns, ((v,) for v in dec.floors([n * unit for n in ns]).mean(axis=1).tolist()), strict=True))
    means = dec.itl([n * unit for n in ns])[0]
    return {n: (m.floor, m.low, m.high) for n, m in zip(ns, means, strict=True)}


def _largest_in(dec: Decode, unit: int, regimes: list[tuple[int, int] | None], target: float,
                known: Mapping[int, tuple[float, ...]], orders: tuple[int, ...]) -> list[int | None]:
    """`largest_meeting` inside one regime [first, most] for each time (None: no batch meets it): the
    chord across a bracket crosses the target at or below the answer, so each round tries that crossing,
    the next n and the midpoint of every search in one numpy call (and the bracket's top when it is
    `most`, the memory's bound, not a time seen above the target: a target the memory binds first is met
    there in one round); exact, and a round or two in practice."""
    import numpy as np

    inside = [(lambda n, r=r: r is not None and r[0] <= n <= r[1]) for r in regimes]
    seen = [{n: v[k] for n, v in known.items() if inside[w](n)} for w, k in enumerate(orders)]
    lo = [max((n for n, t in sn.items() if t <= target), default=r[0] - 1) if r else 0
          for sn, r in zip(seen, regimes, strict=True)]
    hi = [min([r[1], *(n - 1 for n, t in sn.items() if t > target)]) if r else 0
          for sn, r in zip(seen, regimes, strict=True)]
    while any(h > lo_ for lo_, h in zip(lo, hi, strict=True)):
        picks: list[set[int]] = []
        for sn, lo_, h in zip(seen, lo, hi, strict=True):
            if h <= lo_:
                picks.append(set())
                continue
            p = {(lo_ + h + 1) // 2}
            if h + 1 not in sn:  # the bound is the memory's, not a time seen above the target: often the answer
                p.add(h)
            if lo_ in sn and h + 1 in sn and sn[h + 1] > sn[lo_]:
                g = lo_ + int((target - sn[lo_]) / (sn[h + 1] - sn[lo_]) * (h + 1 - lo_))
                p |= {min(max(g, lo_ + 1), h), min(max(g + 1, lo_ + 1), h)}
            picks.append(p)
        ns = sorted(set().union(*picks))
        times = (dec.floors(np.array(ns) * unit),) if orders == FLOOR else dec.steps(np.array(ns) * unit)
        for w, k in enumerate(orders):
            seen[w].update((n, t) for n, t in zip(ns, times[k].mean(axis=1).tolist(), strict=True) if inside[w](n))
        for w, p in enumerate(picks):
            for n in p:
                if seen[w][n] <= target:
                    lo[w] = max(lo[w], n)
                else:
                    hi[w] = min(hi[w], n - 1)
    return [n if r is not None and n >= r[0] and n > 0 else None for n, r in zip(lo, regimes, strict=True)]


__all__ = ["FLOOR", "NO_CAPACITY_SEARCH", "Decode", "first_look", "kernel_bands", "largest_meeting", "mean_times",
           "search_units", "slo_batches", "throughputs", "workload_rate"]
