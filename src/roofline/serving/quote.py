"""What a split search ranks one layout by (roofline.serving.splits, `plan --output` and `serve` without
a split): serve's batch, the workload's throughput at it and its cost per output token, the same numbers
as serve's report (roofline.serving.serve) computes them, and nothing the ranking does not read:

    batch        the largest meeting --itl-slo at the floor (serve's max batch (SLO): the same search,
                 StepModel.all_reduce_regimes then decode.largest_meeting), its batches evaluated at the
                 floor alone (Decode.floors: no kernel's expected band); or the batch given; or the unit
    throughput   the workload's at that batch, floor and expected band, prefill counted (workload_rate)
    cost         per 1M output tokens at it: price/3600 × devices / output tokens/s × 1e6

Left out, for the one layout `serve` shows (Quote.report(): the full ServingReport from the same prefill,
memory and decode step model): the throughput curve and its knee, ITL last, goodput and the batches the
band's own times allow (max_batch_slo_expected, two more searches over expected bands), the input cost.
"""

from __future__ import annotations

from dataclasses import field, replace

from roofline.frozen import frozen
from roofline.models.memory import DEFAULT_UTILIZATION
from roofline.models.split import stage_share
from roofline.models.step import Step
from roofline.models.stepmodel import batch_unit
from roofline.parallel import Deployment, Split
from roofline.serving.decode import FLOOR, largest_meeting, mean_times, search_units, throughputs, workload_rate
from roofline.serving.efficiency import Band, Efficiency, Rate
from roofline.serving.serve import (
    Prepared,
    ServingReport,
    _check_itl_met,
    _check_ttft_met,
    _checked_batch,
    _checked_inputs,
    _chosen_batch,
    _cost_output,
    prepare,
    report_of,
)
from roofline.vocab import Phase


@frozen
class Quote:
    """One layout's batch, workload throughput and cost, as serve's report has them (module docstring)."""

    split: Split
    batch: int
    itl_mean: Band  # at the batch
    throughput: Rate
    max_batch_memory: int | None
    max_batch_slo: int | None
    cost_output: Band | None
    ttft: Band
    ttft_slo_s: float | None
    prepared: Prepared = field(repr=False, compare=False)

    @property
    def ttft_met(self) -> bool | None:
        return None if self.ttft_slo_s is None else self.ttft.floor <= self.ttft_slo_s

    def report(self) -> ServingReport:
        """serve's whole report of this layout, from the same prefill, memory and decode step model."""
        return report_of(self.prepared)


def quote(step: Step, deployment: Deployment, *, output: int, batch: int | None = None,
          ttft_slo_s: float | None = None, itl_slo_s: float | None = None,
          price_per_device_hour: float | None = None, utilization: float = DEFAULT_UTILIZATION,
          overlap: bool = False, efficiency: Efficiency | None = None) -> Quote:
    """serve() of `step`'s workload on `deployment` (no what-ifs), quoted (module docstring): the same
    checks, and the same errors (one line) for targets no batch meets."""
    prompt, output, price, ttft_slo, itl_slo = _checked_inputs(step.seq, output, price_per_device_hour, ttft_slo_s,
                                                               itl_slo_s, utilization)
    sp = deployment.split
    batch = _checked_batch(step.config, prompt, output, batch, sp)
    eff = (efficiency or Efficiency()).for_device(deployment.machine.id)
    prep = prepare(replace(step, phase=Phase.PREFILL, batch=sp.dp), deployment, output, batch, ttft_slo, itl_slo,
                   price, eff, utilization, overlap)
    return _quoted(prep)


def _quoted(prep: Prepared) -> Quote:
    """quote() from its prepared deployment."""
    cfg, sp, itl_slo, max_mem = prep.step.config, prep.deployment.split, prep.itl_slo, prep.mem.max_batch
    unit = batch_unit(sp)
    dec = prep.decode()
    max_slo = None
    if itl_slo is not None:  # serve's search for the largest batch meeting the target, at the floor alone
        most = search_units(max_mem, unit)
        regimes = dec.sm.all_reduce_regimes(unit, most, int(dec.contexts[0]))
        known = mean_times(dec, unit, sorted({1, *(first for first, _ in regimes),
                                              *((most,) if max_mem is not None else ())}), FLOOR)
        if known[1][0] > itl_slo:  # serve's error, which names the smallest batch's band
            _check_itl_met(dec.itl([unit])[0][0], itl_slo, unit)
        _check_ttft_met(prep.ttft, prep.ttft_slo)
        found = largest_meeting(dec, unit, most, itl_slo, known, regimes, FLOOR)[0]
        max_slo = None if found is None else found * unit
    else:
        _check_ttft_met(prep.ttft, prep.ttft_slo)
    batch, _ = _chosen_batch(prep.batch, max_slo, unit)
    means = dec.itl([batch])[0]
    decode, filled = throughputs(dec, [batch], means, sp, stage_share(cfg, sp), unit)
    rate = workload_rate(decode[0], prep.ttft, prep.output, sp.dp, stage_share(cfg, sp) if filled[0] else 1.0)
    cost = None if prep.price is None else _cost_output(prep.price, sp.devices, rate)
    return Quote(sp, batch, means[0], rate, max_mem, max_slo, cost, prep.ttft, prep.ttft_slo, prep)


__all__ = ["Quote", "quote"]
