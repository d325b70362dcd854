"""`roofline machine SYSTEM` and `roofline machines --systems`: systems shown, as JSON, derived, and
the errors (one line, exit 2) of names and files that are not one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.hardware import get_system, system_catalog

DATA = Path(__file__).resolve().parents[1] / "src" / "roofline" / "hardware" / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, out: str, err: str) -> str:
    assert code == 2 and out == ""
    assert err.startswith("roofline: error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_machine_shows_a_system_with_its_links(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "machine", "dgx-h100")
    assert code == 0
    assert out.startswith("NVIDIA DGX H100 (dgx-h100)")
    assert "NVIDIA H100 SXM5 80GB (h100-sxm)" in out
    assert "links (per device, per direction)" in out
    assert "node: NVLink 4 through NVSwitch" in out and "450 GB/s" in out and "15 µs" in out
    assert "network: InfiniBand NDR" in out and "50 GB/s" in out and "25.2 µs" in out
    # an alias finds it too
    code, alias_out, _ = run(capsys, "machine", "HGX_H100")
    assert code == 0 and alias_out == out


def test_machine_json_is_the_systems_to_dict(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "machine", "dgx-h100", "--json")
    assert code == 0
    d = json.loads(out)
    assert d == json.loads(json.dumps(get_system("dgx-h100").to_dict()))
    assert d["kind"] == "system" and d["devices_per_node"] == 8 and d["max_devices"] == 8 * 2048
    assert d["links"]["node"]["bytes_per_s"] == 900e9 / 2  # NVIDIA's 900 GB/s counts both directions
    assert d["links"]["network"]["bytes_per_s"] == 400e9 / 8  # 400 Gb/s NDR, per direction already


def test_machine_explain_derives_the_per_direction_figure(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "machine", "dgx-h100", "--explain")
    assert code == 0
    assert "8 × NVIDIA H100 SXM5 80GB (h100-sxm) per node, up to 2,048 nodes = 16,384 devices" in out
    assert "the vendor states 900 GB/s per device, both directions together (the device's [interconnect], NVLink 4)" \
        in out
    assert "per direction = 900 GB/s / 2 = 450 GB/s (9e+11 / 2 = 4.5e+11 B/s)" in out
    assert "50 GB/s per device, per direction, as stated (a network port rate is per direction already)" in out
    assert "latency α = 15 µs" in out and "latency α = 25.2 µs" in out
    # a ring all-reduce of 1 MiB over the node: 2·7/8 · 1,048,576 = 1,835,008 B; 15 µs + 1,835,008 / 450e9
    assert "2·7/8 · 1,048,576 = 1,835,008 B; 15 µs + 1,835,008 / 4.5e+11 = 19.078 µs" in out


@pytest.mark.parametrize(("name", "line"), [
    ("hgx-b200", "per direction = 1.8 TB/s / 2 = 900 GB/s"),  # NVLink 5
    ("mi300x-platform", "per direction = 896 GB/s / 2 = 448 GB/s"),  # 7 Infinity Fabric peers, 128 GB/s each both ways
    ("tpu-v5p-slice", "per direction = 1.2 TB/s / 2 = 600 GB/s"),  # ICI
    ("l4-pcie-8", "32 GB/s per device, per direction, as stated"),  # the device file has no link figure
])
def test_explain_of_each_kind_of_link(capsys: pytest.CaptureFixture[str], name: str, line: str) -> None:
    code, out, _ = run(capsys, "machine", name, "--explain")
    assert code == 0 and line in out


def test_a_bare_device_keeps_its_machine_view(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "machine", "b200")
    assert code == 0 and "2.25 PFLOP/s" in out and "links (per device" not in out
    code, out, _ = run(capsys, "machine", "h100", "--explain")
    assert code == 0
    assert "bf16  I* = peak / BW" in out
    assert "900 GB/s as the vendor states it, both directions together; per direction 900 GB/s / 2 = 450 GB/s" in out
    code, out, _ = run(capsys, "machine", "h100", "--json")
    assert code == 0 and json.loads(out)["name"] == "h100-sxm"


def test_machines_systems_lists_every_system(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "machines", "--systems")
    assert code == 0
    assert out.startswith("systems (link figures per device, per direction)")
    for sid in system_catalog():
        assert sid in out
    assert "450 GB/s, 15 µs, switch" in out and "448 GB/s, 23.2 µs, fully_connected" in out
    code, out, _ = run(capsys, "machines", "--systems", "--json")
    assert code == 0
    rows = json.loads(out)
    assert sorted(r["name"] for r in rows) == sorted(system_catalog())
    assert all(r["kind"] == "system" for r in rows)
    # named: a system, and a bare device as the one node of 8 that --machine makes of it
    code, out, _ = run(capsys, "machines", "--systems", "hgx-h200", "h100", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["hgx-h200", "h100-sxm"]
    assert rows[1]["from_device"] is True and rows[1]["links"]["node"]["bytes_per_s"] == 450e9


def test_the_device_listing_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "machines", "--json")
    assert code == 0
    assert "dgx-h100" not in {r["name"] for r in json.loads(out)}
    code, out, _ = run(capsys, "machines", "hgx-b200", "--json")  # a device alias too: the listing is of devices
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["b200"]


def test_a_system_file_and_a_machine_file_by_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "two-h100.toml"
    f.write_text('id = "two-h100"\nname = "Two H100 on PCIe"\ndevice = "h100-sxm"\ndevices_per_node = 2\n'
                 '[link.node]\nname = "PCIe Gen5 x16"\nbandwidth = "64 GB/s"\nlatency = "20 us"\ntopology = "pcie"\n')
    code, out, _ = run(capsys, "machine", str(f))
    assert code == 0 and out.startswith("Two H100 on PCIe (two-h100)") and "64 GB/s" in out
    code, out, _ = run(capsys, "machine", str(f), "--explain")
    assert code == 0
    # the device's 900 GB/s NVLink is not this link: said so, not silently halved
    assert "64 GB/s per device, per direction, as this system states it" in out
    assert "2·1/2 · 1,048,576 = 1,048,576 B; 20 µs + 1,048,576 / 6.4e+10 = 36.384 µs" in out
    code, out, _ = run(capsys, "machine", str(DATA / "h100-sxm.toml"), "--json")
    assert code == 0 and json.loads(out)["name"] == "h100-sxm"


@pytest.mark.parametrize(("argv", "needles"), [
    # close matches from both catalogs: systems (dgx-h100, ...) and devices (h100, ...)
    (["machine", "dgx-h10"], ["unknown machine or system 'dgx-h10'; did you mean dgx-h100"]),
    (["machine", "h10"], ["unknown machine or system 'h10'; did you mean h100"]),
    (["machine", "mi300"], ["did you mean mi300x, mi300x-8", "roofline machines --systems"]),
    (["machine", "gb20"], ["did you mean gb200, b200, hgx-b200"]),
    (["machine", "dgx-h10", "--json"], ["unknown machine or system 'dgx-h10'"]),
    (["machines", "--systems", "dgx-h10"], ["unknown", "dgx-h100"]),
    (["machines", "dgx-h100"], ["dgx-h100 is a system of 8 × h100-sxm", "roofline machines --systems"]),
    (["machines", "--systems", "--png", "x.png"], ["--systems lists systems"]),
    (["machine", "dgx-h100", "--json", "--explain"], ["give one of them"]),
    (["machine", "/no/such/system.toml"], ["does not exist"]),
])
def test_bad_names_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], needles: list[str]) -> None:
    err = one_line_error(*run(capsys, *argv))
    for needle in needles:
        assert needle in err


def test_a_malformed_system_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('id = "bad"\nname = "bad"\ndevice = "h100-sxm"\ndevices_per_node = 8\n'
                 '[link.node]\nlatency = "15 us"\n')
    err = one_line_error(*run(capsys, "machine", str(f)))
    assert f"system file {f}" in err and "[link.node] needs a bandwidth" in err
