"""`roofline machines` and `roofline machine`: the catalogs (devices, and systems of devices joined by
links) and one machine's or system's ceilings with their sources.

A name is looked up as `--machine` looks it up (roofline.hardware.lookup): a system's id or alias
first, then a device's; a .toml path is a system file if it has devices_per_node or [link.*], else a
machine file. An unknown name is one line with the close matches from both catalogs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from roofline.cli.common import dump, echo, one_of, outputs, show, warn, wrote
from roofline.errors import RooflineError

if TYPE_CHECKING:
    from roofline.hardware import Machine, System

def lookup(name: str, devices_first: bool = False) -> Machine | System:
    """roofline.hardware.lookup, and the warning when a file's machine takes a catalog name."""
    from roofline.hardware import Machine, lookup
    from roofline.hardware.catalog import shadow_note

    found = lookup(name, devices_first)
    if note := shadow_note(found if isinstance(found, Machine) else found.device):
        warn(note)
    return found


def _systems(names: tuple[str, ...]) -> list[System]:
    """The named systems (a device name is one node of 8 of it, as --machine makes it), or the catalog."""
    from roofline.hardware import System, get_system, system_catalog

    if not names:
        return sorted(system_catalog().values(), key=lambda s: (s.device.vendor, s.device.year or 0, s.id))
    out: list[System] = []
    for n in names:
        found = lookup(n)
        out.append(found if isinstance(found, System) else get_system(found))
    return out


@click.command()
@click.argument("names", nargs=-1)
@click.option("--systems", "systems", is_flag=True,
              help="List systems instead: devices per node, nodes, and each link's bandwidth per direction and "
                   "latency.")
@click.option("--dtype", default=None, help="Dtype(s) of the roofs, comma-separated: bf16,fp8,fp4 (default: bf16).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: a list of machines (or of systems).")
@click.option("--png", default=None, metavar="FILE", help="Draw the listed machines' roofs on one chart (PNG).")
@click.option("--svg", default=None, metavar="FILE", help="The same chart as SVG.")
def machines(names: tuple[str, ...], systems: bool, dtype: str | None, as_json: bool, png: str | None,
             svg: str | None) -> None:
    """List the machine catalog (or only NAMES): dense peaks, DRAM bandwidth, ridge points.

    \b
    With --png/--svg, draw their roofs on one chart, one roof per machine and dtype:
      roofline machines a100 h100 b200 --png roofs.png             # the roof rose 7x, the ridge moved 2x
      roofline machines b200 --dtype bf16,fp8,fp4 --png b200.png    # each halving of precision doubles the ridge
    With --systems, list the systems (nodes of devices and the links between them):
      roofline machines --systems
    """
    from roofline.hardware import Machine, catalog

    if systems:
        if png or svg or dtype:
            raise RooflineError("--systems lists systems; --png, --svg and --dtype draw the roofs of devices "
                                "(name the devices: `roofline machines h100 b200 --png roofs.png`)")
        found = _systems(names)
        if as_json:
            dump([s.to_dict() for s in found])
            return
        from roofline.report.text.system import systems_text

        echo(systems_text(found))
        return
    if png is not None or svg is not None:  # before a machine file is read: an output that is one is refused
        outputs([("NAMES", n) for n in names], png=png, svg=svg)
    ms: list[Machine] = []
    for n in names:
        m = lookup(n, devices_first=True)
        if not isinstance(m, Machine):
            raise RooflineError(f"{n} is a system of {m.devices_per_node} × {m.device.id}: see `roofline machine "
                                f"{n}` or `roofline machines --systems`, or name its device ({m.device.id})")
        ms.append(m)
    if not names:
        ms = sorted(catalog().values(), key=lambda m: (m.vendor, m.year or 0, m.id))
    dtypes = [d.strip() for d in (dtype or "bf16").split(",") if d.strip()]
    if dtype is not None:  # `--dtype fp7` or `--dtype ,` never passes without a word
        from roofline.dtypes import get_dtype

        if not dtypes:
            raise RooflineError(f"--dtype {dtype!r} names no dtype; give one or more, comma-separated, e.g. bf16,fp8")
        for d in dtypes:
            get_dtype(d)
        if png is None and svg is None:
            raise RooflineError("--dtype picks the roofs --png/--svg draw; the table always shows the bf16, fp8 "
                                "and fp4 peaks (draw them: `roofline machines b200 --dtype bf16,fp8 --png roofs.png`)")
    if png is not None or svg is not None:  # an empty name too: outputs() refuses it in one line
        from roofline.report.outputs import write_roofs_chart

        if not names:
            raise RooflineError("name the machines to draw, e.g. `roofline machines a100 h100 b200 --png roofs.png`")
        roofs = [(m, d) for m in ms for d in dtypes]  # the machines themselves: a file's, not a catalog id's
        for m, d in roofs:
            m.peak_flop_per_s(d)  # a dtype the machine lacks fails here, with what it has
        title = "Roofs compared: " + ", ".join(f"{m.id} {d}" for m, d in roofs)
        for path in write_roofs_chart(roofs, png=png, svg=svg, title=title):
            wrote(path)
    if as_json:
        dump([m.to_dict() for m in ms])
        return
    from roofline.report.text.tables import machines_table

    echo(machines_table(ms))


@click.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--explain", is_flag=True,
              help="Derive each ridge point from its two ceilings; for a system, each link's figure per direction.")
def machine(name: str, as_json: bool, explain: bool) -> None:
    """Show one machine's or system's ceilings and where each figure comes from (NAME: id, alias or .toml path).

    \b
      roofline machine b200                 # a device: peaks, DRAM bandwidth, ridge points
      roofline machine dgx-h100             # a system: devices per node, nodes, links per direction
      roofline machine dgx-h100 --explain   # NVLink's 900 GB/s both ways = 450 GB/s per direction
    """
    one_of(as_json, explain)
    from roofline.hardware import Machine

    found = lookup(name)
    if not isinstance(found, Machine):
        from roofline.explain.placement import explain_system
        from roofline.report.text.system import system_text

        show(found, as_json, explain, explain_system, system_text)
        return
    m = found
    if as_json:
        dump(m.to_dict())
    elif explain:
        from roofline.explain import explain_machine
        from roofline.explain.chip import explain_chip

        echo("\n".join(t for t in (explain_machine(m), explain_chip(m)) if t))
    else:
        from roofline.report.text.tables import machine_text

        echo(machine_text(m))


COMMANDS = (machines, machine)
