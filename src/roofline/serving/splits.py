"""The cheapest split that serves a workload within its targets: `serve` without a split, and `plan`
with --output, answer this one question with this one function.

Candidates are the layouts engines deploy (vLLM, SGLang and TensorRT-LLM: tensor parallel inside a
node, pipeline stages across nodes once a node's devices are all tensor parallel, as few stages as
serve; a mixture of experts also with expert parallel over the tensor-parallel group, EP = TP), each
valid for the model (roofline.models.split.valid_splits) and at most `devices` devices (default:
MOST_DEVICES, or a node of a system with more). The tensor-parallel layouts of one
node are all tried; pipeline stages only when none of them meets the targets, the fewest stages first,
stopping at the first that does (a stage more only adds devices to what already serves). Data-parallel
replicas are left out: a replica costs what the split it copies costs per token, so the cheapest split
is the cheapest replica.

Each candidate whose weights and one sequence's KV cache fit (roofline.models.memory, closed form) is
quoted (roofline.serving.quote: serve's batch, the largest the ITL target allows or the batch given,
and the workload's throughput and cost at it, without the report's curve and goodput), and meets the
targets when a batch meets --itl-slo and the prompt's prefill meets --ttft-slo, both at the floor as
serve checks them. Among those, the cheapest:

    cost per output token = devices / expected tokens/s        (device-seconds a token; × price / 3600
                                                                per device-hour gives money)

with the expected tokens/s the middle of the workload throughput's band (prefill counted), as `plan`
ranks by expected times; ties go to fewer devices. `serve` then shows the winner's whole report
(Quote.report(), from the same prefill and decode step model).
"""

from __future__ import annotations

from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.hardware import Machine, System, get_system
from roofline.models.memory import DEFAULT_UTILIZATION, device_kv_bytes, device_weights_bytes
from roofline.models.shared import sharing
from roofline.models.split import valid_splits
from roofline.models.step import Step
from roofline.parallel import MOST_DEVICES, NODE_DEVICES, Split, deploy
from roofline.serving.efficiency import Efficiency
from roofline.serving.quote import Quote, quote
from roofline.vocab import Phase


@frozen
class Candidate:
    """One split tried: its quote when it was served, and why it wins or loses."""

    split: Split
    report: Quote | None
    reason: str
    meets: bool

    @property
    def expected_tokens_per_s(self) -> float | None:
        if self.report is None:
            return None
        t = self.report.throughput
        return (t.low + t.high) / 2

    @property
    def device_s_per_token(self) -> float | None:
        """devices / expected tokens/s: what a token costs in device time."""
        e = self.expected_tokens_per_s
        return None if not e else self.split.devices / e

    def to_dict(self) -> dict[str, Any]:
        r = self.report
        return {"split": str(self.split), **self.split.to_dict(), "meets_targets": self.meets, "reason": self.reason,
                "batch": None if r is None else r.batch,
                "throughput_tokens_per_s": None if r is None else r.throughput.to_dict(),
                "device_s_per_output_token": self.device_s_per_token,
                "cost_per_million_output_tokens": None if r is None or r.cost_output is None else
                r.cost_output.to_dict()}


@frozen
class ServeSearch:
    """Every candidate split of a workload, the cheapest that meets the targets first."""

    candidates: tuple[Candidate, ...]
    devices: int

    @property
    def winner(self) -> Candidate | None:
        return self.candidates[0] if self.candidates and self.candidates[0].meets else None

    def to_dict(self) -> dict[str, Any]:
        w = self.winner
        return {"winner": None if w is None else str(w.split), "devices": self.devices,
                "rule": "the cheapest split meeting the targets: devices / expected tokens/s (the middle of the "
                        "workload throughput's band), fewer devices on a tie; engines' layouts (TP in a node, "
                        "PP across nodes, EP = TP for experts)",
                "candidates": [c.to_dict() for c in self.candidates]}


def engine_layouts(step: Step, per_node: int, devices: int) -> list[Split]:
    """The splits engines deploy, valid for the model, of at most `devices` devices with nodes of
    `per_node` (module docstring)."""
    out = []
    for sp in valid_splits(step.config, devices, per_node, 1, Phase.DECODE, step.seq):
        if sp.dp != 1 or (sp.pp > 1 and sp.tp != per_node) or sp.ep not in (1, sp.tp):
            continue
        out.append(sp)
    return out


def serve_search(step: Step, machine: str | Machine | System, *, output: int, batch: int | None = None,
                 ttft_slo_s: float | None = None, itl_slo_s: float | None = None,
                 price_per_device_hour: float | None = None, utilization: float = DEFAULT_UTILIZATION,
                 overlap: bool = False, efficiency: Efficiency | None = None,
                 devices: int | None = None) -> ServeSearch:
    """Serve `step`'s workload on each engine layout of `machine` and rank them (module docstring); what
    the layouts would each work out again with the same inputs is worked out once (roofline.models.shared)."""
    with sharing():
        return _search(step, machine, output, batch, ttft_slo_s, itl_slo_s, price_per_device_hour, utilization,
                       overlap, efficiency, devices)


def _search(step: Step, machine: str | Machine | System, output: int, batch: int | None, ttft_slo_s: float | None,
            itl_slo_s: float | None, price_per_device_hour: float | None, utilization: float, overlap: bool,
            efficiency: Efficiency | None, devices: int | None) -> ServeSearch:
    """serve_search's body."""
    if isinstance(machine, Machine):
        raise RooflineError("searching a split needs a system or a catalog device (its link), not a parsed Machine")
    bare = get_system(machine)
    most = MOST_DEVICES if bare.from_device else min(bare.max_devices, max(MOST_DEVICES, bare.devices_per_node))
    n = devices if devices is not None else most
    per_node = NODE_DEVICES if bare.from_device else bare.devices_per_node  # a bare device: HGX boards of 8
    tried: list[Candidate] = []
    layouts = engine_layouts(step, per_node, n)
    one_node = [sp for sp in layouts if sp.pp == 1]
    for sp in one_node:
        tried.append(_try(step, machine, sp, output, batch, ttft_slo_s, itl_slo_s, price_per_device_hour,
                          utilization, overlap, efficiency))
    if not any(c.meets for c in tried):
        for sp in sorted((sp for sp in layouts if sp.pp > 1), key=lambda sp: (sp.devices, sp.ep)):
            tried.append(_try(step, machine, sp, output, batch, ttft_slo_s, itl_slo_s, price_per_device_hour,
                              utilization, overlap, efficiency))
            if tried[-1].meets:
                break
    good = sorted((c for c in tried if c.meets), key=lambda c: (c.device_s_per_token or 0.0, c.split.devices))
    rest = [c for c in tried if not c.meets]
    if not good and batch is not None:  # a batch given that no layout holds: the cheapest served, as serve warns
        good = sorted((c for c in tried if c.report is not None), key=lambda c: (c.device_s_per_token or 0.0,
                                                                                   c.split.devices))
        good = [Candidate(c.split, c.report, c.reason, True) for c in good]
        rest = [c for c in tried if c.report is None]
    if good:
        best = good[0]
        cost = best.device_s_per_token or 0.0
        ranked = [Candidate(best.split, best.report, "best: the cheapest meeting the targets", True)]
        for c in good[1:]:
            more = (c.device_s_per_token or 0.0) / cost - 1 if cost else 0.0
            ranked.append(Candidate(c.split, c.report, f"costs {more:.0%} more per output token", True))
        return ServeSearch((*ranked, *rest), n)
    return ServeSearch(tuple(rest), n)


def _try(step: Step, machine: str | System, sp: Split, output: int, batch: int | None, ttft_slo_s: float | None,
         itl_slo_s: float | None, price: float | None, utilization: float, overlap: bool,
         efficiency: Efficiency | None) -> Candidate:
    """One layout: refused by the closed-form memory fit, refused by serve's checks (one line why), or quoted."""
    d = deploy(machine, sp)
    cap = d.machine.memory_capacity_bytes
    if cap is not None:
        weights = device_weights_bytes(step.config, sp, step.dtypes)
        kv = device_kv_bytes(step.config, sp, 1, step.seq + output, step.dtypes)
        if weights + kv > cap * utilization:
            return Candidate(sp, None, f"does not fit: weights + one sequence's KV cache {(weights + kv) / 2**30:.1f} "
                                       f"GiB > {cap * utilization / 2**30:.1f} GiB usable", False)
    try:
        r = quote(step, d, output=output, batch=batch, ttft_slo_s=ttft_slo_s, itl_slo_s=itl_slo_s,
                  price_per_device_hour=price, utilization=utilization, overlap=overlap, efficiency=efficiency)
    except RooflineError as exc:
        return Candidate(sp, None, exc.marked, False)  # its parameters still marked: the CLI names its flags
    fits = r.max_batch_memory is None or r.batch <= r.max_batch_memory
    meets = fits and (itl_slo_s is None or r.itl_mean.floor <= itl_slo_s) and r.ttft_met is not False
    return Candidate(sp, r, "" if meets else ("the batch does not fit" if not fits else "misses a target"), meets)


def no_split_meets(s: ServeSearch) -> str:
    """One line: no layout serves the workload within the targets, and why the one that came closest
    does not (the most devices served or refused by serve itself, else the last refused by memory)."""
    by_serve = [c for c in s.candidates if not c.reason.startswith("does not fit: weights")]
    closest = by_serve[-1] if by_serve else (s.candidates[-1] if s.candidates else None)
    if closest is None:
        return f"no valid split of up to {s.devices} devices serves it"
    return (f"no split of up to {s.devices} devices serves it within the targets; the closest, {closest.split}: "
            f"{closest.reason or 'misses a target'}")


__all__ = ["Candidate", "ServeSearch", "engine_layouts", "no_split_meets", "serve_search"]
