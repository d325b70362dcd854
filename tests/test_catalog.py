"""Every machine file: units, ranges, consistency. Peers have shipped sparse figures as dense and
bandwidths off by 1000x; these checks catch both."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofline.errors import RooflineError
from roofline.hardware import catalog, get_machine, load_machine_file, machine_to_toml
from roofline.hardware.catalog import DATA

REQUIRED = ["a100-sxm-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "gb200", "mi300x", "mi325x", "mi355x",
            "l4", "l40s", "rtx-4090", "tpu-v5e", "tpu-v5p", "tpu-v6e"]
MACHINES = sorted(catalog().values(), key=lambda m: m.id)


def test_catalog_has_every_required_machine() -> None:
    assert set(REQUIRED) <= set(catalog())


@pytest.mark.parametrize("m", MACHINES, ids=lambda m: m.id)
def test_machine_figures_are_in_range(m) -> None:  # type: ignore[no-untyped-def]
    bf16 = m.matrix_flop_per_s["bf16"]
    assert 50e12 <= bf16 <= 20e15  # 50 TFLOP/s .. 20 PFLOP/s: a dense accelerator peak, not GFLOP/s or sparse x1000
    bw = m.memory_bytes_per_s
    assert 100e9 <= bw <= 20e12  # 100 GB/s .. 20 TB/s
    assert 50 <= m.ridge_flop_per_byte("bf16") <= 1200
    cap = m.memory_capacity_bytes
    assert cap is not None and 8e9 <= cap <= 400e9
    # narrower types never run slower than wider ones on the matrix units
    order = ["fp64", "tf32", "bf16", "fp8", "fp4"]
    present = [m.matrix_flop_per_s[d] for d in order if d in m.matrix_flop_per_s]
    assert present == sorted(present)
    if "fp16" in m.matrix_flop_per_s:
        assert m.matrix_flop_per_s["fp16"] == m.matrix_flop_per_s["bf16"]
    # listed sparse figures are twice the dense ones (2:4 sparsity); 2.5% slack because NVIDIA's own
    # L40S datasheet prints "362.05 | 733" (733 / 362.05 = 2.025)
    for d, sparse in m.sparse_flop_per_s.items():
        assert sparse == pytest.approx(2 * m.matrix_flop_per_s[d], rel=0.025), d
    if m.kind == "gpu":
        assert 5e12 <= m.vector_flop_per_s["fp32"] < bf16  # vector FP32 under the tensor peak
    if m.interconnect_bytes_per_s is not None:
        assert 50e9 <= m.interconnect_bytes_per_s <= 4e12


@pytest.mark.parametrize("m", MACHINES, ids=lambda m: m.id)
def test_every_section_cites_a_source(m) -> None:  # type: ignore[no-untyped-def]
    assert m.sources["peak.matrix"] and m.sources["memory.dram"]
    for section, text in m.sources.items():
        assert len(text) > 15, section


def test_aliases() -> None:
    assert get_machine("h100").id == "h100-sxm"
    assert get_machine("A100").id == "a100-sxm-80gb"
    assert get_machine("H200").matrix_flop_per_s["bf16"] == get_machine("h100").matrix_flop_per_s["bf16"]


def test_unknown_machine_names_close_matches() -> None:
    with pytest.raises(RooflineError, match=r"unknown machine 'h10'.*did you mean.*h100"):
        get_machine("h10")


def test_dtype_without_peak_says_which_it_has() -> None:
    with pytest.raises(RooflineError, match=r"a100-sxm-80gb lists no matrix peak for fp8; it has: fp64, tf32, bf16"):
        get_machine("a100").peak_flop_per_s("fp8")


def test_round_trip_through_toml(tmp_path: Path) -> None:
    h100 = get_machine("h100")
    path = tmp_path / "mine.toml"
    path.write_text(machine_to_toml(h100))
    again = load_machine_file(path)
    assert again.ridge_flop_per_byte("bf16") == pytest.approx(h100.ridge_flop_per_byte("bf16"), rel=1e-3)
    assert dict(again.sparse_flop_per_s) == pytest.approx(dict(h100.sparse_flop_per_s), rel=1e-3)
    assert get_machine(str(path)).id == "h100-sxm"


@pytest.mark.parametrize(("text", "message"), [
    ("id = 'x'\nname = 'x'\n[peak.matrix]\nbf16 = '1 TFLOP/s'\n", "missing \\[memory.dram\\] bandwidth"),
    ("id = 'x'\nname = 'x'\n[memory.dram]\nbandwidth = '1 TB/s'\n", "missing \\[peak.matrix\\]"),
    ("id = 'x'\nname = 'x'\n[peak.matrix]\nbf16 = '1 TB/s'\n[memory.dram]\nbandwidth = '1 TB/s'\n",
     "is in bytes/s, expected FLOP/s"),
    ("id = 'x'\nname = 'x'\n[peak.matrix]\nbf17 = '1 TFLOP/s'\n[memory.dram]\nbandwidth = '1 TB/s'\n",
     "unknown dtype 'bf17'"),
    ("id = 'x'\nname = 'x'\n[peak.matrix]\nbf16 = '-1 TFLOP/s'\n[memory.dram]\nbandwidth = '1 TB/s'\n",
     "must be positive"),
    ("id = 'x'\nname = \n", "not valid TOML"),
])
def test_malformed_machine_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(RooflineError, match=message):
        load_machine_file(path)


def test_data_folder_holds_only_machine_files() -> None:
    # systems/ holds the systems; index.json the names (test_the_name_index_is_what_the_files_say)
    assert all(p.suffix == ".toml" for p in DATA.iterdir() if p.is_file() and p.name != "index.json")


def test_the_name_index_is_what_the_files_say() -> None:
    # hardware/data/index.json lets one lookup read one file; it must name exactly the ids, aliases and
    # system devices the TOML files declare (after adding a file: python scripts/write_hardware_index.py)
    from roofline.hardware.index import read_index
    from roofline.hardware.system_file import build_index

    assert read_index() == build_index()


def test_one_lookup_reads_one_catalog_file() -> None:
    # `--machine h100` reads h100-sxm.toml alone (the alias is found in the index, not by parsing all 16);
    # in a fresh interpreter, so that no other test's reads are counted
    import subprocess
    import sys

    code = ("import importlib\nfrom pathlib import Path\nfrom roofline.hardware import get_machine\n"
            "cat = importlib.import_module('roofline.hardware.catalog')\nread = []\nreal = cat.read_toml\n"
            "cat.read_toml = lambda p, *a: (read.append(Path(p).name), real(p, *a))[1]\n"
            "m = get_machine('h100')\nprint(m.memory_bytes_per_s, read)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["3350000000000.0", "['h100-sxm.toml']"]  # H100 SXM5 datasheet: 3.35 TB/s HBM3
