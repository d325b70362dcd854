"""What a measurement ran on: device, threads, BLAS kernel, library versions, clocks, caches.

A ceiling without its environment cannot be compared with anything: OpenBLAS picks its kernel at
run time (OPENBLAS_CORETYPE can force an older one), thread counts change bandwidth, and a GPU's
clocks change its FLOP/s. Everything readable without privileges is recorded; what is not readable
is left out rather than guessed.

numpy, torch and threadpoolctl are imported inside functions and may be absent.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from roofline.frozen import frozen

# environment variables that change what a measurement gives
VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS",
             "MKL_NUM_THREADS", "MKL_ENABLE_INSTRUCTIONS", "OMP_PROC_BIND", "OMP_PLACES", "CUDA_VISIBLE_DEVICES",
             "NVIDIA_TF32_OVERRIDE", "TORCH_BLAS_PREFER_CUBLASLT")


@frozen
class Environment:
    device: str  # "cpu" | "cuda"
    device_name: str
    threads: int  # CPUs this process may run on; on CUDA, the GPU's multiprocessors
    llc_bytes: int | None = None  # last-level cache (CPU L3, GPU L2)
    memory_capacity_bytes: int | None = None
    blas: tuple[Mapping[str, str], ...] = ()
    versions: Mapping[str, str] = field(default_factory=dict)
    clocks: Mapping[str, str] = field(default_factory=dict)
    variables: Mapping[str, str] = field(default_factory=dict)
    details: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "blas", tuple(MappingProxyType(dict(b)) for b in self.blas))
        for name in ("versions", "clocks", "variables", "details"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "device_name": self.device_name, "threads": self.threads,
                "llc_bytes": self.llc_bytes, "memory_capacity_bytes": self.memory_capacity_bytes,
                "blas": [dict(b) for b in self.blas], "versions": dict(self.versions),
                "clocks": dict(self.clocks), "variables": dict(self.variables), "details": dict(self.details)}

    def summary_lines(self) -> list[str]:
        """Short lines for a machine file's notes and the text report."""
        lines = [f"{self.device_name}, {self.threads} {'SMs' if self.device == 'cuda' else 'threads'}"]
        if self.llc_bytes:
            lines[0] += f", last-level cache {self.llc_bytes / 2**20:g} MiB"
        for b in self.blas:
            lines.append("BLAS: " + ", ".join(f"{k}={v}" for k, v in b.items() if k != "filepath"))
        if self.versions:
            lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in self.versions.items()))
        if self.clocks:
            lines.append("clocks: " + ", ".join(f"{k} {v}" for k, v in self.clocks.items()))
        if self.variables:
            lines.append("variables: " + ", ".join(f"{k}={v}" for k, v in self.variables.items()))
        return lines


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_threads() -> int:
    """CPUs this process may run on (the affinity mask, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_name() -> str:
    text = _read("/proc/cpuinfo") or ""
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return match.group(1).strip() if match else (platform.processor() or platform.machine() or "CPU")


def _size(text: str) -> int | None:
    match = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip())
    if not match:
        return None
    return int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]


def cpu_llc_bytes() -> int | None:
    """The largest cache level's size from sysfs (an L3 of 32 MiB reads "32768K")."""
    best: int | None = None
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")) if base.is_dir() else []:
        size = _read(str(index / "size"))
        if size and (n := _size(size)) and (best is None or n > best):
            best = n
    return best


def cpu_memory_bytes() -> int | None:
    text = _read("/proc/meminfo") or ""
    match = re.search(r"^MemTotal:\s*(\d+)\s*kB", text, re.M)
    return int(match.group(1)) * 1024 if match else None


def cpu_clocks() -> dict[str, str]:
    clocks: dict[str, str] = {}
    text = _read("/proc/cpuinfo") or ""
    mhz = re.findall(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M)
    if mhz:
        clocks["cpu MHz (now, cpu0)"] = mhz[0]
    for key, name in (("scaling_cur_freq", "cur kHz"), ("cpuinfo_max_freq", "max kHz")):
        value = _read(f"/sys/devices/system/cpu/cpu0/cpufreq/{key}")
        if value:
            clocks[name] = value
    return clocks


def blas_info() -> list[dict[str, str]]:
    """threadpoolctl's view of the BLAS and OpenMP libraries loaded (kernel, version, threads)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    out = []
    for info in threadpool_info():
        keep = {k: str(v) for k, v in info.items()
                if k in ("internal_api", "version", "num_threads", "architecture", "threading_layer", "prefix")}
        out.append(keep)
    return out


def versions() -> dict[str, str]:
    """Python's version, and numpy's and torch's where they import (each imported by name, in plain sight)."""
    out = {"python": platform.python_version()}
    try:
        import numpy
    except ImportError:
        pass
    else:
        out["numpy"] = str(getattr(numpy, "__version__", "?"))
    try:
        import torch
    except ImportError:
        pass
    else:
        out["torch"] = str(getattr(torch, "__version__", "?"))
    return out


def variables() -> dict[str, str]:
    return {k: os.environ[k] for k in VARIABLES if k in os.environ}


def capture_cpu() -> Environment:
    details = {"machine": platform.machine(), "system": f"{platform.system()} {platform.release()}"}
    if hasattr(os, "getloadavg"):  # other processes on these CPUs: why a rerun's figures may differ
        details["load average"] = f"{os.getloadavg()[0]:.2f} over 1 minute on {os.cpu_count() or 0} CPUs"
    try:
        import torch

        details["torch threads"] = str(torch.get_num_threads())
        details["torch cpu capability"] = str(torch.backends.cpu.get_cpu_capability())
    except ImportError:
        pass
    return Environment("cpu", cpu_name(), cpu_threads(), cpu_llc_bytes(), cpu_memory_bytes(), tuple(blas_info()),
                       versions(), cpu_clocks(), variables(), details)


def gpu_clocks() -> dict[str, str]:
    """SM and memory clocks from nvidia-smi where it is installed (it is not on every host)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,"
                              "power.draw,temperature.gpu", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0 or not out.stdout.strip():
        return {}
    names = ("sm", "max sm", "memory", "max memory", "power", "temperature")
    return dict(zip(names, (v.strip() for v in out.stdout.strip().splitlines()[0].split(",")), strict=False))


def capture_cuda() -> Environment:
    import torch

    props = torch.cuda.get_device_properties(0)
    details = {"compute capability": f"{props.major}.{props.minor}",
               "multiprocessors": str(props.multi_processor_count)}
    cuda_version = getattr(torch.version, "cuda", None)
    if cuda_version:
        details["cuda"] = str(cuda_version)
    llc = getattr(props, "L2_cache_size", None)
    return Environment("cuda", torch.cuda.get_device_name(0), props.multi_processor_count,
                       int(llc) if llc else None, int(props.total_memory), (), versions(), gpu_clocks(),
                       variables(), details)


def capture_environment(device: str) -> Environment:
    return capture_cuda() if device == "cuda" else capture_cpu()
