"""Systems: nodes and clusters of devices and the links between them, as data files and a typed loader.

Every link figure is per device, per direction; the arithmetic from the vendors' figures (most of them
bidirectional totals) is written out here by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.errors import RooflineError
from roofline.graph import Cost
from roofline.hardware import Link, System, Topology, get_machine, get_system, load_system_file, system_catalog
from roofline.hardware.system_file import DEFAULT_LINK_LATENCY_S, SYSTEMS
from roofline.placement import place
from roofline.report.text.system import system_text, systems_text
from roofline.vocab import Level, Unit

REQUIRED = ["dgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72", "mi300x-platform", "l40s-pcie-8", "l4-pcie-8",
            "tpu-v5p-slice", "tpu-v6e-slice"]
SYSTEMS_ = sorted(system_catalog().values(), key=lambda s: s.id)


def test_catalog_has_every_required_system() -> None:
    assert set(REQUIRED) <= set(system_catalog())


@pytest.mark.parametrize("s", SYSTEMS_, ids=lambda s: s.id)
def test_every_system_loads_with_sources(s: System) -> None:
    assert len(s.sources["system"]) > 15
    assert len(s.sources["link.node"]) > 15 and "http" in s.sources["link.node"]
    if s.network_link is not None:
        assert len(s.sources["link.network"]) > 15
    assert get_machine(s.device.id) is s.device  # a catalog machine, shared with the machine catalog
    assert not s.node_link.measured


@pytest.mark.parametrize("s", SYSTEMS_, ids=lambda s: s.id)
def test_link_figures_are_in_range(s: System) -> None:
    node = s.node_link
    assert 20e9 <= node.bytes_per_s <= 2e12  # per direction: PCIe Gen4 x16 .. NVLink 5, never a GB/s-vs-Gb/s slip
    assert 0.5e-6 <= node.latency_s <= 200e-6  # α of a collective: microseconds, not seconds or nanoseconds
    assert s.devices_per_node >= 2 and s.max_nodes >= 1
    if s.network_link is not None:
        assert 5e9 <= s.network_link.bytes_per_s < node.bytes_per_s  # between nodes is slower than inside
        assert s.network_link.latency_s >= node.latency_s
        assert s.max_nodes > 1
    # the node link never exceeds the device's own [interconnect] figure halved (a bidirectional total)
    if s.device.interconnect_bytes_per_s:
        assert node.bytes_per_s == pytest.approx(s.device.interconnect_bytes_per_s / 2)


def test_per_direction_arithmetic() -> None:
    cat = system_catalog()
    dgx = cat["dgx-h100"]
    assert dgx.node_link.bytes_per_s == 900e9 / 2  # NVIDIA's 900 GB/s is both directions
    assert dgx.network_link is not None
    assert dgx.network_link.bytes_per_s == 400e9 / 8  # one 400 Gb/s NDR port per GPU, per direction: 50 GB/s
    assert cat["hgx-h200"].node_link.bytes_per_s == 900e9 / 2
    assert cat["hgx-b200"].node_link.bytes_per_s == 1.8e12 / 2  # NVLink 5: 1.8 TB/s total = 900 GB/s each way
    nvl72 = cat["gb200-nvl72"]
    assert nvl72.node_link.bytes_per_s == pytest.approx(130e12 / 72 / 2, rel=0.01)  # 130 TB/s over 72 GPUs
    assert nvl72.devices_per_node == 72 and nvl72.max_devices == 72 * 128
    mi = cat["mi300x-platform"]
    assert mi.node_link.bytes_per_s == 7 * 128e9 / 2  # 7 peer links of 128 GB/s bidirectional = 448 GB/s each way
    assert mi.node_link.topology is Topology.FULLY_CONNECTED
    assert cat["l40s-pcie-8"].node_link.bytes_per_s == 64e9 / 2  # PCIe Gen4 x16: 64 GB/s bidirectional
    assert cat["l4-pcie-8"].node_link.bytes_per_s == 64e9 / 2
    assert cat["tpu-v5p-slice"].node_link.bytes_per_s == 1200e9 / 2  # ICI 1200 GB/s bidirectional per chip
    v6e = cat["tpu-v6e-slice"]
    assert v6e.node_link.bytes_per_s == 800e9 / 2
    assert v6e.devices_per_node * v6e.node_link.bytes_per_s == pytest.approx(102.4e12)  # Google: all-reduce BW per pod


def test_latencies_are_the_written_out_models() -> None:
    cat = system_catalog()
    assert cat["dgx-h100"].node_link.latency_s == pytest.approx((6.6 + 2 * 7 * 0.6) * 1e-6)  # NCCL ring/LL, 8 GPUs
    assert cat["dgx-h100"].network_link.latency_s == pytest.approx((6.8 + 2 * (7 * 0.6 + 5.0)) * 1e-6)  # type: ignore[union-attr]
    assert cat["l40s-pcie-8"].node_link.latency_s == pytest.approx((6.6 + 2 * 7 * 1.0) * 1e-6)  # NCCL ring/LL on PCIe
    assert cat["mi300x-platform"].node_link.latency_s == pytest.approx((12.0 + 2 * 7 * 0.8) * 1e-6)  # RCCL ring/LL
    assert cat["gb200-nvl72"].network_link.latency_s == pytest.approx((25 + 2 * 20.9) * 1e-6)  # type: ignore[union-attr]


def test_aliases_and_names() -> None:
    assert get_system("hgx-h100").id == "dgx-h100"
    assert get_system("DGX_H100").id == "dgx-h100"
    assert get_system("nvl72").id == "gb200-nvl72"
    assert get_system("dgx-b200").id == "hgx-b200"  # a system name wins over the b200's machine alias


def test_unknown_system_names_close_matches() -> None:
    with pytest.raises(RooflineError, match=r"unknown system 'dgx-h10'; did you mean .*dgx-h100"):
        get_system("dgx-h10")


# --- a bare device as a system --------------------------------------------------------------------

def test_bare_device_is_one_node() -> None:
    s = get_system("h100", devices=4)
    assert s.devices_per_node == 4 and s.max_nodes == 1 and s.max_devices == 4
    assert s.device.id == "h100-sxm" and s.id == "h100-sxm" and s.from_device
    assert not get_system("dgx-h100").from_device
    assert s.node_link.bytes_per_s == 900e9 / 2  # the H100's [interconnect] 900 GB/s is both directions
    assert s.node_link.latency_s == system_catalog()["dgx-h100"].node_link.latency_s  # borrowed, sourced
    assert s.network_link is None
    assert "bidirectional total" in s.node_link.note
    assert get_system("h100").devices_per_node == 8  # default
    assert get_system(get_machine("h100"), devices=2).devices_per_node == 2


def test_bare_device_without_a_catalog_system_gets_the_stated_default() -> None:
    s = get_system("a100", devices=8)
    assert s.node_link.bytes_per_s == 600e9 / 2
    assert s.node_link.latency_s == DEFAULT_LINK_LATENCY_S
    assert "typical" in s.node_link.note and "NCCL" in s.node_link.source


def test_bare_fully_connected_device_counts_its_peers() -> None:
    s = get_system("mi300x", devices=4)
    assert s.node_link.bytes_per_s == 3 * 64e9  # 3 of the 7 links of 64 GB/s each way in a node of 4
    assert s.link(2, spans_nodes=False)[1].bytes_per_s == 64e9


def test_device_without_interconnect_says_what_to_add() -> None:
    with pytest.raises(RooflineError, match=r"l40s has no device-to-device link.*\[interconnect\].*l40s-pcie-8"):
        get_system("l40s", devices=2)


def test_machine_file_as_a_system(tmp_path: Path) -> None:
    src = Path(get_machine("h100").path).read_text()
    path = tmp_path / "mine.toml"
    path.write_text(src)
    s = get_system(str(path), devices=2)
    assert s.devices_per_node == 2 and s.node_link.bytes_per_s == 450e9


# --- links and the device machine -----------------------------------------------------------------

def test_link_inside_a_node_and_across_nodes() -> None:
    dgx = get_system("dgx-h100")
    level, link = dgx.link(8, spans_nodes=False)
    assert level is Level.LINK and link.bytes_per_s == 450e9
    level, link = dgx.link(16, spans_nodes=True)
    assert level is Level.NETWORK and link.bytes_per_s == 50e9


def test_fully_connected_groups_see_their_peer_links() -> None:
    mi = get_system("mi300x-platform")
    assert mi.link(2, spans_nodes=False)[1].bytes_per_s == 64e9  # a pair has one link: 128 GB/s / 2
    assert mi.link(4, spans_nodes=False)[1].bytes_per_s == 3 * 64e9
    assert mi.link(8, spans_nodes=False)[1].bytes_per_s == 7 * 64e9
    assert get_system("dgx-h100").link(2, spans_nodes=False)[1].bytes_per_s == 450e9  # a switch: any pair, full


@pytest.mark.parametrize(("name", "group", "spans", "message"), [
    ("dgx-h100", 8 * 2048 + 1, True, r"group of 16385 devices is larger than dgx-h100 \(2048 nodes of 8"),
    ("mi300x-platform", 9, False, r"larger than mi300x-platform \(one node of 8 devices\)"),
    ("mi300x-platform", 4, True, r"cannot span nodes on mi300x-platform"),
    ("dgx-h100", 16, False, r"does not fit in one node of dgx-h100"),
    ("dgx-h100", 0, False, r"positive integer"),
])
def test_bad_groups(name: str, group: int, spans: bool, message: str) -> None:
    with pytest.raises(RooflineError, match=message):
        get_system(name).link(group, spans_nodes=spans)


def test_spanning_without_a_network_names_what_to_add() -> None:
    dgx = get_system("dgx-h100")
    bare = System(id="two-boxes", name="two boxes", device=dgx.device, devices_per_node=8, max_nodes=2,
                  node_link=dgx.node_link)
    with pytest.raises(RooflineError, match=r"two-boxes has no network link.*\[link.network\]"):
        bare.link(16, spans_nodes=True)


def test_more_devices_than_the_system_has() -> None:
    with pytest.raises(RooflineError, match=r"16 devices is more than mi300x-platform"):
        get_system("mi300x-platform", devices=16)
    assert get_system("dgx-h100", devices=64).id == "dgx-h100"


def test_device_machine_has_link_roofs() -> None:
    dgx = get_system("dgx-h100")
    m = dgx.device_machine()
    link, net = m.memory[Level.LINK], m.memory[Level.NETWORK]
    assert link.bytes_per_s == 450e9 and link.latency_s == pytest.approx(15e-6)
    assert net.bytes_per_s == 50e9 and net.latency_s == pytest.approx(25.2e-6)
    assert m.memory_bytes_per_s == 3.35e12 and m.id == "h100-sxm"  # the device's own roofs are untouched
    assert Level.LINK not in get_machine("h100").memory
    assert get_system("mi300x-platform").device_machine(group_size=2).memory[Level.LINK].bytes_per_s == 64e9
    assert Level.NETWORK not in get_system("l4-pcie-8").device_machine().memory


def test_a_collective_sits_under_the_link_roof() -> None:
    m = get_system("dgx-h100").device_machine()
    size = 64 * 8192 * 2  # one decode all-reduce of batch 64 x hidden 8192 in BF16: 1,048,576 B
    on_link = 2 * 7 / 8 * size  # ring all-reduce: each GPU sends 2(n-1)/n of the buffer
    p = place(Cost({Unit.VECTOR: 7 / 8 * size / 2}, {Level.LINK: on_link}), m, "bf16", name="all-reduce")
    assert p.bound is Level.LINK
    assert p.time_s == pytest.approx(15e-6 + on_link / 450e9)


# --- system files ---------------------------------------------------------------------------------

GOOD = """
id = "my-box"
name = "My box"
device = "h100"
devices_per_node = 4
max_nodes = 2
[link.node]
name = "NVLink"
bandwidth = "450 GB/s"
latency = "12 us"
topology = "switch"
[link.network]
bandwidth = "25 GB/s"
latency = "30 us"
"""


def test_user_system_file(tmp_path: Path) -> None:
    path = tmp_path / "box.toml"
    path.write_text(GOOD)
    s = get_system(str(path))
    assert s.id == "my-box" and s.max_devices == 8 and s.path == str(path)
    assert s.node_link.latency_s == pytest.approx(12e-6)
    assert s.network_link is not None and s.network_link.bytes_per_s == 25e9


def test_measured_link_section_round_trips(tmp_path: Path) -> None:
    """`roofline measure --collectives` writes a [link.node] with measured = true; it reads back as such."""
    (tmp_path / "dev.toml").write_text(Path(get_machine("h100").path).read_text())
    path = tmp_path / "measured.toml"
    path.write_text('id = "bench"\nname = "bench node"\nkind = "system"\ndevice = "dev.toml"\n'
                    "devices_per_node = 2\n[link.node]\nname = \"NVLink (measured)\"\nbandwidth = \"361 GB/s\"\n"
                    'latency = "9.5 us"\ntopology = "switch"\nsource = "roofline measure --collectives"\n'
                    "measured = true\n")
    s = load_system_file(path)
    assert s.node_link.measured and s.node_link.bytes_per_s == 361e9
    assert s.device.id == "h100-sxm"  # the device path resolved beside the system file
    assert "(measured)" in system_text(s)


@pytest.mark.parametrize(("text", "message"), [
    (GOOD + "colour = 'red'\n", r"unknown field\(s\) colour"),
    (GOOD.replace("devices_per_node = 4", 'devices_per_node = "4"'), r"devices_per_node must be an integer"),
    (GOOD.replace("devices_per_node = 4", "devices_per_node = 0"), r"devices_per_node must be positive"),
    (GOOD.replace("devices_per_node = 4\n", ""), r"missing 'devices_per_node'"),
    (GOOD.replace('bandwidth = "450 GB/s"', 'bandwidth = "0 GB/s"'), r"\[link.node\] bandwidth must be positive"),
    (GOOD.replace('bandwidth = "450 GB/s"', 'bandwidth = "450 TFLOP/s"'), r"is in FLOP/s, expected bytes/s"),
    (GOOD.replace('latency = "12 us"', 'latency = "-1 us"'), r"\[link.node\] latency must be positive"),
    (GOOD.replace('latency = "12 us"\n', ""), r"\[link.node\] needs a latency"),
    (GOOD.replace('topology = "switch"', 'topology = "mesh"'), r"topology must be one of switch, fully_connected"),
    (GOOD.replace('name = "NVLink"', 'name = "NVLink"\nspeed = 3'), r"\[link.node\] has unknown field\(s\) speed"),
    (GOOD.replace("[link.network]", "[link.rack]"), r"unknown link section\(s\) \[link.rack\]"),
    (GOOD.replace("[link.node]", "[link.nodes]"), r"missing \[link.node\]"),
    (GOOD.split("[link.network]")[0], r"max_nodes = 2 needs a \[link.network\]"),
    (GOOD.replace('device = "h100"', 'device = "h10"'), r"device: unknown machine 'h10'; did you mean"),
    (GOOD.replace('device = "h100"', "device = 100"), r"missing 'device'"),
    (GOOD.replace('name = "My box"', 'name = "My box"\nkind = "gpu"'), r'kind must be "system"'),
    (GOOD.replace('topology = "switch"', 'topology = "switch"\nmeasured = "yes"'), r"measured must be true or false"),
    (GOOD.replace("max_nodes = 2", "max_nodes = 2\naliases = 'box'"), r"aliases must be a list of strings"),
    ("id = 'x'\nname = \n", r"is not valid TOML"),
])
def test_malformed_system_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(RooflineError, match=message) as info:
        load_system_file(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)  # one line, naming the file


def test_catalog_files_must_cite_sources(tmp_path: Path) -> None:
    path = tmp_path / "unsourced.toml"
    path.write_text(GOOD)
    with pytest.raises(RooflineError, match=r"\[link.node\] has no source"):
        load_system_file(path, require_sources=True)
    path.write_text(GOOD.replace('topology = "switch"', 'topology = "switch"\nsource = "a datasheet, https://x"')
                    .replace('latency = "30 us"', 'latency = "30 us"\nsource = "a datasheet, https://y"'))
    with pytest.raises(RooflineError, match=r"no top-level source"):
        load_system_file(path, require_sources=True)


def test_missing_file() -> None:
    with pytest.raises(RooflineError, match=r"system file /nonexistent/box.toml does not exist"):
        get_system("/nonexistent/box.toml")


def test_systems_folder_holds_only_system_files() -> None:
    assert all(p.suffix == ".toml" for p in SYSTEMS.iterdir())


# --- output ---------------------------------------------------------------------------------------

def test_to_dict_is_json_in_base_units() -> None:
    d = json.loads(json.dumps(get_system("dgx-h100").to_dict()))
    assert d["name"] == "dgx-h100" and d["device"] == "h100-sxm" and d["max_devices"] == 8 * 2048
    assert d["links"]["node"]["bytes_per_s"] == 450e9
    assert d["links"]["node"]["latency_s"] == pytest.approx(15e-6)
    assert d["links"]["node"]["topology"] == "switch"
    assert d["links"]["network"]["bytes_per_s"] == 50e9
    assert get_system("mi300x-platform").to_dict()["links"]["network"] is None


def test_system_text_shows_every_link() -> None:
    text = system_text(get_system("dgx-h100"))
    for piece in ("NVIDIA DGX H100 (dgx-h100)", "h100-sxm", "devices per node", "2048", "450 GB/s", "15 µs",
                  "50 GB/s", "25.2 µs", "switch", "per direction"):
        assert piece in text, piece
    assert "none" in system_text(get_system("l4-pcie-8"))
    table = systems_text(system_catalog().values())
    assert all(s in table for s in REQUIRED)


def test_link_is_frozen() -> None:
    link = Link(name="x", bytes_per_s=1e9, latency_s=1e-6)
    with pytest.raises(AttributeError):
        link.bytes_per_s = 2e9  # type: ignore[misc]
