"""The README's commands print what they printed before the architecture reshaping.

tests/fixtures/readme_outputs.json was recorded by `python scripts/readme_json.py` on the commit
before the reshaping. Every key and value recorded then must still be there, equal (floats to 1e-9
relative: the figures are sums of a few hundred float products, and numpy's summation order moves
their last digits between releases, 3e-12 relative on the deepseek-v3 command with numpy 2.4.6; a
change the tool makes on purpose moves a figure by far more than 1e-9), except the renames the
reshaping made on purpose, each listed here:

- `bound` now names the resource that binds (matrix, vector, dram); the old compute/memory class is
  `bound_class`, and the old `limiter` (the same resource) is `bound`;
- the attention kernel's plans are spelled as everywhere else: naive -> none, fused -> flash (and the
  command's `--impl` became `--fusion`);
- a step's `bound` used to compare its intensity with the ridge; it is now the resource whose kernels
  take the most of its time (one rule for kernels and steps): for every README command both say the
  same class, which this test checks through `bound_class`;
- `kernel custom` no longer lists `bytes_by_role`: it said 0 weight, 0 KV-cache and 0 activation
  bytes for a kernel of 268 MB, because a kernel known only by its totals has no tensors to attribute
  bytes to. Saying nothing is right; saying zero was a wrong number;
- the memory fit (many devices, issue 9): per device it now adds the activation workspace, compares
  with 90% of the capacity (vLLM's gpu_memory_utilization) and answers with the smallest VALID split
  (Llama 3 70B at batch 64, 8k: TP 8, not ceil(313 GB / 80 GiB) = 4), so `memory.devices`,
  `memory.total_bytes`, the fit's warning text and the sweep/compare `devices` (and compare's
  `memory_bytes`) changed; tests/test_parallel.py derives the new figures by hand;
- inside the chip (issue 12): the catalog gained `b300` (Blackwell Ultra), listed by `machines`
  beside the machines recorded before, which are unchanged;
- every bad input (issue 13): a config's quantization_config sets its weights dtype, and the
  deepseek-v3 preset's is the checkpoint's FP8 with 128x128 block scales; its command is run with
  `--weights-dtype bf16`, the weights it was recorded with (tests/test_hostile_loaders.py derives the
  FP8 figures);
- an exact catalog (issue 20): the H100 PCIe's DRAM bandwidth is the physical 5120 bits × 2 × 1593 MHz
  = 2,039 GB/s, not the datasheet's rounded 2 TB/s, so its `memory_bytes_per_s` and ridges in
  `machines` changed (tests/test_expectation.py derives the figure); so are the B200's (the driver's
  7680 bits × 2 × 3996 MHz / 8 = 7,672.32 GB/s, not DGX B200's 8 TB/s) and the MI300X's (AMD's footnote
  MI300-05A, 8192 bits × 5.2 Gb/s / 8 = 5,324.8 GB/s, not the headline 5.3 TB/s): every recorded figure
  of a command on those machines that divides by the bandwidth is checked as the recorded value times
  old / new bandwidth (ridges, memory times, and a memory-bound kernel's time; its attainable FLOP/s and
  fraction of peak times new / old), everything else unchanged (tests/test_catalog_exact.py derives
  both); the catalog gained `gb300` (the GB300 NVL72 rack's Blackwell Ultra, the figures `b300` had:
  `b300` is now the HGX B300 the measured tables were timed on);
- today's models (issue 22): DeepSeek-V3's checkpoint holds its multi-token-prediction layer
  (model.layers.61, with its own embedding and head copies: the hub's 685B), so the deepseek-v3
  command's `params.total` grows by exactly the MTP parameters and its `memory.weights_bytes` by them at
  2 bytes (BF16); nothing in the step changes (tests/test_models_mtp.py derives the MTP figure).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import readme_json  # noqa: E402

RECORDED = json.loads((ROOT / "tests" / "fixtures" / "readme_outputs.json").read_text())
SPELLING = {"--impl naive": "--fusion none", "--impl fused": "--fusion flash",
            "model deepseek-v3 ": "model deepseek-v3 --weights-dtype bf16 "}
ATTENTION_VALUES = {"naive": "none", "fused": "flash"}
DROPPED = {"kernel custom --flop 4.4e11 --bytes 268MB --machine mi300x.bytes_by_role"}
ADDED_MACHINES = {"b300", "gb300"}
REL_TOL = 1e-9  # see the docstring: summation-order drift between numpy releases, far below any real change
EXACT_BANDWIDTH = {"h100-pcie", "b200", "mi300x"}  # machines whose DRAM bandwidth became the physical figure
# recorded bandwidth -> the physical one (issue 20 item 4; tests/test_catalog_exact.py derives each)
PHYSICAL = {"b200": (8e12, 7680 * 2 * 3996e6 / 8), "mi300x": (5.3e12, 8192 * 5.2e9 / 8)}
OVER_BANDWIDTH = ("ridge_flop_per_byte", "memory_time_s")  # each ∝ 1 / bandwidth
EXACT_KEYS = ("memory_bytes_per_s", "ridge_flop_per_byte", "sources")
FIT_CHANGED = (".memory.devices", ".memory.total_bytes", ".memory.warning", "].devices", "].memory_bytes")


def _fit_changed(where: str, old: Any) -> bool:
    if isinstance(old, str) and old.startswith("does not fit on"):
        return True  # the fit's warning, in any list of warnings
    return where.endswith(FIT_CHANGED) and not (where.startswith("sweep") and where.endswith("memory_bytes"))


def _physical(old: Any, was: float, now: float, memory_bound: bool) -> Any:
    """A recorded output on a machine whose bandwidth went from `was` to `now`: the bandwidth, each figure
    that divides by it (× was / now) and, for a memory-bound kernel, its time (× was / now) and attainable
    FLOP/s and fraction of peak (× now / was); the DRAM source line is the new one's."""
    if isinstance(old, list):
        return [_physical(v, was, now, memory_bound) for v in old]
    if not isinstance(old, dict):
        return old
    out: dict[str, Any] = {}
    for key, value in old.items():
        if key == "memory_bytes_per_s":
            value = now
        elif key.endswith(OVER_BANDWIDTH) or (memory_bound and key in ("time_s", "total_time_s")):
            value = _scaled(value, was / now)
        elif memory_bound and key in ("attainable_flop_per_s", "fraction_of_peak"):
            value = _scaled(value, now / was)
        elif key == "sources" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "memory.dram"}
        else:
            value = _physical(value, was, now, memory_bound)
        out[key] = value
    return out


def _scaled(value: Any, factor: float) -> Any:
    if isinstance(value, dict):
        return {k: _scaled(v, factor) for k, v in value.items()}
    return value * factor if isinstance(value, float) else value


def _new_key(key: str) -> str:
    return {"limiter": "bound", "bound": "bound_class"}.get(key, key)


def _same(old: Any, new: Any, where: str, values: dict[str, str]) -> list[str]:
    if _fit_changed(where, old):
        return []
    if isinstance(old, dict):
        if not isinstance(new, dict):
            return [f"{where}: was an object, now {new!r}"]
        out: list[str] = []
        for key, value in old.items():
            nk = _new_key(key)
            if nk not in new and f"{where}.{key}" not in DROPPED:
                out.append(f"{where}.{key}: missing (looked for {nk!r})")
            elif nk in new:
                out += _same(value, new[nk], f"{where}.{key}", values)
        return out
    if isinstance(old, list):
        if not isinstance(new, list) or len(new) != len(old):
            return [f"{where}: a list of {len(old)} became {new!r:.80}"]
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in _same(a, b, f"{where}[{i}]", values)]
    if isinstance(old, float) and isinstance(new, int | float) and not isinstance(new, bool):
        return [] if math.isclose(old, new, rel_tol=REL_TOL, abs_tol=0.0) else [f"{where}: {old!r} -> {new!r}"]
    if isinstance(old, str) and isinstance(new, str):
        for a, b in values.items():
            old = old.replace(f"({a})", f"({b})") if old.startswith("attention (") else old
        old = values.get(old, old)
    return [] if old == new else [f"{where}: {old!r} -> {new!r}"]


@pytest.mark.parametrize("recorded", sorted(RECORDED))
def test_readme_command_prints_what_it_printed(recorded: str) -> None:
    command = recorded
    for old, new in SPELLING.items():
        command = command.replace(old, new)
    now = readme_json.run(command)
    if command == "machines":
        now = [m for m in now if m["name"] not in ADDED_MACHINES]
        old = [m if m["name"] not in EXACT_BANDWIDTH else {k: v for k, v in m.items() if k not in EXACT_KEYS}
               for m in RECORDED[recorded]]
        exact = {m["name"]: m["memory_bytes_per_s"] for m in now if m["name"] in EXACT_BANDWIDTH}
        assert exact["h100-pcie"] == 2039e9  # 5120 bits × 2 × 1593 MHz / 8
        assert exact["b200"] == 7680 * 2 * 3996e6 / 8 and exact["mi300x"] == 8192 * 5.2e9 / 8
        differences = _same(old, now, recorded, {})
        assert not differences, "\n".join(differences[:20])
        return
    values = ATTENTION_VALUES if command.startswith("kernel attention") else {}
    before = RECORDED[recorded]
    words = command.split()
    on = words[words.index("--machine") + 1] if "--machine" in words else words[1] if words[0] == "machine" else ""
    if on in PHYSICAL:
        memory_bound = isinstance(before, dict) and before.get("bound") == "memory"
        before = _physical(before, *PHYSICAL[on], memory_bound)
        if "sources" in now:  # the DRAM source line names the physical figure's derivation now
            now = {**now, "sources": {k: v for k, v in now["sources"].items() if k != "memory.dram"}}
    if command.startswith("model deepseek-v3 "):  # + the MTP layer, exactly (see the docstring)
        from roofline.models import load_config

        mtp = sum(n for p, n in load_config("deepseek-v3").param_counts().parts.items() if p.startswith("mtp"))
        before = {**before, "params": {**before["params"], "total": before["params"]["total"] + mtp},
                  "memory": {**before["memory"], "weights_bytes": before["memory"]["weights_bytes"] + 2 * mtp}}
    differences = _same(before, now, recorded, values)
    assert not differences, "\n".join(differences[:20])


def test_the_comparison_sees_a_changed_number() -> None:
    # the comparator itself must fail on a real difference, or the test above proves nothing
    old = RECORDED["kernel matmul 4096 4096 4096 --machine h100"]
    changed = {**old, "bytes": old["bytes"] * 1.001, "bound_class": old["bound"], "bound": old["limiter"]}
    assert _same(old, changed, "matmul", {}) == [f"matmul.bytes: {old['bytes']!r} -> {old['bytes'] * 1.001!r}"]
