"""Collectives as kernels: the bytes each device moves over the busiest link, as nccl-tests counts them.

For a message of S bytes over a group of n devices (nccl-tests, doc/PERFORMANCE.md: busbw = algbw ×
factor, "the bandwidth the hardware links see"), each device sends, and receives, factor × S bytes:

    all-reduce                 2(n−1)/n · S     S: the buffer each device holds and gets back reduced
    all-gather, reduce-scatter   (n−1)/n · S     S: the whole gathered (or scattered) buffer
    all-to-all                   (n−1)/n · S     S: each device's whole send buffer
    send/recv (one hop)                1 · S

Time on a link of bandwidth BW per direction and start-up latency α (the alpha-beta model):

    t = α + factor · S / BW

which `roofline.placement` computes for a kernel whose Cost has bytes on Level.LINK or Level.NETWORK
and a machine whose level has that bandwidth and latency. A reduction also adds (n−1)/n · elements
to each device's vector work (the reduce-scatter half of a ring all-reduce); its DRAM bytes are the
buffer read once and written once.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.graph import Op, Tensor
from roofline.vocab import Level, Unit


class Collective(StrEnum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


# bytes on the busiest link per byte of message, for a group of n devices (nccl-tests' bus factors)
BUS_FACTOR: dict[Collective, Callable[[int], float]] = {
    Collective.ALL_REDUCE: lambda n: 2.0 * (n - 1) / n,
    Collective.ALL_GATHER: lambda n: (n - 1) / n,
    Collective.REDUCE_SCATTER: lambda n: (n - 1) / n,
    Collective.ALL_TO_ALL: lambda n: (n - 1) / n,
    Collective.SEND_RECV: lambda n: 1.0,
}
FORMULA = {
    Collective.ALL_REDUCE: "2(n−1)/n", Collective.ALL_GATHER: "(n−1)/n", Collective.REDUCE_SCATTER: "(n−1)/n",
    Collective.ALL_TO_ALL: "(n−1)/n", Collective.SEND_RECV: "1",
}


@frozen
class CollectiveCall:
    """What a collective op is, for reports: its kind, group size, roof and message size S."""

    kind: Collective
    group: int
    level: Level
    message_bytes: float
    algorithm: str = ""  # an all-reduce's algorithm (roofline.parallel.algorithms), and why it runs
    why: str = ""


def bus_bytes(kind: Collective, message_bytes: float, group: int) -> float:
    """factor(n) × S: what one device sends over the busiest link (and receives) for one collective."""
    if group < 1 or (kind is not Collective.SEND_RECV and group < 2):
        raise RooflineError(f"a {kind} needs a group of at least 2 devices, got {group}")
    return BUS_FACTOR[kind](group) * message_bytes


def collective_op(name: str, kind: Collective, message: Tensor, out: Tensor, group: int, level: Level,
                  count: int = 1, algorithm: tuple[str, str, float] | None = None) -> Op:
    """One collective over `group` devices as an Op: reads `message` from memory, writes `out`, moves
    factor(n)·S bytes over `level` (Level.LINK inside a node, Level.NETWORK across nodes). `algorithm`
    (name, its bytes' formula, its factor): an all-reduce's algorithm (roofline.parallel.algorithms) in
    place of the bus factor."""
    if level not in (Level.LINK, Level.NETWORK):
        raise RooflineError(f"{name}: a collective crosses a link or the network, not {level}")
    s = out.bytes if kind is Collective.ALL_GATHER else message.bytes  # nccl-tests' size: the whole buffer
    moved = bus_bytes(kind, s, group)
    text = f"{FORMULA[kind]} · S"
    if algorithm is not None:
        text, moved = f"{algorithm[0]}: {algorithm[1]}", algorithm[2] * s
    reduces = kind in (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER)
    flop = (group - 1) / group * message.elements if reduces else 0.0
    formula = (f"{kind}: {text} with n = {group}, S = {s:.6g} B → {moved:.6g} B on the {level}"
               + (f"; reduction (n−1)/n · elements = {flop:.6g} FLOP" if reduces else ""))
    return Op(name, str(kind), (message,), (out,), {Unit.VECTOR: flop} if flop else {}, count, formula=formula,
              traffic={level: moved})
