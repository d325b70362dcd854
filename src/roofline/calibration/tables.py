"""One reader of the measured per-kernel tables that `aiconfigurator-core` ships.

aiconfigurator (NVIDIA's ai-dynamo/aiconfigurator, Apache-2.0; PyPI `aiconfigurator-core` 0.12.0)
times kernels on real GPUs and ships the results as parquet files:

    aiconfigurator_core/systems/data/<system>/<op>/<engine>/<version>/<table>.parquet

Columns as its collectors write them (collector/trtllm/collect_gemm.py, collect_attn.py):

    gemm_perf                    gemm_dtype (bfloat16, fp8, fp8_block, nvfp4), m, n, k, latency (ms):
                                 C[m, n] = A[m, k] @ B[k, n], m the tokens, B the weight
    context_attention_perf       batch_size, isl, num_heads, num_key_value_heads, head_dim, attn_dtype,
                                 kv_cache_dtype, step = 0, window_size, latency (ms): causal prefill
                                 of isl tokens per sequence
    generation_attention_perf    the same columns with isl = 1 and step = the KV length: one decode
                                 query per sequence against `step` cached keys
    context_mla_perf,            DeepSeek-V3's MLA attention kernel (collector/*/collect_mla.py):
    generation_mla_perf          mla_dtype, kv_cache_dtype, num_heads (on the device), batch_size,
                                 isl, tp_size, step (the cached length), kernel_source (the backend)
    moe_perf                     one MoE layer (collector/*/collect_moe.py): moe_dtype, num_tokens,
                                 hidden_size, inter_size, topk, num_experts, moe_tp_size,
                                 moe_ep_size, distribution (balanced, power_law_<alpha>)

The benchmarks rerun one shape in a loop, so operands that fit in L2 stay there between runs (an
H100 bf16 GEMM 32768×64×512 ran 8.8 µs against an 11.3 µs DRAM floor): validation explains such
points instead of calling them errors.

`pyarrow` (which the extra brings) is imported here only, inside the functions that read; the core
never imports this room. Without the extra every entry point fails in one line saying how to install it.

Layering: imports roofline.errors only (and pyarrow, lazily).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
from collections.abc import Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen

PACKAGE = "aiconfigurator-core"
PINNED = "0.12.0"
INSTALL = f"pip install 'roofline[calibration]'  (or: pip install {PACKAGE}=={PINNED})"

# aiconfigurator's system names -> our catalog ids (roofline.hardware: hardware/data/*.toml). b300_sxm is
# the HGX B300 board's GPU (its system file: 2.25 PF BF16, 7.75 TB/s; the driver: 148 SMs), which is our
# b300, not the GB300 rack's gb300. Systems without a catalog machine (a30, a100_pcie, l4 PCIe variants,
# b60, rtx_pro_6000_server) are not joined: a floor needs our machine. gb300 has one but is not joined
# yet: no L2 size or SM count of a GB300 has been read off a driver, so its faster-than-floor points
# could not be checked.
SYSTEMS: Mapping[str, str] = {
    "h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200",
    "a100_sxm": "a100-sxm-80gb", "l40s": "l40s", "h100_pcie": "h100-pcie", "l4": "l4",
}


class Family(StrEnum):
    """The kinds of table `validate --kind` selects."""

    GEMM = "gemm"
    ATTENTION = "attention"
    MLA = "mla"
    MOE = "moe"
    COLLECTIVE = "collective"


# the tables read per family: (op folder, table file stem, kind of row)
TABLES: Mapping[Family, tuple[tuple[str, str, str], ...]] = {
    Family.GEMM: (("gemm", "gemm_perf", "gemm"),),
    Family.ATTENTION: (("attention", "context_attention_perf", "context_attention"),
                       ("attention", "generation_attention_perf", "generation_attention")),
    # the MLA attention kernel alone (the *_module tables time the whole layer, projections included)
    Family.MLA: (("mla", "context_mla_perf", "context_mla"), ("mla", "generation_mla_perf", "generation_mla")),
    Family.MOE: (("moe", "moe_perf", "moe"),),
}
READ_FAMILIES = tuple(TABLES)


@frozen
class Row:
    """One measured row: where it came from and its columns (`latency` converted to seconds)."""

    system: str  # aiconfigurator's name (h100_sxm)
    machine: str  # our catalog id (h100-sxm)
    engine: str
    version: str
    table: str  # gemm, context_attention, generation_attention
    values: Mapping[str, Any]
    measured_s: float

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


@frozen
class Table:
    """One measured table read whole, as columns (numpy arrays, one entry a row), the rows without a
    valid latency dropped; `measured_s` is the latency in seconds. The columnar twin of `Row`, for
    validating hundreds of thousands of rows at once."""

    system: str
    machine: str
    engine: str
    version: str
    table: str
    columns: Mapping[str, Any]  # name -> numpy array
    measured_s: Any  # numpy float64 array

    def __len__(self) -> int:
        return int(self.measured_s.shape[0])

    def every(self, max_rows: int) -> Table:
        """Every ⌈n / max_rows⌉-th row, in the table's order (the stride `calibrate` takes too)."""
        stride = max(1, math.ceil(len(self) / max_rows)) if max_rows > 0 else 1
        if stride == 1:
            return self
        return Table(self.system, self.machine, self.engine, self.version, self.table,
                     {k: v[::stride] for k, v in self.columns.items()}, self.measured_s[::stride])

    def column(self, key: str, default: Any = None) -> Any:
        """The column `key` (a numpy array), or an array filled with `default` where the table has none."""
        import numpy as np

        if key in self.columns:
            return self.columns[key]
        return np.full(len(self), default, dtype=object)


@frozen
class Source:
    """The installed tables: the package version and its data folder."""

    version: str
    root: Path

    @property
    def label(self) -> str:
        return f"{PACKAGE} {self.version}"


def installed() -> Source:
    """The installed aiconfigurator-core's tables; one line naming the install command otherwise."""
    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        raise RooflineError(f"the measured tables come from the optional {PACKAGE}; install it: {INSTALL}")
    try:
        import pyarrow  # noqa: F401  (the extra brings it; checked before any table is opened)
    except ImportError:
        raise RooflineError(f"{PACKAGE} is installed but pyarrow is not; install it: {INSTALL}") from None
    root = Path(next(iter(spec.submodule_search_locations))) / "systems" / "data"
    if not root.is_dir():
        raise RooflineError(f"{PACKAGE} has no systems/data folder at {root}; reinstall it: {INSTALL}")
    return Source(importlib.metadata.version(PACKAGE), root)


def version_key(v: str) -> tuple[Any, ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in v.replace("rc", ".rc.").split("."))


def latest_versions(source: Source, system: str, op: str) -> dict[str, str]:
    """engine -> its newest measured version under <system>/<op> (aiconfigurator's default is the
    newest too; older versions are the same kernels on an older engine)."""
    out: dict[str, str] = {}
    base = source.root / system / op
    if not base.is_dir():
        return out
    for engine_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        versions = sorted((p.name for p in engine_dir.iterdir() if p.is_dir()), key=version_key)
        if versions:
            out[engine_dir.name] = versions[-1]
    return out


def systems(source: Source, machine: str | None = None) -> list[str]:
    """aiconfigurator systems with tables and a catalog machine, optionally one catalog machine's."""
    have = sorted(p.name for p in source.root.iterdir() if p.is_dir() and p.name in SYSTEMS)
    if machine is None:
        return have
    return [s for s in have if SYSTEMS[s] == machine]


def read_table(path: Path) -> list[dict[str, Any]]:
    """A parquet file's rows as dicts (pyarrow, imported here only)."""
    import pyarrow.parquet as pq

    try:
        return list(pq.read_table(path).to_pylist())
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise RooflineError(f"{path}: not a readable parquet table ({exc})") from None


def rows(source: Source, system: str, family: Family, engine: str | None = None) -> Iterator[Row]:
    """Every measured row of one system and family (of each engine, or of `engine`, the newest version
    that has the table)."""
    for op, stem, table in TABLES.get(family, ()):
        for eng, version in newest_with(source, system, op, stem).items():  # as `tables` picks them
            if engine is not None and eng != engine:
                continue
            path = source.root / system / op / eng / version / f"{stem}.parquet"
            for raw in read_table(path):
                ms = raw.get("latency")
                if not isinstance(ms, int | float) or not math.isfinite(ms) or ms <= 0:
                    continue  # a failed or missing measurement
                yield Row(system, SYSTEMS[system], eng, version, table, raw, float(ms) * 1e-3)


def read_columns(path: Path) -> tuple[dict[str, Any], Any]:
    """A parquet file as numpy columns, and the latency in seconds, rows without a finite positive
    latency dropped (pyarrow, imported here only)."""
    import numpy as np
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise RooflineError(f"{path}: not a readable parquet table ({exc})") from None
    cols = {name: t.column(name).to_numpy(zero_copy_only=False) for name in t.schema.names}
    if "latency" not in cols:
        raise RooflineError(f"{path}: no latency column")
    try:
        ms = np.asarray(cols.pop("latency"), dtype=float)
    except (TypeError, ValueError):
        raise RooflineError(f"{path}: its latency column is not numeric") from None
    ok = np.isfinite(ms) & (ms > 0)  # a failed or missing measurement is left out
    return {k: v[ok] for k, v in cols.items()}, ms[ok] * 1e-3


def newest_with(source: Source, system: str, op: str, stem: str) -> dict[str, str]:
    """engine -> its newest version under <system>/<op> that has the table `stem` (a newer version may
    time other tables only: vLLM 0.24.0's MLA folder holds the whole-layer tables, not the kernel's)."""
    out: dict[str, str] = {}
    base = source.root / system / op
    if not base.is_dir():
        return out
    for engine_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        versions = sorted((p.name for p in engine_dir.iterdir() if (p / f"{stem}.parquet").is_file()),
                          key=version_key)
        if versions:
            out[engine_dir.name] = versions[-1]
    return out


# the columns that make a row's shape, per table (kernel_groups): what a kernel is asked to compute
SHAPE_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "gemm": ("gemm_dtype", "m", "n", "k"),
    "context_attention": ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "attn_dtype",
                          "kv_cache_dtype", "window_size"),
    "generation_attention": ("batch_size", "step", "num_heads", "num_key_value_heads", "head_dim", "attn_dtype",
                             "kv_cache_dtype", "window_size"),
}
KERNEL_GROUP = "kernel_group"  # the column kernel_groups adds: '' or '@<kernel_source>'


def kernel_groups(table: str, columns: Mapping[str, Any]) -> Any:
    """Per row, '' or '@<kernel_source>'. A table may time the same shapes on two kernels: its
    kernel_source column names them (SGLang's attention on B200: TRT-LLM's kernels, Triton and
    FlashInfer; on H100/H200: FA3 and Triton; TRT-LLM's on B200: its own and FlashInfer's), the
    model's backend choosing, not the shape; pooled, one fit averages kernels up to 7x apart at the
    same shape. The rows of each kernel that times a shape another kernel also times, other than the
    kernel with the most rows, are marked '@<kernel_source>' and become their own kind
    (context_attention.bf16@triton). A kernel the shape selects (vLLM's block-scaled FP8 GEMMs: CUTLASS
    where k is not a multiple of 128, DeepGEMM or FlashInfer by m) times no shape another does, and
    stays pooled. Decided on the whole table, before any stride, so a subset is grouped the same."""
    import numpy as np

    n = len(next(iter(columns.values()))) if columns else 0
    out = np.full(n, "", dtype=object)
    keys = SHAPE_COLUMNS.get(table)
    if keys is None or "kernel_source" not in columns or n == 0:
        return out
    def codes(values: Any) -> tuple[Any, list[Any]]:  # (a code per row, the values by code): hashing, not sorting
        seen_: dict[Any, int] = {}
        return np.fromiter((seen_.setdefault(v, len(seen_)) for v in values.tolist()), np.int64, n), list(seen_)

    ks, names = codes(np.asarray(columns["kernel_source"], dtype=object))
    if len(names) < 2:
        return out
    counts = np.bincount(ks, minlength=len(names))
    cols = {c: np.asarray(columns[c]) if c in columns else np.zeros(n) for c in keys}
    if "window_size" in columns:  # a window as long as the sequence is no window: the shape is the same
        length = np.asarray(columns.get("step" if table == "generation_attention" else "isl", np.zeros(n)))
        raw = np.asarray(columns["window_size"])
        w = np.nan_to_num(raw.astype(float) if raw.dtype.kind in "iuf" else np.asarray(
            [float(x) if isinstance(x, int | float | np.number) and not isinstance(x, bool) else 0.0 for x in raw]))
        cols["window_size"] = np.where((w > 0) & (w < length), w, 0.0)
    # each row's shape as one integer: every column's value codes (np.unique) in mixed radix
    key, span = np.zeros(n, dtype=np.int64), 1
    for c in keys:
        if cols[c].dtype.kind in "iufb":
            uniq, code = np.unique(cols[c], return_inverse=True)
            width = len(uniq)
        else:
            code, values = codes(cols[c])
            width = len(values)
        if span * width >= 2**62:  # mixed radix would overflow: renumber the keys so far (each < n)
            key = np.unique(key, return_inverse=True)[1].reshape(-1)
            span = n
        key, span = key * width + code.reshape(-1), span * width
    seen = [np.unique(key[ks == i]) for i in range(len(names))]
    main = int(np.argmax(counts))
    for i, mine in enumerate(seen):
        if i != main and any(np.intersect1d(mine, other).size for o, other in enumerate(seen) if o != i):
            out[ks == i] = f"@{names[i]}"
    return out


def tables(source: Source, system: str, family: Family, engine: str | None = None) -> Iterator[Table]:
    """Every measured table of one system and family, read as columns (of each engine, or of `engine`,
    the newest version that has the table): what `rows` yields, a table at a time."""
    for op, stem, table in TABLES.get(family, ()):
        for eng, version in newest_with(source, system, op, stem).items():
            if engine is not None and eng != engine:
                continue
            cols, seconds = read_columns(source.root / system / op / eng / version / f"{stem}.parquet")
            cols[KERNEL_GROUP] = kernel_groups(table, cols)
            yield Table(system, SYSTEMS[system], eng, version, table, cols, seconds)


__all__ = [
    "INSTALL",
    "KERNEL_GROUP",
    "PACKAGE",
    "PINNED",
    "READ_FAMILIES",
    "SHAPE_COLUMNS",
    "SYSTEMS",
    "TABLES",
    "Family",
    "Row",
    "Source",
    "Table",
    "installed",
    "kernel_groups",
    "latest_versions",
    "newest_with",
    "read_columns",
    "read_table",
    "rows",
    "systems",
    "tables",
    "version_key",
]
