"""Human-readable tables (rich) for systems: the device, how many per node and nodes, and each link roof.

Every link figure is per device and per direction; latency is α, the start-up time of one collective.
"""

from __future__ import annotations

from collections.abc import Iterable

from roofline.hardware.system import Link, System
from roofline.report.text.tables import render
from roofline.units import format_bytes_per_s, format_time


def _cells(*values: str) -> list[str]:
    """Table cells: sources cite TOML sections ("[link.node]"), which `render` keeps literal, never markup."""
    return list(values)


def _link_row(which: str, link: Link) -> list[str]:
    name = f"{which}: {link.name}" if link.name else which
    return _cells(name + (" (measured)" if link.measured else ""), format_bytes_per_s(link.bytes_per_s, 4),
                  format_time(link.latency_s, 3), str(link.topology), link.source)


def system_text(s: System) -> str:
    """The system as a table: device, devices per node, nodes, and each link with its bandwidth per
    direction, latency, topology and source; the notes under it."""
    from roofline.report.text.grid import Table

    head = Table(title=f"{s.name} ({s.id})", title_justify="left", show_header=False)
    head.add_column("what")
    head.add_column("value")
    head.add_row(*_cells("device", f"{s.device.name} ({s.device.id})"))
    head.add_row("devices per node", str(s.devices_per_node))
    head.add_row("max nodes", str(s.max_nodes))
    head.add_row("max devices", str(s.max_devices))
    if s.aliases:
        head.add_row(*_cells("aliases", ", ".join(s.aliases)))
    if s.sources.get("system"):
        head.add_row(*_cells("source", s.sources["system"]))

    links = Table(title="links (per device, per direction)", title_justify="left")
    for col, justify in (("link", "left"), ("bandwidth", "right"), ("latency (α)", "right"),
                         ("topology", "left"), ("source", "left")):
        links.add_column(col, justify=justify)  # type: ignore[arg-type]
    rows = [("node", s.node_link)] + ([("network", s.network_link)] if s.network_link is not None else [])
    for which, link in rows:
        links.add_row(*_link_row(which, link))
    if s.network_link is None:
        links.add_row("network", "none", "", "", "one node only" if s.max_nodes == 1 else "")

    text = render(head) + "\n" + render(links)
    if s.notes:
        text += "\nnotes:\n" + "\n".join(f"  - {n}" for n in s.notes)
    return text


def systems_text(systems: Iterable[System]) -> str:
    """One line per system: id, device, devices per node x nodes, node link and network link."""
    from roofline.report.text.grid import Table

    t = Table(title="systems (link figures per device, per direction)", title_justify="left")
    for col, justify in (("system", "left"), ("device", "left"), ("devices", "right"), ("node link", "left"),
                         ("network", "left")):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    for s in systems:
        node = s.node_link
        net = s.network_link
        t.add_row(*_cells(
            s.id, s.device.id, f"{s.devices_per_node} x {s.max_nodes}",
            f"{format_bytes_per_s(node.bytes_per_s, 4)}, {format_time(node.latency_s, 3)}, {node.topology}",
            "none" if net is None else f"{format_bytes_per_s(net.bytes_per_s, 4)}, {format_time(net.latency_s, 3)}",
        ))
    return render(t)


__all__ = ["system_text", "systems_text"]
