"""All-reduce as NCCL and the engines run it (roofline.parallel.algorithms), its fit on the measured
tables (roofline.calibration.collective) and `roofline collective`.

Definitions checked: nccl-tests doc/PERFORMANCE.md (algbw = S / t; busbw = algbw · 2(n−1)/n for
all-reduce); NVLink SHARP moves S per device each way; vLLM csrc/custom_all_reduce.cuh chooses
one-shot for n = 2, n ≤ 4 and S < 512 KiB, n ≤ 8 and S < 256 KiB. Fixture rows:
tests/fixtures/collectives_allreduce.csv, extracted from aiconfigurator-core 0.12.0 (its header names
the tables).
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline.calibration.collective import CommRow, fit_group, validate_rows
from roofline.cli import cli, main
from roofline.errors import RooflineError
from roofline.parallel.algorithms import Algorithm, all_reduce_bytes, estimate, system_collectives
from roofline.parallel.collectives import Collective

FIXTURE = Path(__file__).parent / "fixtures" / "collectives_allreduce.csv"
GIB = 2**30
H200_LINK = 450e9  # NVLink 4: 900 GB/s per GPU both ways = 450 GB/s each way (H200 datasheet)


def fixture_rows() -> list[CommRow]:
    with FIXTURE.open() as f:
        lines = [line for line in f if not line.startswith("#")]
    out = []
    for r in csv.DictReader(lines):
        # message_size is elements; half and bfloat16 are 2 bytes
        out.append(CommRow(r["system"], r["engine"], r["version"], r["kernel_source"], r["dtype"],
                           Collective.ALL_REDUCE, int(r["num_gpus"]), 2.0 * int(r["message_size"]),
                           float(r["latency_ms"]) * 1e-3))
    return out


def test_bytes_per_device_by_algorithm() -> None:
    s, n = 1e6, 8
    assert all_reduce_bytes(Algorithm.RING, s, n) == pytest.approx(2 * 7 / 8 * s)  # 2(n−1)/n · S
    assert all_reduce_bytes(Algorithm.TWO_SHOT, s, n) == pytest.approx(2 * 7 / 8 * s)  # RS + AG
    assert all_reduce_bytes(Algorithm.NVLS, s, n) == pytest.approx(s)  # sent once, received once
    assert all_reduce_bytes(Algorithm.ONE_SHOT, s, n) == pytest.approx(7 * s)  # every peer's buffer read


def test_nvls_floor_and_busbw_against_nccl_tests_definitions() -> None:
    e = estimate("all_reduce", 16 * GIB, "hgx-h200", algorithm="nvls")
    alpha = system_collectives("hgx-h200").alpha_floor_s  # type: ignore[union-attr]
    t = alpha + 16 * GIB / H200_LINK  # NVLS: S bytes each way per device
    assert e.floor.floor_s == pytest.approx(t)
    assert e.algbw(t) == pytest.approx(16 * GIB / t)  # algbw = S / t
    assert e.busbw(t) == pytest.approx(16 * GIB / t * 2 * 7 / 8)  # busbw = algbw · 2(n−1)/n
    # at 16 GiB α is nothing: busbw → 2(n−1)/n · 450 = 787.5 GB/s, the NVLS ceiling
    assert 786e9 < e.busbw(t) <= 787.5e9
    # stas00/ml-engineering network/benchmarks/results/all-reduce-8xH200.md: 482.26 GB/s busbw at 16 GiB (NVLS on)
    assert e.busbw(t) >= 482.26e9
    # ...which the ring's floor could not explain: its busbw is at most the link's 450 GB/s
    ring = estimate("all_reduce", 16 * GIB, "hgx-h200", algorithm="ring")
    assert ring.busbw(ring.floor.floor_s) < 450e9 < 482.26e9


def test_auto_chooses_as_engines_do() -> None:
    kib = 2**10
    assert estimate("all_reduce", 32 * kib, "hgx-h200").chosen is Algorithm.ONE_SHOT  # n 8, S < 256 KiB
    assert estimate("all_reduce", 384 * kib, "hgx-h200").chosen is Algorithm.TWO_SHOT  # n 8, S ≥ 256 KiB
    assert estimate("all_reduce", 384 * kib, "hgx-h200", 4).chosen is Algorithm.ONE_SHOT  # n 4, S < 512 KiB
    assert estimate("all_reduce", 4 * 2**20, "hgx-h200", 2).chosen is Algorithm.ONE_SHOT  # n 2, any S ≤ 8 MiB
    assert estimate("all_reduce", 16 * 2**20, "hgx-h200").chosen is Algorithm.NVLS  # > 8 MiB: NCCL, NVLS
    assert estimate("all_reduce", 16 * 2**20, "l40s-pcie-8").chosen is Algorithm.RING  # PCIe: no NVLS
    assert estimate("all_reduce", 16 * 2**20, "hgx-h200", 16).chosen is Algorithm.RING  # across nodes
    assert estimate("all_reduce", 16 * 2**20, "hgx-h200", nccl_only=True).chosen is Algorithm.NVLS


def test_floor_alpha_below_the_measured_32_kib_all_reduce() -> None:
    # aiconfigurator-core h200_sxm vllm 0.24.0 custom all-reduce, 8 GPUs, 16384 bf16 elements = 32 KiB:
    # 5.7 µs measured; the old α of 15 µs was 2.7x that. Our floor now sits under it.
    e = estimate("all_reduce", 32 * 2**10, "hgx-h200")
    assert e.lowest.floor_s < 5.7e-6
    assert e.floor.floor_s < 5.7e-6  # one-shot: α + 7 · 32 KiB / 450 GB/s = 2.2 + 0.51 µs


def test_alpha_and_busbw_fitted_on_fixture_rows_by_hand() -> None:
    rows = [r for r in fixture_rows() if (r.system, r.engine, r.group) == ("h200_sxm", "nccl", 8)]
    assert len(rows) == 21  # 512 B to 512 MiB, doubling
    g = fit_group(rows)
    # α: median of the rows of at most 64 KiB (32768 elements):
    # 15.98 16.01 16.04 16.67 16.76 18.30 18.38 19.89 µs -> (16.67 + 16.76) / 2 = 16.715 µs
    assert g["alpha_s"] == pytest.approx(16.715e-6, rel=1e-9)
    # busbw: median over the three largest of 1.75 · S / (t − α), S = 128, 256, 512 MiB:
    largest = [(2**27, 564.52e-6), (2**28, 1052.63e-6), (2**29, 2040.31e-6)]
    hand = statistics.median(1.75 * s / (t - 16.715e-6) for s, t in largest)  # 428.8, 453.5, 464.3 GB/s
    assert g["busbw_bytes_per_s"] == pytest.approx(hand, rel=1e-9)
    assert g["busbw_bytes_per_s"] == pytest.approx(453.48e9, rel=1e-4)
    # NCCL ran NVLS: busbw above the ring's ceiling (450 GB/s), below NVLS's (787.5 GB/s)
    assert 450e9 < g["busbw_bytes_per_s"] < 787.5e9
    # the shipped file holds the same fit (fitted on the same table)
    shipped = system_collectives("hgx-h200").fits["nccl"].groups[8]  # type: ignore[union-attr]
    assert shipped.alpha_s == pytest.approx(16.715e-6, rel=1e-9)
    assert shipped.busbw_bytes_per_s == pytest.approx(hand, rel=1e-9)


def test_custom_all_reduce_alpha_fitted_by_hand() -> None:
    rows = [r for r in fixture_rows() if (r.system, r.engine, r.group) == ("h200_sxm", "trtllm", 8)]
    small = sorted(r.measured_s for r in rows if r.message_bytes <= 64 * 2**10)
    assert len(small) == 9  # 128 … 32768 elements
    assert fit_group(rows)["alpha_s"] == pytest.approx(small[4], rel=1e-12)  # the median of nine
    assert 3.0e-6 < small[4] < 4.0e-6  # TensorRT-LLM's all-reduce starts in 3–4 µs on 8 H200s, not 15


def test_no_fixture_row_beats_the_floor() -> None:
    groups = validate_rows(fixture_rows())
    assert {g.system for g in groups} == {"hgx-h200", "hgx-b200", "dgx-h100"}
    assert sum(g.rows for g in groups) == 396
    assert all(g.faster_than_floor == 0 for g in groups)
    assert all(g.worst_share <= 1.0 for g in groups)


def test_floor_is_below_band_and_busbw_in_output() -> None:
    e = estimate("all_reduce", 16 * GIB, "hgx-h200")
    assert e.chosen is Algorithm.NVLS
    assert e.band_s is not None and e.expected_s is not None
    assert e.floor.floor_s <= e.band_s[0] <= e.expected_s <= e.band_s[1]
    out = e.to_dict()
    assert out["algorithm"] == "nvls" and out["floor_busbw_bytes_per_s"] > 786e9


@pytest.mark.parametrize(("args", "words"), [
    (["all-reduce", "1MiB", "--algorithm", "foo"], "unknown --algorithm 'foo'"),
    (["all-reduce", "1MiB", "--machine", "l40s-pcie-8", "--algorithm", "nvls"], "has no NVLink SHARP"),
    (["all-reduce", "1MiB", "--devices", "16", "--algorithm", "one-shot"], "inside one node"),
    (["all-sum", "1MiB"], "unknown collective"),
    (["all-reduce", "0B"], "must be positive"),
    (["all-gather", "1MiB", "--algorithm", "nvls"], "all-reduce algorithm"),
])
def test_bad_input_one_line_exit_2(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collective", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_library_refuses_unknown_algorithm() -> None:
    with pytest.raises(RooflineError, match="unknown algorithm"):
        estimate("all_reduce", 1e6, "hgx-h200", algorithm="butterfly")


def test_cli_names_algorithm_floor_band() -> None:
    r = CliRunner().invoke(cli, ["collective", "all-reduce", "16GiB", "--machine", "hgx-h200"])
    assert r.exit_code == 0, r.output
    assert "algorithm  nvls" in r.output and "busbw 787 GB/s" in r.output and "expected" in r.output
    assert "38.2 ms" in r.output  # 2.2 µs + 16 GiB / 450 GB/s = 38.18 ms


def test_validate_kind_collective_on_the_installed_tables() -> None:
    pytest.importorskip("aiconfigurator_core", reason="the calibration extra: pip install -e '.[calibration]'")
    pytest.importorskip("pyarrow")
    r = CliRunner().invoke(cli, ["validate", "--kind", "collective", "--machine", "hgx-h200", "--json"])
    assert r.exit_code == 0, r.output
    import json

    out = json.loads(r.output)
    assert out["faster_than_floor"] == 0  # every measured NCCL and custom all-reduce row is above our floor
    kinds = {(g["engine"], g["kind"]) for g in out["groups"]}
    assert ("nccl", "all_reduce") in kinds and ("trtllm", "all_reduce") in kinds and ("nccl", "all_to_all") in kinds
    nccl = next(g for g in out["groups"] if (g["engine"], g["kind"]) == ("nccl", "all_reduce"))
    assert nccl["rows"] == 126  # 21 sizes × 3 group sizes × 2 dtypes (half, int8)
    assert nccl["in_band"] >= 0.7  # the 10th–90th percentile band holds ~80% of its own rows
