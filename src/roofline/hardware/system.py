"""Systems: a node or a cluster of devices, and the links between them (the roofs collectives sit under).

A `System` is a device (a `Machine`) times `devices_per_node`, times up to `max_nodes` nodes, with a
`Link` inside a node (NVLink through NVSwitch, Infinity Fabric, PCIe, TPU ICI) and optionally one
between nodes (InfiniBand, RoCE). Every link figure is PER DIRECTION and per device: what one device
can send while it receives as much. Vendors state NVLink, Infinity Fabric and ICI as bidirectional
totals (NVIDIA's 900 GB/s on H100 is 450 GB/s each way); network port rates (400 Gb/s NDR) are per
direction already. A link's latency is α, the start-up time of one collective over it (the α of the
alpha-beta model: time = α + bytes on the busiest link / bytes_per_s).

For a fully connected node (AMD's MI300X platform: one Infinity Fabric link per pair of GPUs), the
node link's bandwidth is the sum over the node's peer links, which is what a collective over the whole
node sees; a group of g devices sees g - 1 of those links (`System.link` scales it). For a torus the
figure is the chip's total over all its ports, which a collective over the whole slice can use at once
(Google: v6e all-reduce bandwidth per pod = 256 x 400 GB/s); a group along one axis uses fewer ports.

Reading system files, the catalog of systems and a bare device made a node: roofline.hardware.system_file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.hardware.machine import Machine, MemoryLevel
from roofline.units import format_bytes_per_s
from roofline.vocab import Level


class Topology(StrEnum):
    """How the devices of a link are wired: through a switch (any pair at the full figure), fully
    connected (one link per pair), a ring, a 2D or 3D torus (nearest neighbours), or PCIe."""

    SWITCH = "switch"
    FULLY_CONNECTED = "fully_connected"
    RING = "ring"
    TORUS_2D = "torus_2d"
    TORUS_3D = "torus_3d"
    PCIE = "pcie"

@frozen
class Link:
    """One link roof: bytes/s per device per direction, and α, the start-up time of a collective."""

    name: str
    bytes_per_s: float
    latency_s: float
    topology: Topology = Topology.SWITCH
    source: str = ""
    note: str = ""
    measured: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bytes_per_s": self.bytes_per_s, "latency_s": self.latency_s,
                "topology": str(self.topology), "source": self.source, "note": self.note,
                "measured": self.measured}


@frozen
class System:
    """A device times `devices_per_node`, up to `max_nodes` nodes, with the links between them."""

    id: str
    name: str
    device: Machine
    devices_per_node: int
    node_link: Link
    max_nodes: int = 1
    network_link: Link | None = None
    aliases: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)  # section -> citation
    notes: tuple[str, ...] = ()
    path: str = ""  # file it was read from (a bare device made a system: the device's file)
    from_device: bool = False  # True for a bare device made one node (`device_system`); its id is the device's

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def max_devices(self) -> int:
        return self.devices_per_node * self.max_nodes

    def link(self, group_size: int, spans_nodes: bool) -> tuple[Level, Link]:
        """The roof a collective over `group_size` devices sits under: Level.LINK inside a node,
        Level.NETWORK when the group spans nodes. On a fully connected node a group of g devices uses
        g - 1 of its device's peer links, so it sees (g - 1) / (devices_per_node - 1) of the node figure."""
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
            raise RooflineError(f"a collective's group size must be a positive integer, got {group_size!r}")
        if group_size > self.max_devices:
            raise RooflineError(
                f"a group of {group_size} devices is larger than {self.id} ({self._size_text()})")
        if spans_nodes:
            if self.max_nodes < 2:
                raise RooflineError(f"a group of {group_size} cannot span nodes on {self.id}: it has one node "
                                    f"of {self.devices_per_node}")
            if self.network_link is None:
                raise RooflineError(f"{self.id} has no network link between nodes: add a [link.network] "
                                    "section (bandwidth per device per direction, latency) to its system file")
            return Level.NETWORK, self.network_link
        if group_size > self.devices_per_node:
            raise RooflineError(f"a group of {group_size} devices does not fit in one node of {self.id} "
                                f"({self.devices_per_node} devices per node); it spans nodes")
        return Level.LINK, self._node_link_for(group_size)

    def _node_link_for(self, group_size: int) -> Link:
        link = self.node_link
        if link.topology is not Topology.FULLY_CONNECTED or self.devices_per_node < 2:
            return link
        peers = max(group_size - 1, 1)
        if peers == self.devices_per_node - 1:
            return link
        per_peer = link.bytes_per_s / (self.devices_per_node - 1)
        return replace(link, bytes_per_s=per_peer * peers,
                       note=(f"{peers} of the {self.devices_per_node - 1} peer links "
                             f"({format_bytes_per_s(per_peer)} each way each) for a group of {group_size}. "
                             + link.note).strip())

    def _size_text(self) -> str:
        if self.max_nodes == 1:
            return f"one node of {self.devices_per_node} devices"
        return f"{self.max_nodes} nodes of {self.devices_per_node} devices = {self.max_devices}"

    def device_machine(self, group_size: int | None = None) -> Machine:
        """The device with two more memory levels, Level.LINK and Level.NETWORK (bytes/s per direction,
        latency α), so that `roofline.placement.place` puts a collective's link bytes on those roofs.
        `group_size` narrows the node link to a group on a fully connected node (default: the whole node)."""
        node = self.node_link if group_size is None else self._node_link_for(min(group_size, self.devices_per_node))
        memory: dict[Level, MemoryLevel] = {
            lv: m for lv, m in self.device.memory.items() if lv not in (Level.LINK, Level.NETWORK)}
        memory[Level.LINK] = MemoryLevel(name=Level.LINK, bytes_per_s=node.bytes_per_s, technology=node.name,
                                         source=node.source, latency_s=node.latency_s)
        sources = dict(self.device.sources)
        sources["memory.link"] = node.source
        if self.network_link is not None:
            net = self.network_link
            memory[Level.NETWORK] = MemoryLevel(name=Level.NETWORK, bytes_per_s=net.bytes_per_s,
                                                technology=net.name, source=net.source, latency_s=net.latency_s)
            sources["memory.network"] = net.source
        notes = (*self.device.notes, f"links from system {self.id}: per device, per direction")
        return replace(self.device, memory=memory, sources=sources, notes=notes)

    def to_dict(self) -> dict[str, Any]:
        """The system as JSON, in base units."""
        return {
            "name": self.id,
            "full_name": self.name,
            "aliases": list(self.aliases),
            "kind": "system",
            "device": self.device.id,
            "devices_per_node": self.devices_per_node,
            "max_nodes": self.max_nodes,
            "max_devices": self.max_devices,
            "links": {"node": self.node_link.to_dict(),
                      "network": None if self.network_link is None else self.network_link.to_dict()},
            "sources": dict(self.sources),
            "notes": list(self.notes),
            "from_device": self.from_device,
        }


__all__ = ["Link", "System", "Topology"]
