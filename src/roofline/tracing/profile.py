"""The measured roofline of any program: a script run under torch.profiler and the tracer together.

    p = profile_script("my_model.py", ["--batch", "8"])       # from the first forward on
    a = p.profile.trace.analyze("h100")                          # each kernel with its measured time
    [verdict(x, p.profile.gaps_s.get(x.name, 0.0)) for x in a.placements]

torch.profiler (record_shapes=True) times every op (CPU: the op's own duration; CUDA: its kernels'
durations, and the idle time on the stream before each one); the profile's recorded shapes are
counted by the one formula registry (roofline.tracing.kineto), so `roofline import` of the same
trace gives the same kernels. The tracer (roofline.tracing.recorder) runs alongside and names every
op by the module that ran it ("model.layers.0.self_attn.q_proj.linear"); its FLOPs are the check
on the import's (`Profiled.flop_agreement`).

By default recording starts at the first forward call of any nn.Module (construction and weight
initialisation are left out); `from_start=True` records the whole script.

What each kernel is told (`verdict`), from its measured time, its floor and its launch gap:

    time only        the trace had no shapes: measured time, no FLOPs or bytes to place
    ABOVE THE ROOF   measured faster than its floor (Placement.above_roof, share of roof > 100%, the
                     rule bench flags by): the counted FLOPs or bytes, or the machine's figures, are
                     wrong for it; never called "at bandwidth" or "at compute"
    latency-bound    it ran under LATENCY_S (a tiny kernel), or the stream sat idle longer before it
                     than it ran (launch gaps), or its floor is under LATENCY_S and it reached less
                     than NEAR_ROOF of it (too little work to fill the machine): CUDA graphs,
                     batching more work per launch, fusing (on a CPU: fewer, larger calls; fusing)
    at bandwidth     memory-bound at ≥ NEAR_ROOF of its floor: fuse it with its neighbours, shrink
                     its bytes, store them in a lower precision
    under bandwidth  memory-bound below NEAR_ROOF: wider, coalesced accesses; check launch overhead
    under compute    compute-bound (I above the ridge) below NEAR_ROOF: tiling, occupancy, prefetch
    at compute       compute-bound at ≥ NEAR_ROOF: fewer FLOPs (lower precision) or more devices

torch is imported only inside functions.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError, need_torch
from roofline.frozen import frozen
from roofline.placement import Placement
from roofline.tracing.analysis import Trace, flop_by_kind
from roofline.tracing.kineto import Profile, parse_kineto
from roofline.tracing.recorder import trace
from roofline.tracing.registry import ATTENTION, FORMULAS, Registry
from roofline.tracing.script import run_script
from roofline.vocab import Bound

LATENCY_S = 10e-6  # below this a kernel's time is launch and synchronisation, not its work
NEAR_ROOF = 0.5  # a kernel at half its floor's speed or better is "at" its roof


@frozen
class Verdict:
    """What limits one measured kernel, and what to try."""

    label: str  # "latency-bound", "at bandwidth", "under compute", ...
    advice: str

    def __str__(self) -> str:
        return f"{self.label}: {self.advice}" if self.advice else self.label


def verdict(p: Placement, gap_s: float = 0.0, cpu: bool = False) -> Verdict:
    """The one-line verdict on a kernel with a measured time (see the module doc for the rules); `cpu`:
    an op timed on a CPU, where the latency remedy is fewer, larger calls (CUDA graphs are a GPU's)."""
    measured = p.measured_time_s
    if measured is None:
        return Verdict("not timed", "")
    if not p.flop and not p.bytes:
        return Verdict("time only", "no FLOPs or bytes known (no shapes recorded, or no op launched it)")
    share = p.fraction_of_roof or 0.0
    if p.above_roof:
        return Verdict("ABOVE THE ROOF", f"measured at {share:.0%} of its floor's speed, faster than the roof allows: "
                                         "its counted FLOPs or bytes (or the machine's figures) are wrong for it")
    if measured < LATENCY_S or gap_s > measured or (p.time_s < LATENCY_S and share < NEAR_ROOF):
        why = ("launch gap longer than the kernel" if gap_s > measured else
               "a tiny kernel" if measured < LATENCY_S else "too little work to fill the machine")
        if cpu:
            return Verdict("latency-bound", f"{why}: batch more work per call, fuse small ops (torch.compile)")
        return Verdict("latency-bound", f"{why}: CUDA graphs, batch more work per launch, fuse small ops")
    if p.bound_class is Bound.MEMORY:
        if share >= NEAR_ROOF:
            return Verdict("at bandwidth", "fuse with its neighbours, shrink the bytes, lower their precision")
        return Verdict("under bandwidth", "wider, coalesced accesses; check launch overhead")
    if share >= NEAR_ROOF:
        return Verdict("at compute", "fewer FLOPs (a lower precision) or more devices")
    return Verdict("under compute", "high intensity far under the compute roof: tiling, occupancy, prefetch")


@dataclass
class Profiled:
    """A script's run: the profile (times, from torch.profiler), the tracer's trace, the raw export."""

    profile: Profile
    traced: Trace | None
    chrome: dict[str, Any]

    def flop_agreement(self) -> float | None:
        """Profiled FLOPs / traced FLOPs (1.0: the recorded shapes counted exactly what ran)."""
        if self.traced is None or not self.traced.flop:
            return None
        return self.profile.trace.flop / self.traced.flop


def _aten_of(op_name: str) -> str:
    """The ATen op a tracer op name ends in ("model.layers.0.mlp.down_proj.linear#2" -> "linear")."""
    parts = re.sub(r"#\d+$", "", op_name).split(".")
    if len(parts) > 1 and parts[-1] in ("qk", "softmax", "pv") and re.sub(r"#\d+$", "", parts[-2]) in ATTENTION:
        return re.sub(r"#\d+$", "", parts[-2])
    return parts[-1]


def _call_names(t: Trace) -> list[tuple[str, str]]:
    """(call name, aten) per call the tracer recorded, in order (the ops of one call once)."""
    in_group = {op: g for g, ops in t.groups.items() for op in ops}
    out: list[tuple[str, str]] = []
    for op in t.ops:
        call = in_group.get(op.name)
        if call is None and op.name.endswith((".qk", ".softmax", ".pv")) and _aten_of(op.name) in ATTENTION:
            call = op.name.rsplit(".", 1)[0]
        call = call or op.name
        if not out or out[-1][0] != call:
            out.append((call, _aten_of(op.name)))
    return out


def name_by_modules(profile: Profile, traced: Trace, window: int = 64) -> int:
    """Rename the profile's calls ("linear#37") after the tracer's ("model.layers.3.mlp.up_proj.linear"),
    matching the two sequences of ATen calls in order. Returns how many calls were named."""
    t = profile.trace
    in_group = {op: g for g, ops in t.groups.items() for op in ops}
    calls: list[str] = []
    for op in t.ops:
        c = in_group.get(op.name, op.name)
        if not calls or calls[-1] != c:
            calls.append(c)
    theirs = _call_names(traced)
    rename: dict[str, str] = {}
    j = 0
    for c in calls:
        aten = c.split("#")[0]
        for k in range(j, min(j + window, len(theirs))):
            if theirs[k][1] == aten:
                rename[c] = theirs[k][0]
                j = k + 1
                break
    if not rename:
        return 0
    taken = set(rename.values())
    if len(taken) != len(rename):
        return 0  # two calls onto one name: leave the names as they were

    def new(name: str) -> str:
        call = in_group.get(name, name)
        if call in rename:
            return rename[call] + name[len(call):]
        return name

    t.ops[:] = [replace(op, name=new(op.name)) for op in t.ops]
    t.groups = {new(g): tuple(new(o) for o in ops) for g, ops in t.groups.items()}
    t.times_s = {new(k): v for k, v in t.times_s.items()}
    profile.gaps_s = {new(k): v for k, v in profile.gaps_s.items()}
    profile.launches = {new(k): v for k, v in profile.launches.items()}
    profile.gpu_kernels = [(new(k), g, ts) for k, g, ts in profile.gpu_kernels]
    t.module_of = {new(k): traced.module_of.get(new(k), "") for k in (op.name for op in t.ops)}
    return len(rename)


def profile_script(path: str, argv: Sequence[str] = (), *, from_start: bool = False, inference: bool = True,
                   formulas: Registry = FORMULAS) -> Profiled:
    """Run a Python script (as `python path ARGS`) under torch.profiler and the tracer, from its first
    forward call (or from its start)."""
    torch = need_torch("roofline profile")
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    p = Path(path)
    if not p.is_file():
        raise RooflineError(f"no script at {path}")
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    stack = ExitStack()
    state: dict[str, Any] = {}

    def start(module: Any = None) -> None:
        if state:
            return
        state["prof"] = stack.enter_context(torch_profile(activities=activities, record_shapes=True))
        state["trace"] = stack.enter_context(trace(module, name=p.stem, inference=inference, formulas=formulas))

    handle = None
    if from_start:
        start()
    else:
        handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, _args: start(m))
    try:
        run_script(path, argv)
    finally:
        if handle is not None:
            handle.remove()
        if state and torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        stack.close()
    if not state:
        raise RooflineError(f"{path} ran no forward call of an nn.Module; give --from-start to record the "
                            "whole script")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.json"
        state["prof"].export_chrome_trace(str(out))
        chrome = json.loads(out.read_text(encoding="utf-8"))
    prof = parse_kineto(chrome, f"{p.stem}.trace.json", formulas)
    traced: Trace = state["trace"]
    name_by_modules(prof, traced)
    return Profiled(prof, traced, chrome)


def kind_flops(t: Trace) -> dict[str, float]:
    return flop_by_kind(t.graph)


__all__ = ["LATENCY_S", "NEAR_ROOF", "Profiled", "Verdict", "kind_flops", "name_by_modules", "profile_script",
           "verdict"]
