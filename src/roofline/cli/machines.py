"""`roofline machines` and `roofline machine`: the catalog and one machine's ceilings with their sources."""

from __future__ import annotations

import click

from roofline.cli.common import dump, one_of, outputs, wrote
from roofline.errors import RooflineError


@click.command()
@click.argument("names", nargs=-1)
@click.option("--dtype", default=None, help="Dtype(s) of the roofs, comma-separated: bf16,fp8,fp4 (default: bf16).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: a list of machines.")
@click.option("--png", default=None, metavar="FILE", help="Draw the listed machines' roofs on one chart (PNG).")
@click.option("--svg", default=None, metavar="FILE", help="The same chart as SVG.")
def machines(names: tuple[str, ...], dtype: str | None, as_json: bool, png: str | None, svg: str | None) -> None:
    """List the machine catalog (or only NAMES): dense peaks, DRAM bandwidth, ridge points.

    \b
    With --png/--svg, draw their roofs on one chart, one roof per machine and dtype:
      roofline machines a100 h100 b200 --png roofs.png             # the roof rose 7x, the ridge moved 2x
      roofline machines b200 --dtype bf16,fp8,fp4 --png b200.png    # each halving of precision doubles the ridge
    """
    from roofline.hardware import catalog, get_machine

    ms = [get_machine(n) for n in names] if names else sorted(catalog().values(),
                                                             key=lambda m: (m.vendor, m.year or 0, m.id))
    dtypes = [d.strip() for d in (dtype or "bf16").split(",") if d.strip()]
    if png or svg:
        from roofline.report.outputs import write_roofs_chart

        outputs(png=png, svg=svg)
        if not names:
            raise RooflineError("name the machines to draw, e.g. `roofline machines a100 h100 b200 --png roofs.png`")
        roofs = [(m.id, d) for m in ms for d in dtypes]
        for m, d in roofs:
            get_machine(m).peak_flop_per_s(d)  # a dtype the machine lacks fails here, with what it has
        title = "Roofs compared: " + ", ".join(f"{m} {d}" for m, d in roofs)
        for path in write_roofs_chart(roofs, png=png, svg=svg, title=title):
            wrote(path)
    if as_json:
        dump([m.to_dict() for m in ms])
        return
    from roofline.report.text import machines_table

    click.echo(machines_table(ms))


@click.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--explain", is_flag=True, help="Derive each ridge point from its two ceilings.")
def machine(name: str, as_json: bool, explain: bool) -> None:
    """Show one machine's ceilings and where each figure comes from (NAME: id, alias or .toml path)."""
    one_of(as_json, explain)
    from roofline.hardware import get_machine

    m = get_machine(name)
    if as_json:
        dump(m.to_dict())
    elif explain:
        from roofline.explain import explain_machine

        click.echo(explain_machine(m))
    else:
        from roofline.report.text import machine_text

        click.echo(machine_text(m))


COMMANDS = (machines, machine)
