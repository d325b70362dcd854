"""Nsight Compute's raw CSV (`ncu --csv --page raw`) as measured kernels: time, bytes per level, FLOPs.

    ncu --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,\\
        lts__t_bytes.sum,l1tex__t_bytes.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,\\
        sm__sass_thread_inst_executed_op_ffma_pred_on.sum python my_model.py > kernels.csv

The raw page is one row per profiled kernel: identifying columns ("ID", "Kernel Name", "Stream",
...) and then one column per metric; the first row names the columns, the second gives each
metric's unit ("nsecond", "byte", "Kbyte", ...; empty for the identifying columns). Values may carry
thousands separators. The details page (`ncu --csv` without `--page raw`: one row per kernel and
metric, "Metric Name", "Metric Unit", "Metric Value") is pivoted into that form. What each metric becomes:

    time         gpu__time_duration.sum                                            (required)
    DRAM bytes   dram__bytes_read.sum + dram__bytes_write.sum, or dram__bytes.sum    (required)
    L2 bytes     lts__t_bytes.sum;  L1 bytes  l1tex__t_bytes.sum                    (when present)
    FLOPs        matrix: Σ sm__ops_path_tensor_*.sum, one column per source/destination dtype (ncu
                 --query-metrics: "# of math ops executed in Tensor path with source BF16 and
                 destination FP32"; NVIDIA's forum answer "How many FLOPs does one tensor_op_hmma
                 instruction do?" points to these for FLOPs). A column that breaks another present
                 one down (…_sparsity_on/_off, …_op_hmma_…) is not added again: within one source/
                 destination pair the least broken-down columns are summed. One op is taken as one
                 FLOP (a multiply-add is two): NVIDIA's pages do not say so in words; public known-work
                 checks (a bf16 N³ GEMM whose counter reads 2·N³) do; to confirm on a real capture.
                 vector: 2·ffma + fadd + fmul (and the h/d variants) of
                 sm__sass_thread_inst_executed_op_*_pred_on.sum (or the smsp__ spelling, the same
                 count per sub-partition summed), FMA = 2 FLOPs as ncu's own roofline sections count
                 it (SpeedOfLight_RooflineChart.section: derived__…_ffma_pred_on_x2 = ffma × 2);
                 sm__inst_executed_pipe_* are instruction counts (ncu's tensor roofline scales them by
                 a per-architecture factor), kept as counters, never as FLOPs

Unit prefixes are decimal (Kbyte = 1e3 bytes, usecond = 1e-6 s), as ncu prints them.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.graph import Op, Tensor
from roofline.tracing.analysis import Trace
from roofline.tracing.kineto import Profile
from roofline.units import MAX_QUANTITY
from roofline.vocab import Level, Unit

TIME = "gpu__time_duration.sum"
DRAM_READ, DRAM_WRITE, DRAM = "dram__bytes_read.sum", "dram__bytes_write.sum", "dram__bytes.sum"
L2, L1 = "lts__t_bytes.sum", "l1tex__t_bytes.sum"
TENSOR_OPS = "sm__ops_path_tensor_"
SASS = ("sm__sass_thread_inst_executed_op_", "smsp__sass_thread_inst_executed_op_")
PIPE = ("sm__inst_executed_pipe_", "smsp__inst_executed_pipe_")
COLLECT = (f"ncu --csv --page raw --metrics {TIME},{DRAM_READ},{DRAM_WRITE},{L2},{L1} "
           "python SCRIPT > kernels.csv")

MIN_TIME_S = 1e-12  # 1 ps: no kernel runs in less than a clock cycle (about 0.5 ns); 1e-300 s would make its rates
# infinite. Counts and times are at most units.MAX_QUANTITY (1e30): 1.7e308 bytes summed over levels is infinite
_SCALE = {"": 1.0, "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
          "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3,
          "s": 1.0, "inst": 1.0, "kinst": 1e3, "minst": 1e6, "ginst": 1e9}


@frozen
class NcuKernel:
    """One profiled kernel: its name, measured time, bytes per level, FLOPs per unit, other counters."""

    id: str
    name: str
    time_s: float
    bytes_by_level: Mapping[str, float]  # "dram", "l2", "l1"
    flop_by_unit: Mapping[Unit, float]
    counters: Mapping[str, float] = field(default_factory=dict)  # instruction counts and the rest

    @property
    def flop(self) -> float:
        return sum(self.flop_by_unit.values())


def _number(text: str, unit: str, column: str, row: int) -> float | None:
    t = text.strip().replace(",", "")
    if t in ("", "n/a", "N/A", "-"):
        return None
    try:
        value = float(t)
    except ValueError:
        raise RooflineError(f"row {row}, column {column}: {text!r} is not a number") from None
    scale = _SCALE.get(unit.strip().lower())
    if scale is None:
        raise RooflineError(f"column {column}: unknown unit {unit!r} (expected byte, Kbyte, nsecond, usecond, ...)")
    value *= scale
    if not math.isfinite(value) or value < 0:  # a counter or a duration: finite and never negative
        raise RooflineError(f"row {row}, column {column}: {text[:40]!r} is not a finite, non-negative number")
    if value and column == TIME and not MIN_TIME_S <= value <= MAX_QUANTITY:
        raise RooflineError(f"row {row}, column {column}: {text[:40]!r} {unit.strip()} is not a kernel's time: a time "
                            f"is from 1 ps to {MAX_QUANTITY:g} s")
    if value and column != TIME and not 1 <= value <= MAX_QUANTITY:  # bytes, operations, instructions: counts
        raise RooflineError(f"row {row}, column {column}: {text[:40]!r} {unit.strip()} is not a count: a count of "
                            f"bytes or operations is 0 or from 1 to {MAX_QUANTITY:g}")
    return value


def _data_rows(rows: list[list[str]], first: int, source: str) -> Iterator[tuple[int, list[str]]]:
    """The rows from rows[first] on that are not blank, each numbered as the file's row (the header,
    rows[0], is row 1) and each as long as the header, or one line naming the row that is not."""
    header = rows[0]
    for r, row in enumerate(rows[first:], start=first + 1):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise RooflineError(f"{source}, row {r}: {len(row)} columns where the header has {len(header)} "
                                "(a truncated file?)")
        yield r, row


def _details_as_raw(rows: list[list[str]], source: str) -> list[list[str]]:
    """`ncu --csv` without `--page raw` prints the details page: one row per (kernel, metric) with "Metric
    Name", "Metric Unit" and "Metric Value" columns, each value in a unit ncu chose for it ("usecond" for
    one kernel, "msecond" for the next). Pivoted here to the raw page's form: a header, a units row (empty:
    known units are converted to base units here) and one row per kernel, in the order they ran."""
    header = rows[0]
    at = {name: header.index(name) for name in ("Metric Name", "Metric Unit", "Metric Value") if name in header}
    ident = [c for c in ("ID", "Kernel Name") if c in header]
    kernels: dict[str, dict[str, str]] = {}
    metrics: dict[str, str] = {}  # metric -> its unit where it could not be converted
    for _, row in _data_rows(rows, 1, source):
        key = row[header.index("ID")] if "ID" in header else str(len(kernels))
        k = kernels.setdefault(key, {c: row[header.index(c)] for c in ident})
        name, text = row[at["Metric Name"]], row[at["Metric Value"]]
        unit = row[at["Metric Unit"]] if "Metric Unit" in at else ""
        scale = _SCALE.get(unit.strip().lower())
        number = text.strip().replace(",", "")
        try:
            k[name] = repr(float(number) * scale) if scale is not None and number else text
            metrics.setdefault(name, "")
        except ValueError:  # not a number (n/a): left as it is, for the raw reader to judge if it needs it
            k[name] = text
            metrics.setdefault(name, "")
        if scale is None:
            metrics[name] = unit
    names = [*ident, *metrics]
    return [names, [""] * len(ident) + list(metrics.values()),
            *[[k.get(n, "") for n in names] for k in kernels.values()]]


def parse_ncu_csv(text: str, source: str = "the CSV") -> list[NcuKernel]:
    """The kernels of an `ncu --csv --page raw` export (see the module doc), or one clear error; the details
    page `ncu --csv` prints without `--page raw` (one row per kernel and metric) is read too."""
    # ncu prints its own "==PROF==" lines before the table when they share a stream: skip to the header
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') or line.startswith("ID,")), None)
    if start is None:
        raise RooflineError(f"{source} is not an Nsight Compute raw CSV (no header row starting with \"ID\"); "
                            f"export one with: {COLLECT}")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if rows and "Metric Name" in rows[0] and "Metric Value" in rows[0]:
        rows = _details_as_raw(rows, source)
    if len(rows) < 3:
        raise RooflineError(f"{source} has a header but no kernel rows (the raw page has a header row, a units "
                            "row, then one row per kernel)")
    header, units = rows[0], rows[1]
    if len(units) != len(header):
        raise RooflineError(f"{source}: the units row has {len(units)} columns, the header {len(header)}")
    col = {name: i for i, name in enumerate(header)}
    dram_cols = [DRAM_READ, DRAM_WRITE] if DRAM_READ in col and DRAM_WRITE in col else [DRAM]
    missing = [m for m in (TIME, *dram_cols) if m not in col]
    if "Kernel Name" not in col:
        missing.insert(0, "Kernel Name")
    if missing:
        raise RooflineError(f"{source} lacks the column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
                            f"collect them with: {COLLECT}")
    tensor_cols = tensor_columns(header)
    sass_cols = sass_columns(header)
    out: list[NcuKernel] = []
    for r, row in _data_rows(rows, 2, source):

        def value(name: str, row: Sequence[str] = row, r: int = r) -> float | None:
            return _number(row[col[name]], units[col[name]], name, r) if name in col else None

        seconds = value(TIME)
        if seconds is None or not seconds > 0:
            raise RooflineError(f"{source}, row {r}: {TIME} is {row[col[TIME]]!r}; a kernel needs a positive time")
        by_level = {"dram": sum(value(c) or 0.0 for c in dram_cols)}
        for level, name in (("l2", L2), ("l1", L1)):
            v = value(name)
            if v is not None:
                by_level[level] = v
        flop: dict[Unit, float] = {}
        if tensor_cols:
            flop[Unit.MATRIX] = sum(value(c) or 0.0 for c in tensor_cols)
        vector = sum((2.0 if op.endswith("fma") else 1.0) * (value(c) or 0.0) for op, c in sass_cols.items())
        if vector:
            flop[Unit.VECTOR] = vector
        counters = {c: value(c) or 0.0 for c in header if c.startswith(PIPE)}
        out.append(NcuKernel(row[col["ID"]] if "ID" in col else str(r - 3), row[col["Kernel Name"]], seconds,
                             by_level, flop, counters))
    if not out:
        raise RooflineError(f"{source} has no kernel rows")
    return out


def tensor_columns(header: Sequence[str]) -> list[str]:
    """The sm__ops_path_tensor_*.sum columns whose sum is the tensor pipe's FLOPs, each op counted once:
    ncu lists a total per source/destination pair (sm__ops_path_tensor_src_bf16_dst_fp32) and breakdowns
    of it (…_sparsity_on / …_sparsity_off; …_op_hmma_src_bf16_dst_fp32 by instruction); a CSV holding
    several is summed over the least broken-down columns of each pair only."""
    by_pair: dict[str, list[tuple[int, str]]] = {}
    for c in header:
        if not (c.startswith(TENSOR_OPS) and c.endswith(".sum")):
            continue
        body = c.removeprefix(TENSOR_OPS).removesuffix(".sum")
        split = 0
        for tail in ("_sparsity_on", "_sparsity_off"):
            if body.endswith(tail):
                body, split = body.removesuffix(tail), split + 1
        if body.startswith("op_") and "_src_" in body:  # op_hmma_src_bf16_dst_fp32 -> src_bf16_dst_fp32
            body, split = body[body.index("_src_") + 1:], split + 2
        by_pair.setdefault(body, []).append((split, c))
    out: list[str] = []
    for cols in by_pair.values():
        least = min(split for split, _ in cols)
        out += [c for split, c in cols if split == least]
    return out


def sass_columns(header: Sequence[str]) -> dict[str, str]:
    """The predicated-on thread instruction columns per op (ffma, fadd, hfma, ...), the sm__ spelling
    before the smsp__ one where a CSV holds both (the same count: never added twice)."""
    out: dict[str, str] = {}
    for prefix in SASS:
        for c in header:
            if c.startswith(prefix) and c.endswith("_pred_on.sum"):
                out.setdefault(c.removeprefix(prefix).split("_")[0], c)
    return out


# Stated bounds (README, "Import"; bench/bench_import.py): each kernel costs about 6 KB of memory and 0.7 ms of
# analysis on 2 cores (100,000 rows: 645 MB, 67 s at load 3), so 30,000 rows stay within 1 GiB and about 30 s,
# as a trace's 30,000 operators do; a raw row is 0.3-2 KB, so 128 MiB holds them.
# Past either bound the file is refused before it is parsed.
MAX_NCU_KERNELS = 30_000
MAX_NCU_BYTES = 128 << 20
FEWER = "profile fewer kernels (ncu --launch-skip N --launch-count M, or --kernel-name REGEX)"


def load_ncu(path: str | Path) -> list[NcuKernel]:
    p = Path(path)
    if not p.is_file():
        raise RooflineError(f"no CSV file at {path}")
    size = p.stat().st_size
    if size > MAX_NCU_BYTES:
        raise RooflineError(f"{path} is {size:,} bytes; an Nsight Compute CSV is read up to {MAX_NCU_BYTES:,} "
                            f"bytes (about {MAX_NCU_KERNELS:,} kernels): {FEWER}")
    data = p.read_bytes()
    lines = data.count(b"\n")
    details = b"Metric Name" in data[:1 << 16]  # the details page has a row per kernel and metric
    if not details and lines > MAX_NCU_KERNELS + 2:  # the raw page: a header, a units row, a row per kernel
        raise RooflineError(f"{path} has {lines:,} lines; the importer reads at most {MAX_NCU_KERNELS:,} kernels "
                            f"(within 1 GiB and about 30 s): {FEWER}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RooflineError(f"{path} is not a text file; give an `ncu --csv --page raw` export") from None
    kernels = parse_ncu_csv(text, str(path))
    if len(kernels) > MAX_NCU_KERNELS:  # the details page: a row per kernel and metric, counted once pivoted
        raise RooflineError(f"{path} holds {len(kernels):,} kernels; the importer reads at most "
                            f"{MAX_NCU_KERNELS:,} (within 1 GiB and about 30 s): {FEWER}")
    return kernels


def _short(name: str) -> str:
    """A kernel's name without its return type, template arguments and parameter list, for joining and
    for tables: "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float *)" ->
    "at::native::(anonymous namespace)::cunn_SoftMaxForward"."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    base = "".join(out).strip()
    if base.endswith(")"):  # the parameter list: the last top-level parentheses
        depth = 0
        for i in range(len(base) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(base[i], 0)
            if depth == 0:
                base = base[:i].strip()
                break
    base = base.removeprefix("void ").strip()
    return base or name


# what a kernel's name says about its math (cuBLAS/CUTLASS names carry it: "gemm_bf16bf16_bf16f32")
_NAMED_DTYPES = (("e4m3", "fp8"), ("e5m2", "fp8"), ("fp8", "fp8"), ("bf16", "bf16"), ("tf32", "tf32"),
                 ("f16", "fp16"), ("fp16", "fp16"), ("h16", "fp16"), ("half", "fp16"))


def math_dtype(kernel_name: str) -> DType | None:
    """The dtype a kernel's name says it computes in (bf16, fp16, fp8, tf32), or None (the analysis' dtype)."""
    low = kernel_name.lower()
    for word, name in _NAMED_DTYPES:
        if word in low:
            return get_dtype(name)
    return None


def ncu_profile(kernels: Sequence[NcuKernel], source: str = "") -> Profile:
    """Nsight Compute's kernels alone: each placed by its MEASURED FLOPs and DRAM bytes (no shapes)."""
    trace = Trace(name=Path(source).stem if source else "ncu")
    p = Profile(trace, device="cuda", shapes=False, source=source)
    counter: dict[str, int] = {}
    byte = get_dtype("uint8")
    short: dict[str, str] = {}  # a profile repeats few kernel names many times: each shortened once
    for k in kernels:
        base = short.get(k.name) or short.setdefault(k.name, _short(k.name)[:60])
        counter[base] = counter.get(base, 0) + 1
        name = base if counter[base] == 1 else f"{base}#{counter[base]}"
        dram = round(k.bytes_by_level.get("dram", 0.0))
        # the measured DRAM traffic as one byte tensor the kernel writes (not an operand: its dtype is
        # not the math's, which the kernel's name tells where it can)
        moved = (Tensor(f"{name}.dram", (dram,), byte, persistent=True),) if dram else ()
        trace.ops.append(Op(name, "gpu_kernel", (), moved, dict(k.flop_by_unit), compute_dtype=math_dtype(k.name),
                            traffic={Level.L2: k.bytes_by_level["l2"]} if "l2" in k.bytes_by_level else {},
                            formula="counted by Nsight Compute: FLOPs and DRAM bytes as measured",
                            note="measured counters, not a model"))
        trace.times_s[name] = k.time_s
        p.measured_bytes[name] = dict(k.bytes_by_level)
        p.measured_flop[name] = k.flop
    p.notes.append("Nsight Compute alone: each kernel is placed by its measured counters (no shapes, so no "
                   "predicted bytes to set beside them; add the profiler trace of the same run for those)")
    silent = [k for k in kernels if Unit.MATRIX in k.flop_by_unit and not k.flop_by_unit[Unit.MATRIX]
              and any(word in k.name.lower() for word in ("gemm", "mma"))]
    if silent:  # e.g. Hopper's warpgroup MMA, which the tensor-path counters may not see
        p.notes.append(f"{len(silent)} kernel{'s' if len(silent) > 1 else ''} named as a GEMM counted 0 tensor-path "
                       "ops (sm__ops_path_tensor_*): their matrix FLOPs are unknown here, not zero; import the "
                       "profiler trace with --ncu CSV to count them from the shapes")
    return p


def attach_ncu(profile: Profile, kernels: Sequence[NcuKernel]) -> int:
    """Measured bytes and FLOPs beside the predicted ones: the k-th launch of a GPU kernel in the
    profiler trace is the k-th ncu row of that name (names compared without templates and parameters).
    ncu's times replace the trace's (ncu serializes kernels; they are the kernels' own times). Returns
    how many GPU kernels were joined."""
    rows: dict[str, list[NcuKernel]] = {}
    for k in kernels:
        rows.setdefault(_short(k.name), []).append(k)
    taken: dict[str, int] = {}
    joined = 0
    times: dict[str, float] = {}
    for kernel, gpu_name, _ts in profile.gpu_kernels:
        key = _short(gpu_name)
        i = taken.get(key, 0)
        if i >= len(rows.get(key, [])):
            continue
        taken[key] = i + 1
        k = rows[key][i]
        joined += 1
        by = profile.measured_bytes.setdefault(kernel, {})
        for level, b in k.bytes_by_level.items():
            by[level] = by.get(level, 0.0) + b
        profile.measured_flop[kernel] = profile.measured_flop.get(kernel, 0.0) + k.flop
        times[kernel] = times.get(kernel, 0.0) + k.time_s
    profile.trace.times_s.update(times)
    if not joined:
        raise RooflineError("no kernel of the CSV matches a GPU kernel of the trace by name; were they recorded "
                            "from the same program?")
    left = sum(len(v) for v in rows.values()) - joined
    if left:
        profile.notes.append(f"{left} Nsight Compute rows matched no kernel of the trace (profiled beyond it?)")
    return joined


def measured_intensity(profile: Profile, kernel: str) -> float | None:
    """Measured FLOPs / measured DRAM bytes of one kernel, when both were counted."""
    flop = profile.measured_flop.get(kernel)
    dram = profile.measured_bytes.get(kernel, {}).get("dram")
    if not flop or not dram:
        return None
    return flop / dram if math.isfinite(flop / dram) else None


__all__ = ["COLLECT", "NcuKernel", "attach_ncu", "load_ncu", "measured_intensity", "ncu_profile", "parse_ncu_csv",
           "sass_columns", "tensor_columns"]
