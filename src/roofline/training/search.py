"""The training split search (`roofline plan --train`): every valid split of a training step over a
system's devices, ranked by expected step time, with why each loses.

Candidates use exactly `devices` devices (default: the whole system): tp × cp × pp × dp = devices with

    tp   divides the query heads (and the KV heads, the MLP width), at most a node's devices
    cp   a power of two dividing the sequence (S/cp even), at most MAX_CP
    pp   at most the layers (uneven stages allowed: the fullest holds ⌈L/pp⌉); m = B/(dp·b) ≥ pp
    dp   devices / (tp·cp·pp), dividing B / b
    ep   mixtures of experts: a divisor of the experts dividing tp·cp·dp, at most MAX_EP (else 1)

each refused or accepted by the same checks `roofline train` runs (roofline.training.setup). A split
whose closed-form memory (model states + activations, roofline.training.memory) exceeds the usable
memory is not built: its row says by how much. The others are built and placed as `roofline train`
does; one micro-batch's kernels depend only on (tp, cp, ep) and their roofs, so each is built once.

Ranked by the expected step time (the middle of its band); ties by the floor, then fewer devices. Each
loser names what costs it against the winner: its step time, bubble, exposed communication and memory.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any

from roofline.errors import RooflineError
from roofline.expectation.shipped import for_machine
from roofline.frozen import frozen
from roofline.hardware import get_system
from roofline.models.split import divisors
from roofline.parallel import deploy
from roofline.training.analysis import DEFAULT_UTILIZATION, MicroCache, TrainAnalysis, analyze_training
from roofline.training.memory import TrainMemory, train_memory
from roofline.training.setup import TrainSetup, TrainSplit, check_setup
from roofline.units import format_bytes, format_time

MAX_CP = 32
MAX_EP = 64


@frozen
class TrainRow:
    split: TrainSplit
    memory: TrainMemory
    analysis: TrainAnalysis | None = None  # None: not built (its memory alone does not fit)
    rank: int | None = None
    reason: str = ""

    @property
    def expected_s(self) -> float | None:
        a = self.analysis
        return None if a is None else (a.low.step_s + a.high.step_s) / 2

    def to_dict(self) -> dict[str, Any]:
        a = self.analysis
        d: dict[str, Any] = {"split": str(self.split), **self.split.to_dict(), "rank": self.rank,
                             "reason": self.reason, "fits": self.memory.fits,
                             "memory_bytes_per_device": self.memory.per_device_bytes}
        if a is not None:
            fl, lo, hi = a.floor, a.low, a.high
            d.update({"micro_batches": a.setup.micro_batches, "step_time_s": {"floor": fl.step_s, "expected":
                      {"low": lo.step_s, "high": hi.step_s}}, "mfu": {"floor": a.mfu(fl.step_s), "expected":
                      {"low": a.mfu(hi.step_s), "high": a.mfu(lo.step_s)}}, "pipeline_bubble": a.bubble,
                      "exposed_communication_s": fl.exposed_comm_s, "communication_s": fl.comm_s,
                      "tokens_per_s": a.tokens_per_s})
        return d


@frozen
class TrainSearch:
    setup: TrainSetup  # the step as asked (its split the first candidate's)
    system: str
    devices: int
    rows: tuple[TrainRow, ...]
    problem: str = ""
    warnings: tuple[str, ...] = field(default=())

    @property
    def winner(self) -> TrainRow | None:
        return self.rows[0] if self.rows and self.rows[0].rank == 1 else None

    def to_dict(self) -> dict[str, Any]:
        s = self.setup
        w = self.winner
        return {"model": s.config.name, "system": self.system, "devices": self.devices, "seq": s.seq,
                "global_batch": s.global_batch, "micro_batch": s.micro_batch, "zero": int(s.zero),
                "recompute": str(s.recompute), "optimizer": str(s.optimizer), "precision": str(s.precision),
                "overlap": s.overlap, "candidates": len(self.rows), "winner": None if w is None else w.to_dict(),
                "problem": self.problem or None, "ranked_by": "expected step time (the middle of its band)",
                "rows": [r.to_dict() for r in self.rows]}


def candidate_splits(setup: TrainSetup, devices: int, node: int) -> list[TrainSplit]:
    """The module docstring's candidates, each passing `check_setup`."""
    cfg, s = setup.config, setup
    out: list[TrainSplit] = []
    sequences = s.global_batch // s.micro_batch if s.global_batch % s.micro_batch == 0 else 0
    cps = [c for c in (1 << i for i in range(6))
           if c <= MAX_CP and s.seq % c == 0 and (c == 1 or (s.seq // c) % 2 == 0)]
    eps = divisors(cfg.num_experts, MAX_EP) if cfg.is_moe else [1]
    for tp in divisors(cfg.num_heads, node):
        for cp in cps:
            for pp in divisors(devices // (tp * cp)) if devices % (tp * cp) == 0 else []:
                dp = devices // (tp * cp * pp)
                if pp > cfg.num_layers or not sequences or sequences % dp or sequences // dp < pp:
                    continue
                for ep in eps:
                    if (tp * cp * dp) % ep:
                        continue
                    sp = TrainSplit(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep)
                    try:
                        check_setup(cfg, s.seq, s.global_batch, s.micro_batch, sp, s.zero)
                        if s.virtual_stages > 1 and ((sequences // dp) % pp or pp * s.virtual_stages > cfg.num_layers):
                            continue
                    except RooflineError:
                        continue
                    out.append(sp)
    return out


def _gib(x: float) -> str:
    return format_bytes(x, binary=True)


def _loses(r: TrainRow, w: TrainRow) -> str:
    a, b = r.analysis, w.analysis
    assert a is not None and b is not None and r.expected_s is not None and w.expected_s is not None
    slower = (r.expected_s / w.expected_s - 1) * 100
    parts = [f"slower by {slower:.1f}% (the bands' middles: {format_time(r.expected_s)} vs "
             f"{format_time(w.expected_s)})"]
    parts.append(f"bubble {a.bubble:.1%} (vs {b.bubble:.1%})")
    parts.append(f"exposed communication {format_time(a.floor.exposed_comm_s)} (vs "
                 f"{format_time(b.floor.exposed_comm_s)})")
    parts.append(f"memory {_gib(r.memory.per_device_bytes)} (vs {_gib(w.memory.per_device_bytes)})")
    return "; ".join(parts)


def search_training(setup: TrainSetup, machine: str, devices: int | None = None,
                    utilization: float = DEFAULT_UTILIZATION) -> TrainSearch:
    """Every candidate of `setup`'s step (its split ignored) over `devices` of `machine`, ranked."""
    system = get_system(machine, devices=devices)
    n = devices if devices is not None else system.max_devices
    if n > system.max_devices:
        raise RooflineError(f"--devices {n}: {system.id} has {system.max_devices}")
    node = system.devices_per_node
    splits = candidate_splits(setup, n, node)
    if not splits:
        raise RooflineError(f"no valid training split of {setup.config.name} uses {n} devices with global batch "
                            f"{setup.global_batch} and micro-batch {setup.micro_batch} (tp × cp × pp × dp = {n}, dp "
                            "dividing the micro-batches); try another --devices or --global-batch")
    cache: MicroCache = {}
    times = None
    deployments: dict[tuple[int, int], Any] = {}
    rows: list[TrainRow] = []
    for sp in splits:
        st = setup.with_split(sp)
        key = (sp.tp, sp.ep)
        if key not in deployments:
            deployments[key] = deploy(system, sp.inference_split())
        d = replace(deployments[key], split=sp.inference_split())
        times = times or for_machine(d.machine.id)
        mem = train_memory(st, d.machine.memory_capacity_bytes, utilization, st.plan.value == "none")
        if mem.fits is False:
            rows.append(TrainRow(sp, mem))
            continue
        a = analyze_training(st, machine, times, utilization, deployment=d, cache=cache)
        rows.append(TrainRow(sp, a.memory, a))
    built = sorted((r for r in rows if r.analysis is not None and r.memory.fits is not False),
                   key=lambda r: (r.expected_s or 0.0, r.analysis.floor.step_s if r.analysis else 0.0, r.split.devices,
                                  r.split.pp, r.split.tp))
    out: list[TrainRow] = []
    problem = ""
    if built:
        w = built[0]
        out.append(replace(w, rank=1, reason="best: the lowest expected step time"))
        out += [replace(r, rank=i + 2, reason=_loses(r, w)) for i, r in enumerate(built[1:])]
    else:
        problem = "no candidate fits"
    misfits = sorted((r for r in rows if r not in built), key=lambda r: r.memory.per_device_bytes)
    for r in misfits:
        out.append(replace(r, reason=f"does not fit: {_gib(r.memory.per_device_bytes)} > "
                                     f"{_gib(r.memory.usable_bytes or 0.0)} usable a device"))
    if problem and misfits:
        c = misfits[0]
        problem = (f"no valid split of {n} devices of {system.id} fits {setup.config.name}'s training step: the "
                   f"closest, {c.split}, needs {_gib(c.memory.per_device_bytes)} a device > "
                   f"{_gib(c.memory.usable_bytes or 0.0)} usable; try --zero 3, --recompute full or more devices")
    return TrainSearch(setup, system.id, n, tuple(out), problem)


__all__ = ["MAX_CP", "MAX_EP", "TrainRow", "TrainSearch", "candidate_splits", "search_training"]
