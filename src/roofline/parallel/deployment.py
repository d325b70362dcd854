"""One deployment: a machine (a device or a system) and a split, resolved once.

    d = deploy("dgx-h100", Split(tp=8))       # the H100 with its NVLink roof, one node of 8, a system
    d = deploy("h100", Split(tp=4, pp=4))     # a bare device: one node of max(16, 8) H100s
    d.machine, d.devices_per_node, d.system, d.max_devices, d.split

How a name and a split become a deployment (every room that needs "which device, how many, over which
link" takes this value; nothing else resolves them):

    a system (dgx-h100, gb200-nvl72, a system file)   that system; the split must fit its devices
    a bare device (h100, a machine file)              one node of max(split devices, NODE_DEVICES) of it
                                                      (an HGX board of 8, or more); with no split, the
                                                      single device without links (system None)
    a Machine object                                  that machine as given, no system and no links

The device machine is the system's device with its link and network roofs, the node link narrowed to
the group a collective spans (max(tp, ep) devices within a node). Its node link's start-up α is the
system's measured floor where the shipped collective tables cover it (`algorithms.system_collectives`:
the least start-up any measured collective on it leaves, 2.2 µs on HGX H200), so that no measured
collective is faster than a graph's collective; elsewhere the system file's α. A split search on a bare device looks
at most MOST_DEVICES devices far for a split that fits.
"""

from __future__ import annotations

from dataclasses import field, replace

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.hardware import Machine, System, get_machine, get_system
from roofline.hardware.system_file import DEFAULT_DEVICES, NoLinkError, bare_device
from roofline.parallel.algorithms import has_nvls, shipped_source, system_collectives
from roofline.parallel.split import Split
from roofline.vocab import Level

NODE_DEVICES = DEFAULT_DEVICES  # a bare device is one node of this many (an HGX board of 8)
MOST_DEVICES = 64  # the most devices a bare device's memory fit and split search look at


@frozen
class Deployment:
    """The device the kernels are placed on, the system it sits in, and the split over it."""

    machine: Machine  # the device, with the system's link and network roofs when there is a system
    split: Split
    system: System | None  # None: one bare device without links, or a Machine object as given
    devices_per_node: int  # a node's devices (NODE_DEVICES without a system)
    max_devices: int  # the most devices a split may use (MOST_DEVICES without a system)
    given: str | Machine | System | None = field(default=None, compare=False)  # the machine as deploy() took it

    def with_split(self, split: Split) -> Deployment:
        """The same machine, as given, under another split (a bare device made a node of its own size)."""
        return deploy(self.given if self.given is not None else (self.system or self.machine), split)

    @property
    def system_id(self) -> str:
        """The system's id ("" for one bare device or a Machine object)."""
        return self.system.id if self.system is not None else ""

    @property
    def graph_devices_per_node(self) -> int | None:
        """The devices per node a split's graph is built for: None for one device; 1 for a Machine
        object under a split (no system: every group across devices, no node link)."""
        if self.split.trivial:
            return None
        return self.system.devices_per_node if self.system is not None else 1

    @property
    def nvls(self) -> bool:
        """Whether this system's switch reduces (NVLink SHARP): its all-reduces may run NVLS."""
        return self.system is not None and not self.system.from_device and has_nvls(self.system.id)

    @property
    def bare(self) -> bool:
        """A bare device made a node (or used alone), not a system from the catalog or a file."""
        return self.system is None or self.system.from_device


def deploy(machine: str | Machine | System, split: Split | None = None) -> Deployment:
    """The deployment of `split` (default: one device) on `machine`, as the module docstring says."""
    sp = split or Split()
    if isinstance(machine, Machine):
        return Deployment(get_machine(machine), sp, None, NODE_DEVICES, MOST_DEVICES, machine)
    if sp.trivial and isinstance(machine, str) and (device := bare_device(machine)) is not None:
        # one catalog device: the node below would be built (its reference system read) to keep only the device
        return Deployment(device, sp, None, NODE_DEVICES, MOST_DEVICES, machine)
    try:
        system = get_system(machine)
    except NoLinkError as exc:  # a device with no [interconnect], as `roofline measure --save` writes a CPU
        if sp.trivial:  # one device needs no link
            return Deployment(exc.device, sp, None, NODE_DEVICES, MOST_DEVICES, machine)
        raise RooflineError(f"the split {sp} spreads the model over {sp.devices} devices, but {exc.device.id} has "
                            "no [interconnect] (no device-to-device link figure) to carry its collectives: add an "
                            "[interconnect] section with bandwidth = the vendor's bidirectional total (e.g. "
                            "\"900 GB/s\") to its machine file, or run on one device (no split)") from None
    if system.from_device:
        if sp.trivial:
            return Deployment(get_machine(system.device), sp, None, NODE_DEVICES, MOST_DEVICES, machine)
        system = get_system(system.device if isinstance(machine, System) else machine,
                            devices=max(sp.devices, NODE_DEVICES))
    if sp.devices > system.max_devices:
        raise RooflineError(f"the split {sp} needs {sp.devices} devices; {system.id} has {system.max_devices}")
    device = measured_alpha(system.device_machine(min(max(sp.tp, sp.ep), system.devices_per_node)), system)
    return Deployment(device, sp, system, system.devices_per_node, system.max_devices, machine)


def measured_alpha(device: Machine, system: System) -> Machine:
    """`device` with its node link's α the system's measured start-up floor (the module docstring), where
    the shipped collective tables have one below the system file's."""
    data = None if system.from_device else system_collectives(system.id)
    link = device.memory.get(Level.LINK)
    if data is None or link is None or not data.alpha_floor_s < link.latency_s:
        return device
    memory = dict(device.memory)
    memory[Level.LINK] = replace(link, latency_s=data.alpha_floor_s)
    notes = (*device.notes, f"node link α {data.alpha_floor_s * 1e6:.3g} µs: {data.alpha_floor_from} "
                            f"({shipped_source()}); the system file's {link.latency_s * 1e6:.3g} µs otherwise")
    sources = dict(device.sources)
    sources["memory.link"] = (f"{sources.get('memory.link', link.source)}; α {data.alpha_floor_s * 1e6:.3g} µs "
                              f"measured: {data.alpha_floor_from} ({shipped_source()})")
    return replace(device, memory=memory, notes=notes, sources=sources)


class UnevenDevices(RooflineError):
    """A device count that is not a whole number of nodes (the tensor and pipeline degrees must be given)."""

    def __init__(self, devices: int, node: int) -> None:
        self.devices, self.node = devices, node
        super().__init__(f"{devices} devices are not a whole number of {node}-device nodes; give the tensor and "
                         f"pipeline degrees")


def split_for_devices(devices: int, machine: str | Machine | System) -> Split:
    """`devices` in all as engines lay them out: tensor parallel within a node (min(devices, the node's
    devices)), pipeline stages across nodes; UnevenDevices when they are not a whole number of nodes."""
    per_node = get_system(machine, devices=devices).devices_per_node
    tp = min(devices, per_node)
    if devices % tp:
        raise UnevenDevices(devices, tp)
    return Split(tp=tp, pp=devices // tp)


__all__ = ["MOST_DEVICES", "NODE_DEVICES", "Deployment", "UnevenDevices", "deploy", "measured_alpha",
           "split_for_devices"]
