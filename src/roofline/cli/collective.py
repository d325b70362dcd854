"""`roofline collective`: one collective's floor, expected band, busbw and algbw on a system, the
algorithm chosen (or asked for) and why (roofline.parallel.algorithms)."""

from __future__ import annotations

import click

from roofline.cli.common import POS, dump
from roofline.errors import RooflineError

KINDS = {"all-reduce": "all_reduce", "all-gather": "all_gather", "reduce-scatter": "reduce_scatter",
         "all-to-all": "all_to_all"}
ALGORITHMS = ("auto", "ring", "tree", "nvls", "one-shot", "two-shot")


@click.command("collective")
@click.argument("kind", metavar="KIND")
@click.argument("size", metavar="SIZE")
@click.option("--machine", "-m", default="hgx-h200", show_default=True, help="System (or a device: a node of 8).")
@click.option("--devices", type=POS, default=None, help="Devices in the group (default: one node's).")
@click.option("--algorithm", default="auto", show_default=True,
              help="auto (as engines choose) | ring | tree | nvls | one-shot | two-shot.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def collective(kind: str, size: str, machine: str, devices: int | None, algorithm: str, as_json: bool) -> None:
    """One collective (KIND: all-reduce, all-gather, reduce-scatter, all-to-all) of SIZE bytes (nccl-tests'
    size S: 16GiB, 32KiB, 1e6): floor, expected band, busbw and algbw, and the algorithm.

    \b
    Floor: α_floor + the algorithm's bytes per device / the link's bandwidth per direction
      ring, tree, two-shot 2(n−1)/n · S; NVLS (NVLink SHARP) S; one-shot (n−1) · S
    Expected: α + 2(n−1)/n · S / busbw fitted on aiconfigurator-core's NCCL and custom all-reduce tables.
      roofline collective all-reduce 16GiB --machine hgx-h200
      roofline collective all-reduce 32KiB --machine hgx-h200 --algorithm ring"""
    from roofline.parallel.algorithms import estimate
    from roofline.units import parse_quantity

    if kind not in KINDS:
        raise RooflineError(f"unknown collective {kind!r}; one of: {', '.join(KINDS)}")
    if algorithm not in ALGORITHMS:
        raise RooflineError(f"unknown --algorithm {algorithm!r}; one of: {', '.join(ALGORITHMS)}")
    if not size.strip():
        raise RooflineError("SIZE is empty; give the message size, like 16GiB or 32KiB (nccl-tests' S)")
    message = parse_quantity(size if any(c.isalpha() for c in size) else f"{size} B", "bytes")
    if message <= 0:
        raise RooflineError(f"SIZE must be positive, got {size}")
    e = estimate(KINDS[kind], message, machine, devices, algorithm)
    if as_json:
        dump(e.to_dict())
    else:
        from roofline.report.text.collective_floor import collective_text

        click.echo(collective_text(e))


COMMANDS = (collective,)
