"""Prefill/decode disaggregation as a what-if (`roofline serve --disaggregate P:D`): prefill on a group
of P devices, decode on a group of D, each request's KV cache sent from one to the other.

The model, every term from the same graph and placement as the rest of `serve`:

    groups      each group runs tensor parallel over its own devices inside a node and pipeline parallel
                across nodes (TP = the group's devices up to a node's, PP = the number of nodes it spans,
                the split `roofline plan` prefers): TP P (or TP node × PP P/node) for prefill, the same rule
                for decode (the --tp/--pp/--ep/--dp flags describe the colocated deployment and are not used)
    prefill     the prefill step of one prompt on TP P at batch 1 (serve's TTFT on that group)
    transfer    α + prompt × KV bytes per token per prefill device / BW: each prefill device holds
                max(1, G/P) of the G KV heads and sends its share over its own link, all at once; the link
                is the system's node link between two devices (its figure per direction; on a fully
                connected node one peer link) when P + D fit in one node, else the network; the band
                divides the bytes by the collectives' efficiency (nccl-tests' busbw)
    TTFT        prefill + transfer (the first token comes with the prefill)
    ITL         the decode step on TP D at the batch over the generation (serve's ITL mean and last there)
    rates       prefill requests/s = 1 / prefill (prompts one after another); decode requests/s = batch /
                (output × ITL mean) (a request holds its decode slot for `output` steps)
    balance     among every pair of group sizes (p, d), each a tensor-parallel degree that divides a node
                (1, 2, 4, …) or up to four whole nodes, with p + d ≤ the system's devices: of the pairs
                whose prefill and decode requests/s are within 10% (|log(prefill / decode)| ≤ log 1.1),
                the one with the most requests/s per device (a balanced pair that idles devices is no
                answer); when none is, the closest pair; requests/s of a pair = the smaller of the two

serve() calls this module and hands it a way to serve a group.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import field
from typing import Any

from roofline.errors import RooflineError, T
from roofline.frozen import frozen
from roofline.hardware import Machine, System
from roofline.hardware.system_file import get_system
from roofline.models.memory import device_kv_bytes
from roofline.models.split import check_split
from roofline.models.transformer import ModelConfig
from roofline.parallel import NODE_DEVICES, Split
from roofline.serving.efficiency import Band, Rate, per_rate
from roofline.units import require_positive_int

FORMULAS = {
    "transfer_s": "alpha + prompt x KV bytes per token per prefill device / link BW (per direction)",
    "ttft_s": "prefill step on TP P at batch 1 + transfer",
    "itl_s": "decode step on TP D at the batch, contexts prompt+1 ... prompt+output (mean, last)",
    "prefill_requests_per_s": "1 / prefill step",
    "decode_requests_per_s": "batch / (output x ITL mean)",
    "balanced": "of the (p, d) with |log(prefill rps / decode rps)| <= log 1.1, the most requests/s per device "
                "(else the smallest |log(prefill rps / decode rps)|); p + d <= the system's devices",
}


def parse_ratio(text: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """"4:4" -> (4, 4): the devices of the prefill and the decode groups."""
    if text is None:
        return None
    if isinstance(text, tuple):
        parts: list[Any] = list(text)
    else:
        parts = text.split(":")
    try:
        if not all(isinstance(p, int) or str(p).isascii() for p in parts):
            raise ValueError  # digits 0-9 only: int() would read "٤" as 4 (spaces around, as in every count, pass)
        values = [int(p) for p in parts]
    except (TypeError, ValueError):
        raise RooflineError(f"{T.disaggregate_devices}: write P:D, the prefill and decode devices, like 4:4; "
                            f"got {text!r}") from None
    if len(values) != 2 or min(values) < 1:
        raise RooflineError(f"{T.disaggregate_devices}: write P:D with positive device counts, like 4:4; got {text!r}")
    return (require_positive_int(values[0], f"{T.disaggregate_devices} P"),
            require_positive_int(values[1], f"{T.disaggregate_devices} D"))


@frozen
class GroupPair:
    """One (prefill devices, decode devices) pair: its rates, or why it cannot run."""

    prefill_devices: int
    decode_devices: int
    prefill_rps: Rate | None
    decode_rps: Rate | None
    reason: str = ""

    @property
    def rps(self) -> Rate | None:
        if self.prefill_rps is None or self.decode_rps is None:
            return None
        a, b = self.prefill_rps, self.decode_rps
        return Rate(min(a.ceiling, b.ceiling), min(a.low, b.low), min(a.high, b.high))

    @property
    def imbalance(self) -> float:
        if self.prefill_rps is None or self.decode_rps is None:
            return math.inf
        return abs(math.log(self.prefill_rps.ceiling / self.decode_rps.ceiling))

    def to_dict(self) -> dict[str, Any]:
        def opt(x: Rate | None) -> dict[str, Any] | None:
            return None if x is None else x.to_dict()

        rps = self.rps
        return {"prefill_devices": self.prefill_devices, "decode_devices": self.decode_devices,
                "prefill_requests_per_s": opt(self.prefill_rps), "decode_requests_per_s": opt(self.decode_rps),
                "requests_per_s": opt(rps),
                "requests_per_s_per_device": None if rps is None else
                rps.scaled(1 / (self.prefill_devices + self.decode_devices)).to_dict(),
                "reason": self.reason or None}


@frozen
class Disaggregation:
    prefill_devices: int
    decode_devices: int
    prompt: int
    output: int
    batch: int
    prefill: Band
    kv_bytes_per_token_device: float  # one prefill device's share of a token's KV cache
    link_name: str
    link_level: str
    link_bytes_per_s: float
    link_latency_s: float
    transfer: Band
    itl_mean: Band
    itl_last: Band
    decode_max_batch: int | None
    pairs: tuple[GroupPair, ...]
    balanced: GroupPair | None
    prefill_split: Split = field(default_factory=Split)
    decode_split: Split = field(default_factory=Split)

    @property
    def kv_bytes(self) -> float:
        """Per prefill device: the prompt's KV cache it sends."""
        return self.kv_bytes_per_token_device * self.prompt

    @property
    def ttft(self) -> Band:
        return Band(self.prefill.floor + self.transfer.floor, self.prefill.low + self.transfer.low,
                    self.prefill.high + self.transfer.high)

    @property
    def e2e(self) -> Band:
        t, i, k = self.ttft, self.itl_mean, self.output - 1
        return Band(t.floor + k * i.floor, t.low + k * i.low, t.high + k * i.high)

    @property
    def prefill_rps(self) -> Rate:
        return per_rate(1.0, self.prefill)

    @property
    def decode_rps(self) -> Rate:
        return per_rate(self.batch / self.output, self.itl_mean)

    @property
    def throughput(self) -> Rate:
        """Output tokens/s of the decode group at the batch."""
        return per_rate(float(self.batch), self.itl_mean)

    def to_dict(self) -> dict[str, Any]:
        return {"prefill_devices": self.prefill_devices, "decode_devices": self.decode_devices,
                "split": {"prefill": {"tp": self.prefill_split.tp, "pp": self.prefill_split.pp},
                          "decode": {"tp": self.decode_split.tp, "pp": self.decode_split.pp},
                          "note": "each group tensor parallel inside a node, pipeline parallel across nodes"},
                "prefill_s": self.prefill.to_dict(),
                "kv_transfer": {"bytes_per_token_per_device": self.kv_bytes_per_token_device,
                                "bytes_per_device": self.kv_bytes, "link": self.link_name,
                                "level": self.link_level, "bytes_per_s": self.link_bytes_per_s,
                                "latency_s": self.link_latency_s, "time_s": self.transfer.to_dict()},
                "ttft_s": self.ttft.to_dict(),
                "itl_s": {"mean": self.itl_mean.to_dict(), "last": self.itl_last.to_dict()},
                "e2e_s": self.e2e.to_dict(), "batch": self.batch, "decode_max_batch_memory": self.decode_max_batch,
                "throughput_tokens_per_s": self.throughput.to_dict(),
                "prefill_requests_per_s": self.prefill_rps.to_dict(),
                "decode_requests_per_s": self.decode_rps.to_dict(),
                "balanced": None if self.balanced is None else self.balanced.to_dict(),
                "pairs": [p.to_dict() for p in self.pairs],
                "formulas": dict(FORMULAS)}


BALANCE_TOLERANCE = math.log(1.1)  # prefill and decode requests/s within 10% count as balanced
MAX_GROUP_NODES = 4  # the balance search tries groups of up to this many whole nodes


def _group_sizes(per_node: int, most: int) -> list[int]:
    inside = [1 << k for k in range(16) if 1 << k <= per_node]
    nodes = [per_node * n for n in range(2, MAX_GROUP_NODES + 1) if per_node * n <= most]
    return [*inside, *(n for n in nodes if n not in inside)]


def group_split(n: int, per_node: int) -> Split:
    """A group of n devices: TP inside a node, PP across the nodes it spans."""
    if n <= per_node:
        return Split(tp=n)
    if n % per_node:
        raise RooflineError(f"a group of {n} devices spans nodes of {per_node}: give a multiple of {per_node} "
                            f"(TP {per_node} inside a node × PP across nodes)")
    return Split(tp=per_node, pp=n // per_node)


def check_groups(cfg: ModelConfig, machine_arg: Any, ratio: tuple[int, int]) -> tuple[System, Split, Split]:
    """(the system, the prefill group's split, the decode group's): everything about P:D that can be known
    before anything is computed (serve checks it first): a system with a link, P + D devices within it,
    each group a split (TP in a node, PP across whole nodes) the model can run."""
    p, d = ratio
    if isinstance(machine_arg, Machine):
        raise RooflineError(f"{T.disaggregate_devices} needs a system or a catalog device (a link between the groups), "
                            "not a parsed Machine")
    system = get_system(machine_arg, devices=max(p + d, NODE_DEVICES))  # a bare device: one node, as deploy makes it
    if p + d > system.max_devices:
        raise RooflineError(f"{T.disaggregate_devices} {p}:{d} needs {p + d} devices; {system.id} has "
                            f"{system.max_devices}")
    per_node = system.devices_per_node
    system.link(2, p + d > per_node)  # the link the KV cache crosses: an error here, before any step is built
    try:
        pre_split, dec_split = group_split(p, per_node), group_split(d, per_node)
    except RooflineError as exc:
        raise RooflineError(f"{T.disaggregate_devices} {p}:{d}: {exc.marked}") from None
    for group, sp in (("prefill", pre_split), ("decode", dec_split)):
        try:
            check_split(cfg, sp, 1)
        except RooflineError as exc:
            raise RooflineError(f"{T.disaggregate_devices} {p}:{d}: the {group} group runs {sp}, "
                                f"and {exc.marked}") from None
    return system, pre_split, dec_split


def disaggregate(r: Any, ratio: tuple[int, int], run: Callable[[Split, int], Any]) -> Disaggregation:
    """Prefill on TP `ratio[0]`, decode on TP `ratio[1]` at the report's batch; `run(split, batch)` serves
    the report's model on a group (serve() without what-ifs)."""
    p, d = ratio
    system, pre_split, dec_split = check_groups(r.config, r.machine_arg, ratio)
    per_node = system.devices_per_node
    level, link = system.link(2, p + d > per_node)
    try:
        pre = run(pre_split, 1)
    except RooflineError as exc:
        raise RooflineError(f"{T.disaggregate_devices} {p}:{d}: the prefill group runs {pre_split}, "
                            f"and {exc.marked}") from None
    try:
        dec = run(dec_split, r.batch)
    except RooflineError as exc:
        raise RooflineError(f"{T.disaggregate_devices} {p}:{d}: the decode group runs {dec_split}, "
                            f"and {exc.marked}") from None
    kv_tok = device_kv_bytes(r.config, pre_split, 1, r.prompt, r.dtypes) / r.prompt
    lo_eff, hi_eff = r.efficiency.communication
    byt = kv_tok * r.prompt
    transfer = Band(link.latency_s + byt / link.bytes_per_s, link.latency_s + byt / (link.bytes_per_s * hi_eff),
                    link.latency_s + byt / (link.bytes_per_s * lo_eff))

    sizes = _group_sizes(per_node, system.max_devices)
    prefills: dict[int, Any] = {p: pre}
    decodes: dict[int, Any] = {d: dec}
    reasons: dict[tuple[str, int], str] = {}
    for n in sizes:
        for which, store, b in (("prefill", prefills, 1), ("decode", decodes, r.batch)):
            if n in store:
                continue
            try:
                store[n] = run(group_split(n, per_node), b)
            except RooflineError as exc:
                reasons[(which, n)] = str(exc)
    pairs = []
    for a in sizes:
        for b in sizes:
            if a + b > system.max_devices:
                continue
            why = reasons.get(("prefill", a)) or reasons.get(("decode", b)) or ""
            pr, dr = prefills.get(a), decodes.get(b)
            if pr is None or dr is None:
                pairs.append(GroupPair(a, b, None, None, why or "the group cannot run"))
                continue
            if dr.max_batch_memory is not None and r.batch > dr.max_batch_memory:
                pairs.append(GroupPair(a, b, None, None, f"batch {r.batch} does not fit the decode group's memory "
                                                         f"(at most {dr.max_batch_memory})"))
                continue
            pairs.append(GroupPair(a, b, per_rate(1.0, pr.ttft), per_rate(r.batch / r.output, dr.itl_mean)))

    def per_device(q: GroupPair) -> float:
        rps = q.rps
        return (rps.ceiling if rps is not None else 0.0) / (q.prefill_devices + q.decode_devices)

    running = [q for q in pairs if q.rps is not None]
    close = [q for q in running if q.imbalance <= BALANCE_TOLERANCE]
    balanced = (max(close, key=lambda q: (per_device(q), -q.imbalance)) if close
                else min(running, key=lambda q: (round(q.imbalance, 9), -per_device(q)), default=None))
    return Disaggregation(p, d, r.prompt, r.output, r.batch, pre.ttft, kv_tok, link.name, str(level),
                          link.bytes_per_s, link.latency_s, transfer, dec.itl_mean, dec.itl_last,
                          dec.max_batch_memory, tuple(pairs), balanced, pre_split, dec_split)


__all__ = ["BALANCE_TOLERANCE", "FORMULAS", "MAX_GROUP_NODES", "Disaggregation", "GroupPair", "check_groups",
           "disaggregate", "group_split", "parse_ratio"]
