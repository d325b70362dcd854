"""One collective as NCCL and the engines run it: the algorithm, the bytes it moves, its floor, its band.

An all-reduce of S bytes over n devices moves, per device and per direction (what one device sends
while it receives as much), by algorithm:

    ring       2(n−1)/n · S   reduce-scatter then all-gather round the ring, 2(n−1) steps (nccl-tests
                              doc/PERFORMANCE.md: this factor is busbw's, "the bandwidth the links see")
    tree       2(n−1)/n · S   NCCL's double binary tree, 2⌈log2 n⌉ steps; it cannot move fewer bytes
                              than the ring: 2(n−1)/n · S is the least any all-reduce without reduction
                              in the network moves (Patarasuk and Yuan 2009, bandwidth-optimal all-reduce)
    nvls            S         NVLink SHARP (NCCL 2.17+ on third-generation NVSwitch: HGX H100/H200,
                              B200, GB200 NVL72): the switch reduces; each device sends its buffer once
                              and receives the result once
    one-shot   (n−1) · S      engines' custom all-reduce for small messages (vLLM
                              csrc/custom_all_reduce.cuh cross_device_reduce_1stage, TensorRT-LLM
                              AllReduceStrategy ONESHOT): each device reads every peer's whole buffer
                              and reduces locally, one step
    two-shot   2(n−1)/n · S   the same engines' reduce-scatter + all-gather over peer buffers
                              (cross_device_reduce_2stage, TWOSHOT), two steps

The floor of one collective is α_floor + bytes / BW, BW the link's figure per direction; α_floor is
the system's start-up floor: the fastest all-reduce any measured engine ran on it (every size, every
group), so no measured row is below the floor. nccl-tests reports algbw = S / t and busbw = algbw ·
2(n−1)/n whatever the algorithm, so under NVLS busbw can reach 2(n−1)/n · BW (787.5 GB/s on 8 GPUs of
450 GB/s), above the per-direction link rate; the ring's busbw at most BW.

Which algorithm runs (`choose`, "auto"), as the engines decide:
  1. a group inside one node of at most 8 devices and S ≤ 8 MiB: the engine's custom all-reduce
     (vLLM's default max_size 8 MiB; at most 8 ranks): one-shot when n = 2, or n ≤ 4 and S < 512 KiB,
     or n ≤ 8 and S < 256 KiB (vLLM csrc/custom_all_reduce.cuh), two-shot otherwise;
  2. else NCCL: NVLS where the system has it and the group is inside its NVLink domain (8×H200:
     NCCL 2.27 runs Ring/LL up to 1 MiB and NVLS from 2 MiB, stas00/ml-engineering
     network/benchmarks/results/all-reduce-8xH200.md), else the ring.
The expected band is α + bus bytes / busbw fitted per system and group size on aiconfigurator-core's
measured NCCL and custom all-reduce tables (roofline.calibration.collective writes
parallel/data/collectives.json), the 10th–90th percentile of measured / fitted around it.

Other collectives (all-gather, reduce-scatter, all-to-all) run one algorithm here, the ring's
(n−1)/n · S (roofline.parallel.collectives).

Layering: imports errors, units, vocab, graph, hardware and this room.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.graph import Op, Tensor
from roofline.hardware import System, get_system
from roofline.parallel.collectives import BUS_FACTOR, FORMULA, Collective, CollectiveCall, collective_op
from roofline.units import format_bytes, format_time
from roofline.vocab import Level

CUSTOM_MAX_BYTES = 8 * 2**20  # vLLM CustomAllreduce max_size default: 8 MiB
CUSTOM_MAX_RANKS = 8  # vLLM's custom all-reduce: world sizes 2, 4, 6, 8


class Algorithm(StrEnum):
    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"
    ONE_SHOT = "one-shot"
    TWO_SHOT = "two-shot"


# bytes per device per direction for an all-reduce, per byte of S, over n devices
ALL_REDUCE_BYTES: Mapping[Algorithm, tuple[str, Any]] = {
    Algorithm.RING: ("2(n−1)/n · S", lambda n: 2.0 * (n - 1) / n),
    Algorithm.TREE: ("2(n−1)/n · S", lambda n: 2.0 * (n - 1) / n),
    Algorithm.NVLS: ("S", lambda n: 1.0),
    Algorithm.ONE_SHOT: ("(n−1) · S", lambda n: float(n - 1)),
    Algorithm.TWO_SHOT: ("2(n−1)/n · S", lambda n: 2.0 * (n - 1) / n),
}
STEPS: Mapping[Algorithm, str] = {
    Algorithm.RING: "2(n−1) steps", Algorithm.TREE: "2⌈log2 n⌉ steps",
    Algorithm.NVLS: "2 steps: to the switch and back",
    Algorithm.ONE_SHOT: "1 step", Algorithm.TWO_SHOT: "2 steps",
}
CUSTOM = (Algorithm.ONE_SHOT, Algorithm.TWO_SHOT)  # the engines' own kernels; the rest are NCCL's


@frozen
class GroupFit:
    """t = α + bus bytes / busbw, fitted on one table's rows of one group size; the band is measured /
    fitted at its 10th and 90th percentile."""

    alpha_s: float
    busbw_bytes_per_s: float
    low: float
    high: float
    rows: int
    mape: float

    def time_s(self, bus_bytes: float) -> float:
        return self.alpha_s + bus_bytes / self.busbw_bytes_per_s


@frozen
class PathFit:
    """One path's fits (NCCL, or an engine's custom all-reduce) on one system, by group size."""

    path: str  # nccl, custom
    engine: str
    version: str
    groups: Mapping[int, GroupFit]


@frozen
class SystemCollectives:
    """What a system's collectives need beyond its links: NVLS, the measured start-up floor, the fits."""

    system: str
    table: str  # aiconfigurator's system name
    nvls: bool
    nvls_source: str
    alpha_floor_s: float
    alpha_floor_from: str
    fits: Mapping[str, PathFit]


@frozen
class AlgorithmFloor:
    """One algorithm's floor for one collective: the bytes each device sends and the time, derived."""

    algorithm: Algorithm
    bytes_per_device: float  # sent per direction (and received)
    floor_s: float
    formula: str


@frozen
class CollectiveEstimate:
    """One collective on one system: every algorithm's floor, the one that runs and why, its band."""

    kind: Collective
    message_bytes: float
    group: int
    system: str
    link_name: str
    link_bytes_per_s: float
    spans_nodes: bool
    alpha_floor_s: float
    alpha_floor_from: str
    floors: tuple[AlgorithmFloor, ...]
    chosen: Algorithm
    why: str
    expected_s: float | None
    band_s: tuple[float, float] | None
    expected_from: str

    @property
    def floor(self) -> AlgorithmFloor:
        return next(f for f in self.floors if f.algorithm is self.chosen)

    @property
    def lowest(self) -> AlgorithmFloor:
        """The lowest floor of any algorithm the system runs: what no measurement may beat."""
        return min(self.floors, key=lambda f: f.floor_s)

    def algbw(self, time_s: float) -> float:
        """nccl-tests' algbw = S / t."""
        return self.message_bytes / time_s

    def busbw(self, time_s: float) -> float:
        """nccl-tests' busbw = algbw × its factor (2(n−1)/n for all-reduce), whatever the algorithm."""
        return self.algbw(time_s) * BUS_FACTOR[self.kind](self.group)

    def to_dict(self) -> dict[str, Any]:
        f = self.floor
        out: dict[str, Any] = {
            "collective": str(self.kind), "message_bytes": self.message_bytes, "devices": self.group,
            "system": self.system, "link": self.link_name, "link_bytes_per_s": self.link_bytes_per_s,
            "spans_nodes": self.spans_nodes, "alpha_floor_s": self.alpha_floor_s,
            "alpha_floor_from": self.alpha_floor_from, "algorithm": str(self.chosen), "why": self.why,
            "floor_s": f.floor_s, "bytes_per_device": f.bytes_per_device, "formula": f.formula,
            "floor_algbw_bytes_per_s": self.algbw(f.floor_s), "floor_busbw_bytes_per_s": self.busbw(f.floor_s),
            "lowest_floor": {"algorithm": str(self.lowest.algorithm), "floor_s": self.lowest.floor_s},
            "algorithms": [{"algorithm": str(a.algorithm), "bytes_per_device": a.bytes_per_device,
                            "floor_s": a.floor_s, "formula": a.formula} for a in self.floors],
            "expected_s": self.expected_s, "band_s": list(self.band_s) if self.band_s else None,
            "expected_from": self.expected_from,
        }
        if self.expected_s is not None:
            out["expected_algbw_bytes_per_s"] = self.algbw(self.expected_s)
            out["expected_busbw_bytes_per_s"] = self.busbw(self.expected_s)
        return out


def all_reduce_op(name: str, message: Tensor, out: Tensor, group: int, level: Level, rule: AllReduceRule,
                  count: int = 1) -> tuple[Op, CollectiveCall]:
    """An all-reduce of `message` over `group` devices as the op the rule's algorithm makes of it (its bytes
    on `level`, per device per direction: ALL_REDUCE_BYTES), with the call a report names it by."""
    alg, why = rule.pick(message.bytes, group, level is Level.NETWORK)
    text, factor = ALL_REDUCE_BYTES[alg]
    op = collective_op(name, Collective.ALL_REDUCE, message, out, group, level, count, (str(alg), text, factor(group)))
    return op, CollectiveCall(Collective.ALL_REDUCE, group, level, float(message.bytes), str(alg), why)


# --- the shipped data ------------------------------------------------------------------------------

@cache
def _data() -> dict[str, Any]:
    # a plain file beside the module (the wheel installs the package unzipped): importlib.resources would cost
    # every command that places a collective ~11 ms of start-up (zipfile, tempfile) for the same read
    text = (Path(__file__).parent / "data" / "collectives.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def shipped_source() -> str:
    """Where the shipped fits come from (the package and version of the measured tables)."""
    return str(_data()["source"])


def system_collectives(system: str) -> SystemCollectives | None:
    """The shipped collective data of a catalog system (None: no measured tables for it)."""
    raw = _data()["systems"].get(system)
    if raw is None:
        return None
    fits = {path: PathFit(path, f["engine"], f["version"],
                          {int(n): GroupFit(g["alpha_s"], g["busbw_bytes_per_s"], g["low"], g["high"], g["rows"],
                                            g["mape"]) for n, g in f["groups"].items()})
            for path, f in raw["fits"].items()}
    return SystemCollectives(system, raw["table"], bool(raw["nvls"]), raw.get("nvls_source", ""),
                             float(raw["alpha_floor_s"]), raw["alpha_floor_from"], fits)


def has_nvls(system: str) -> bool:
    """Whether NCCL runs NVLink SHARP on this system (third-generation NVSwitch), per the shipped data."""
    return system in _data()["nvls"]


# --- the floor and the choice ----------------------------------------------------------------------

def all_reduce_bytes(algorithm: Algorithm, message_bytes: float, group: int) -> float:
    """Bytes one device sends (and receives) over its link for an all-reduce of S over n devices."""
    return ALL_REDUCE_BYTES[algorithm][1](group) * message_bytes


def available(system: System, group: int, spans_nodes: bool) -> tuple[Algorithm, ...]:
    """The all-reduce algorithms that run on `group` devices of `system`: ring and tree always; NVLS
    inside an NVLink domain with third-generation NVSwitch; one-shot and two-shot inside one node of
    peer-to-peer buffers, at most 8 ranks (vLLM's custom all-reduce)."""
    return _available(has_nvls(system.id), group, spans_nodes)


def _available(nvls: bool, group: int, spans_nodes: bool) -> tuple[Algorithm, ...]:
    out = [Algorithm.RING, Algorithm.TREE]
    if not spans_nodes and nvls:
        out.append(Algorithm.NVLS)
    if not spans_nodes and group <= CUSTOM_MAX_RANKS:
        out += CUSTOM
    return tuple(out)


def _one_shot(message_bytes: Any, group: int) -> Any:
    """vLLM's one-shot test (custom_all_reduce.cuh), on a number or a numpy array of sizes."""
    if group == 2:
        return message_bytes == message_bytes  # every size (an array of True for an array)
    limit = 512 * 2**10 if group <= 4 else 256 * 2**10
    return message_bytes < limit


@frozen
class AllReduceRule:
    """How a deployment's all-reduces run (`--allreduce`): the algorithm asked for (None: auto, as engines
    choose, `choose`) and whether the system's switch reduces (NVLS, `has_nvls`). Where the asked one does
    not run on a group (NVLS or the custom kernels across nodes, the custom kernels past 8 ranks), the
    group runs the ring and says so."""

    asked: Algorithm | None = None
    nvls: bool = False

    @classmethod
    def for_system(cls, system: str, asked: Algorithm | str | None = None, name: str = "") -> AllReduceRule:
        """The rule on a catalog system (`system` its id; "" for no system); asking for NVLS on a system
        without NVLink SHARP is refused in one line."""
        alg = None if asked is None or str(asked) == "auto" else _algorithm(asked)
        nvls = bool(system) and has_nvls(system)
        if alg is Algorithm.NVLS and not nvls:
            have = ", ".join(sorted(_data()["nvls"]))
            raise RooflineError(f"--allreduce nvls: {system or name or 'this device'} has no NVLink SHARP "
                                f"(third-generation NVSwitch); systems with it: {have}; use ring, tree, one-shot, "
                                "two-shot or auto")
        return cls(alg, nvls)

    def pick(self, message_bytes: float, group: int, spans_nodes: bool) -> tuple[Algorithm, str]:
        """The algorithm an all-reduce of `message_bytes` over `group` devices runs, and why."""
        algs = _available(self.nvls, group, spans_nodes)
        if self.asked is None:
            return choose(message_bytes, group, algs, spans_nodes)
        if self.asked in algs:
            return self.asked, "asked for (--allreduce)"
        where = "spans nodes" if spans_nodes else f"has {group} devices, past the custom kernels' {CUSTOM_MAX_RANKS}"
        return Algorithm.RING, f"--allreduce {self.asked} does not run here (the group {where}): the ring"

    def factors(self, message_bytes: Any, group: int, spans_nodes: bool) -> Any:
        """`pick`'s bytes per device per byte of S, over a numpy array of sizes (the step model's grids)."""
        import numpy as np

        s = np.asarray(message_bytes, dtype=np.float64)
        algs = _available(self.nvls, group, spans_nodes)
        if self.asked is not None:
            alg = self.asked if self.asked in algs else Algorithm.RING
            return np.full(s.shape, ALL_REDUCE_BYTES[alg][1](group))
        out = np.full(s.shape, ALL_REDUCE_BYTES[Algorithm.RING][1](group))  # the ring's and two-shot's
        if Algorithm.NVLS in algs:
            nvls = s > CUSTOM_MAX_BYTES if Algorithm.ONE_SHOT in algs else np.ones(s.shape, dtype=bool)
            out = np.where(nvls, 1.0, out)
        if Algorithm.ONE_SHOT in algs:
            out = np.where((s <= CUSTOM_MAX_BYTES) & _one_shot(s, group), float(group - 1), out)
        return out


def choose(message_bytes: float, group: int, algorithms: tuple[Algorithm, ...],
           spans_nodes: bool = False) -> tuple[Algorithm, str]:
    """The algorithm engines run for an all-reduce of S bytes over n devices, and why (module docstring)."""
    kib = message_bytes / 2**10
    if Algorithm.ONE_SHOT in algorithms and message_bytes <= CUSTOM_MAX_BYTES:
        if _one_shot(message_bytes, group):
            return Algorithm.ONE_SHOT, (f"the engines' custom all-reduce runs one-shot for {kib:.6g} KiB on {group} "
                                        "devices (vLLM custom_all_reduce.cuh: n = 2, or n ≤ 4 and S < 512 KiB, or "
                                        "n ≤ 8 and S < 256 KiB)")
        return Algorithm.TWO_SHOT, (f"the engines' custom all-reduce (up to vLLM's 8 MiB) runs two-shot, "
                                    f"reduce-scatter + all-gather, for {kib:.6g} KiB on {group} devices")
    if Algorithm.NVLS in algorithms:
        return Algorithm.NVLS, ("NCCL runs NVLink SHARP on this NVSwitch system above the custom all-reduce's 8 MiB "
                                "(8×H200, NCCL 2.27: NVLS from 2 MiB, stas00/ml-engineering)")
    if spans_nodes:
        why = "across nodes"
    elif Algorithm.ONE_SHOT in algorithms:
        why = "above the custom all-reduce's 8 MiB, without NVLink SHARP on this system"
    else:
        why = f"over {group} devices, past the custom all-reduce's {CUSTOM_MAX_RANKS} ranks, without NVLink SHARP"
    return Algorithm.RING, f"the ring {why} (the tree moves as many bytes)"


def _spans(system: System, group: int) -> bool:
    if group > system.max_devices:
        raise RooflineError(f"--devices {group} is more than {system.id} has ({system.max_devices})")
    return group > system.devices_per_node


def estimate(kind: Collective | str, message_bytes: float, machine: str | System, devices: int | None = None,
             algorithm: Algorithm | str | None = None, nccl_only: bool = False) -> CollectiveEstimate:
    """One collective of `message_bytes` (nccl-tests' size S) over `devices` (default: one node) of
    `machine`: every algorithm's floor, the chosen one (`algorithm`, or as engines choose; `nccl_only`:
    as NCCL alone chooses, without the engines' custom all-reduce), its band."""
    kind = Collective(kind)
    system = machine if isinstance(machine, System) else get_system(machine)
    n = system.devices_per_node if devices is None else devices
    if kind is Collective.SEND_RECV:
        raise RooflineError("send/recv is one hop, not a collective over a group; use all-reduce, all-gather, "
                            "reduce-scatter or all-to-all")
    if not isinstance(n, int) or n < 2:
        raise RooflineError(f"--devices must be at least 2 for an {kind.value.replace('_', '-')}, got {n}")
    if not math.isfinite(message_bytes) or message_bytes <= 0:
        raise RooflineError(f"the message size must be positive, got {message_bytes}")
    spans = _spans(system, n)
    _, link = system.link(n, spans)
    data = system_collectives(system.id)
    alpha, alpha_from = ((data.alpha_floor_s, data.alpha_floor_from) if data is not None else
                         (link.latency_s, f"the link's α in {system.id}'s system file (no measured tables for it)"))
    if kind is Collective.ALL_REDUCE:
        algs = available(system, n, spans)
    else:
        algs = (Algorithm.RING,)
    chosen_alg = None if algorithm is None or str(algorithm) == "auto" else _algorithm(algorithm)
    if chosen_alg is not None:
        if kind is not Collective.ALL_REDUCE and chosen_alg is not Algorithm.RING:
            raise RooflineError(f"--algorithm {chosen_alg} is an all-reduce algorithm; a {kind} runs the ring here")
        if chosen_alg not in algs:
            raise RooflineError(_unavailable(chosen_alg, system, n, spans))
    floors = []
    for a in algs:
        if kind is Collective.ALL_REDUCE:
            text, factor = ALL_REDUCE_BYTES[a]
            moved = factor(n) * message_bytes
        else:
            text, moved = f"{FORMULA[kind]} · S", BUS_FACTOR[kind](n) * message_bytes
        steps = STEPS[a] if kind is Collective.ALL_REDUCE else "n−1 steps"
        formula = (f"{a}: α + {text} / BW = {format_time(alpha)} + {format_bytes(moved, binary=True)} / "
                   f"{link.bytes_per_s / 1e9:g} GB/s ({steps})")
        floors.append(AlgorithmFloor(a, moved, alpha + moved / link.bytes_per_s, formula))
    if chosen_alg is not None:
        chosen, why = chosen_alg, "asked for (--algorithm)"
    elif kind is Collective.ALL_REDUCE:
        chosen, why = choose(message_bytes, n, tuple(a for a in algs if not (nccl_only and a in CUSTOM)), spans)
    else:
        chosen, why = Algorithm.RING, f"the one algorithm modelled for an {kind.value.replace('_', '-')}"
    expected, band, origin = _expected(data, kind, chosen, message_bytes, n)
    floor_s = next(f.floor_s for f in floors if f.algorithm is chosen)
    if expected is not None and band is not None and expected < floor_s:  # a fit is never below the floor
        expected, band = floor_s, (max(band[0], floor_s), max(band[1], floor_s))
    return CollectiveEstimate(kind, message_bytes, n, system.id, link.name, link.bytes_per_s, spans, alpha, alpha_from,
                              tuple(floors), chosen, why, expected, band, origin)


def _algorithm(text: Algorithm | str) -> Algorithm:
    try:
        return Algorithm(str(text))
    except ValueError:
        names = ", ".join(a.value for a in Algorithm)
        raise RooflineError(f"unknown algorithm {text!r}; one of: auto, {names}") from None


def _unavailable(a: Algorithm, system: System, n: int, spans: bool) -> str:
    if a is Algorithm.NVLS:
        if spans:
            return (f"--algorithm nvls: {n} devices span nodes of {system.id}; NVLink SHARP reduces inside one "
                    "NVLink domain")
        have = ", ".join(sorted(_data()["nvls"]))
        return (f"--algorithm nvls: {system.id} has no NVLink SHARP (third-generation NVSwitch); systems with it: "
                f"{have}")
    return (f"--algorithm {a}: the engines' custom all-reduce runs inside one node of at most {CUSTOM_MAX_RANKS} "
            f"devices; {n} devices of {system.id} {'span nodes' if spans else 'are more'}")


def _expected(data: SystemCollectives | None, kind: Collective, chosen: Algorithm, message_bytes: float,
              n: int) -> tuple[float | None, tuple[float, float] | None, str]:
    if kind is not Collective.ALL_REDUCE:
        return None, None, f"no fitted band for an {kind.value.replace('_', '-')} (the fits are all-reduce's)"
    if data is None:
        return None, None, "no measured tables for this system: floor only"
    path = "custom" if chosen in CUSTOM else "nccl"
    fit = data.fits.get(path)
    g = fit.groups.get(n) if fit is not None else None
    if fit is None or g is None:
        sizes = ", ".join(str(k) for k in sorted(fit.groups)) if fit is not None else "none"
        return None, None, f"no measured {path} rows for {n} devices on {data.system} (measured: {sizes}): floor only"
    t = g.time_s(BUS_FACTOR[kind](n) * message_bytes)
    origin = (f"α {format_time(g.alpha_s)} + 2(n−1)/n · S / busbw {g.busbw_bytes_per_s / 1e9:.4g} GB/s fitted on "
              f"{g.rows} rows of {fit.engine} {fit.version} ({path} all-reduce, {data.table}, {n} GPUs), band "
              f"×{g.low:.2f}–{g.high:.2f} (10th–90th percentile of measured / fitted); {shipped_source()}")
    return t, (t * g.low, t * g.high), origin


__all__ = [
    "ALL_REDUCE_BYTES",
    "Algorithm",
    "AlgorithmFloor",
    "AllReduceRule",
    "CollectiveEstimate",
    "GroupFit",
    "PathFit",
    "SystemCollectives",
    "all_reduce_bytes",
    "all_reduce_op",
    "available",
    "choose",
    "estimate",
    "has_nvls",
    "shipped_source",
    "system_collectives",
]
