"""`roofline validate` and `roofline calibrate`: our floors and expected bands against measured kernels.

Both read aiconfigurator-core's measured tables (an optional extra); without it they say how to
install it, in one line, exit 2.
"""

from __future__ import annotations

import click

from roofline.cli.common import POS, dump, outputs, wrote

ENGINES = ("trtllm", "vllm", "sglang")
KINDS = ("gemm", "attention", "mla", "moe", "collective")


@click.command("validate")
@click.option("--machine", "-m", default=None, help="Catalog machine (default: every one the tables cover).")
@click.option("--engine", type=click.Choice(ENGINES), default=None, help="Engine (default: every one).")
@click.option("--kind", type=click.Choice(KINDS), default=None, help="Kind of kernel (default: every kind joined).")
@click.option("--max-rows", type=int, default=0, show_default=True,
              help="At most this many rows a table, at an even stride (0: every row).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the summary as CSV.")
@click.option("--png", default=None, metavar="FILE", help="Write measured against floor, by kind, log axes (PNG).")
@click.option("--html", default=None, metavar="FILE", help="The same chart, interactive (HTML).")
def validate(machine: str | None, engine: str | None, kind: str | None, max_rows: int, as_json: bool,
             as_csv: bool, png: str | None, html: str | None) -> None:
    """Measured kernels (aiconfigurator-core's tables) against our floor and expected band.

    Per GPU x engine x kind: rows, share of roof (floor / measured: p10, median, p90), the MAPE of the
    expected time and the share inside the band (all rows, and rows whose floor is at least 10 us),
    and every point faster than the floor, explained (its working set fits in L2: the benchmark
    reran one shape) or flagged as our error."""
    from roofline.calibration.tables import TABLES, Family, installed, systems, tables
    from roofline.calibration.validate import JOINERS, join_any, validate_tables
    from roofline.errors import RooflineError
    from roofline.expectation.shipped import shipped, shipped_files
    from roofline.hardware import get_machine

    if as_json and as_csv:
        raise RooflineError("--json and --csv each print the whole result; give one of them")
    if max_rows < 0:
        raise RooflineError(f"--max-rows must be 0 (every row) or more, got {max_rows}")
    if kind == "collective":  # NCCL and engines' all-reduce tables against roofline.parallel.algorithms
        from roofline.calibration.collective import validate_command

        if as_csv or png or html:
            raise RooflineError("--kind collective prints text or --json (no --csv, --png or --html yet)")
        click.echo(validate_command(machine, engine, as_json))
        return
    outputs([("--machine", machine)], png=png, html=html)
    source = installed()
    machine_id = get_machine(machine).id if machine else None
    names = systems(source, machine_id)
    if not names:
        from roofline.calibration.tables import SYSTEMS

        covered = sorted({SYSTEMS[s] for s in systems(source)})
        raise RooflineError(f"{source.label} has no tables for {machine_id}; it covers: {', '.join(covered)}")
    joined_kinds = [f for f in Family if f in TABLES and all(t in JOINERS for _, _, t in TABLES[f])]
    families = [Family(kind)] if kind else joined_kinds
    unread = [f for f in families if f not in joined_kinds]
    if unread:
        raise RooflineError(f"--kind {unread[0]}: its tables are not joined to our kernels yet; kinds read: "
                            f"{', '.join(joined_kinds)}")
    joined = []
    for system in names:
        for family in families:
            for table in tables(source, system, family, engine):
                joined.append(join_any(table.every(max_rows) if max_rows else table))
    if not any(len(jt.keep) for jt in joined):
        where = f" for {machine_id}" if machine_id else ""
        with_fits = ", ".join(sorted({m for m, _ in shipped_files()}))
        names_ = [f.value for f in families]
        kinds_ = names_[0] if len(names_) == 1 else f"{', '.join(names_[:-1])} or {names_[-1]}"
        raise RooflineError(f"{source.label} has no {kinds_} rows{where}"
                            f"{' with ' + engine if engine else ''}; machines with measured gemm and attention "
                            f"tables: {with_fits}")
    fits = {(m, e): shipped(m, e) for m, e in shipped_files()}
    groups = validate_tables(joined, fits)
    given = [("--machine", machine), ("--engine", engine), ("--kind", kind), ("--max-rows", max_rows or None)]
    command = " ".join(["roofline validate", *(f"{flag} {v}" for flag, v in given if v)])
    from roofline.fileio import atomic_write

    if png:
        from roofline.report.charts.validate import validate_png

        atomic_write(png, validate_png(groups), "--png")
        wrote(png)
    if html:
        from roofline.report.charts.validate import validate_html

        atomic_write(html, validate_html(groups), "--html")
        wrote(html)
    if as_json:
        dump({"source": source.label, "groups": [g.to_dict() for g in groups],
              "unexplained_faster_than_floor": sum(g.unexplained for g in groups)})
    elif as_csv:
        from roofline.report.text.validate import validate_csv

        click.echo(validate_csv(groups), nl=False)
    else:
        from roofline.report.text.validate import validate_text

        click.echo(validate_text(groups, source.label, command))


@click.command("calibrate")
@click.option("--from", "origin", type=click.Choice(["aiconfigurator"]), required=True,
              help="Where the measurements come from: aiconfigurator-core's tables.")
@click.option("--machine", "-m", required=True, help="Catalog machine the tables cover (h100, h200, b200, ...).")
@click.option("--engine", type=click.Choice(ENGINES), default=None,
              help="Engine (default: the one with the most rows).")
@click.option("--max-rows", type=POS, default=4000, show_default=True,
              help="At most this many rows of each kind, at an even stride through its rows.")
@click.option("--save", default=None, metavar="FILE", help="Write the fitted expected-time file (JSON).")
@click.option("--json", "as_json", is_flag=True, help="Print the fit as JSON.")
def calibrate(origin: str, machine: str, engine: str | None, max_rows: int, save: str | None, as_json: bool) -> None:
    """Fit the expected-time model, t = max(DRAM, rho x compute x waves)/e + t0 + the kind's terms (GEMM:
    the activation's quantize pass and the epilogue, the last tile's padding, a host floor per launch path,
    on Hopper block-scaled FP8 DeepGEMM's blocks and a cost per k-block; attention: matrix time (apart for
    prefill over a narrower K/V cache) and exp time, costs per tile pair, per head and per K/V head,
    prefill's K/V read and waves, decode's latency, streaming and query-tile roofs, short and long stream
    and MHA term), per kind on one GPU x engine's measured
    tables (MLA and MoE too, where they exist); the band is Wilks's tolerance interval of measured / t from
    constants fitted without each row (10 folds): half of new kernels at 99% confidence."""
    import json

    from roofline.calibration.calibrate import calibrate as fit
    from roofline.calibration.calibrate import engines_of
    from roofline.calibration.tables import installed, rows, systems
    from roofline.errors import RooflineError
    from roofline.hardware import get_machine

    del origin
    outputs([("--machine", machine)], save=save)
    source = installed()
    m = get_machine(machine).id
    names = systems(source, m)
    if not names:
        raise RooflineError(f"{source.label} has no tables for {m}")
    if engine is None:
        from roofline.calibration.tables import Family

        counts = {e: sum(1 for _ in rows(source, names[0], Family.GEMM, e)) for e in engines_of(source, names[0])}
        engine = max(counts, key=lambda e: counts[e])
    times = fit(source, m, engine, max_rows)
    text = json.dumps(times.to_dict(), indent=1) + "\n"
    if save:
        from roofline.fileio import atomic_write

        atomic_write(save, text, "--save")
        wrote(save)
    if as_json:
        click.echo(text, nl=False)
    else:
        click.echo(f"{m} {engine} {times.engine_version} ({source.label}):")
        for kind, f in times.fits.items():
            extra = "".join(f", {what} {v:.3g}" for what, v in (
                ("rho", f.compute_ratio if f.tile or f.compute_ratio != 1 else 0.0), ("c_in", f.per_input),
                ("c_out", f.per_output), ("a_mm", f.matrix_weight), ("a_exp", f.exp_weight),
                ("ns a tile", f.per_tile_s * 1e9), ("ns a head", f.per_head_s * 1e9),
                ("ns a K/V head", f.per_kv_head_s * 1e9), ("c_g", f.regroup_weight), ("c_1", f.single_group_weight),
                ("us a decode block", f.block_latency_s * 1e6), ("us a decode head", f.head_latency_s * 1e6),
                ("kappa", f.stream_blocks), ("c_kvr", f.kv_read_weight), ("c_L2", f.short_stream_weight),
                ("c_w", f.wave_weight), ("wave slots", f.wave_slots),
                ("us a decode query tile", f.query_tile_latency_s * 1e6), ("ns a k-block", f.k_step_s * 1e9),
                ("c_far", f.long_stream_weight)) if v)
            if f.narrow_kv_weights:  # prefill's a_mm by head width over a narrower K/V (Fit.narrow_kv_weights)
                extra += ", a_mm over a narrower K/V " + ", ".join(f"{d}: {w:.3g}" for d, w in f.narrow_kv_weights)
            click.echo(f"  {kind:<28} e = {f.efficiency:.3f}, t0 = {f.t0_s * 1e6:.1f} us{extra}, "
                       f"waves in {'DeepGEMM blocks' if f.deepgemm_blocks else _tile_words(f.tile)}, "
                       f"band x{f.low:.2f}-{f.high:.2f}, "
                       f"{f.rows} rows, MAPE {100 * (f.mape or 0):.1f}%")


def _tile_words(tile: tuple[int, int] | None) -> str:
    if tile is None:
        return "none"
    return f"{tile[0]}-query tiles" if tile[1] == 0 else f"{tile[0]}x{tile[1]} tiles"


COMMANDS = (validate, calibrate)
