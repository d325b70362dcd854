"""`roofline measure`, `roofline bench` and `roofline trace`: the measured side of the roofline.

Each command parses its options, calls roofline.measure or roofline.tracing, and prints through
roofline.report. numpy, torch and rich are imported inside the commands, so `roofline --help` stays
fast and the CLI works without torch (a command that needs it says what to install).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from roofline.cli.common import (
    PLAN_HELP,
    POS,
    Quantity,
    check_roof,
    check_script,
    dump,
    echo,
    fusion_option,
    outputs,
    progress,
)
from roofline.errors import RooflineError
from roofline.hardware.catalog import DEFAULT_MACHINE

BUFFER_BYTES = (2**20, 64 * 2**30)  # per array: measure_ceilings' least; STREAM's three arrays fit in 192 GiB


def _size(text: str | None) -> int | None:
    """--buffer-size, checked before anything is measured: from 1 MiB to 64 GiB per array."""
    if text is None:
        return None
    from roofline.units import UnitError, parse_quantity

    try:
        value = parse_quantity(text, "bytes")
    except UnitError as exc:
        raise RooflineError(f"--buffer-size: {exc}") from None
    if not BUFFER_BYTES[0] <= value <= BUFFER_BYTES[1]:
        raise RooflineError(f"--buffer-size {text!r} is out of range: give 1 MiB to 64 GiB per array, e.g. 256MiB")
    return int(value)


MEASURED_DIGITS = 4  # a measured figure is saved to 4 significant digits: its run-to-run noise is larger


def _write_machine(machine: Any, path: str, header: str) -> None:
    from roofline.fileio import atomic_write
    from roofline.hardware import machine_to_toml

    atomic_write(path, machine_to_toml(machine, header=header, digits=MEASURED_DIGITS))


def _print_measured(to_dict: Callable[[], dict[str, Any]], text: Callable[[], str], as_json: bool,
                    save: str | None) -> None:
    """A measurement printed: its JSON, with "saved" naming the file when --save wrote one, or its text
    (the report module imported only then)."""
    if as_json:
        d = to_dict()
        if save:
            d["saved"] = save
        dump(d)
    else:
        echo(text())


def _measure(device: str, quick: bool, as_json: bool, save: str | None, buffer_size: str | None,
             dtypes: Sequence[str], backends: Sequence[str], machine_id: str | None, show: bool) -> Any:
    from roofline.measure.ceilings import measure_ceilings
    from roofline.measure.runs import MeasureSettings

    outputs(save=save)  # a bad --save fails now, not after the measuring
    from roofline.dtypes import get_dtype

    for name in dtypes:  # and a misspelt --dtype
        get_dtype(name)
    plan = MeasureSettings(device=device, quick=quick, buffer_bytes=_size(buffer_size), dtypes=tuple(dtypes) or None,
                backends=tuple(backends) or None)
    with progress(show) as say:
        c = measure_ceilings(plan, say)
    machine = c.to_machine(machine_id)
    if save:
        _write_machine(machine, save, "written by `roofline measure`; use it anywhere with --machine " + save)

    def text() -> str:
        from roofline.report.text.ceilings import ceilings_text

        return ceilings_text(c)

    _print_measured(lambda: {**c.to_dict(), "machine": machine.id}, text, as_json, save)
    if save and not as_json:
        echo(f"saved the measured machine to {save} (use it with --machine {save})")
    return machine


def _placements_outputs(placements: Sequence[Any], machine: Any, dtype: Any, png: str | None, html: str | None,
                        title: str) -> None:
    if not (png or html):
        return
    from roofline.placement import GraphAnalysis
    from roofline.report.outputs import Scenario, write_model_outputs
    from roofline.vocab import Plan

    analysis = GraphAnalysis(tuple(placements), Plan.TRACED, machine, dtype)
    for path in write_model_outputs([Scenario(title, analysis)], png=png, html=html, title=title):
        click.echo(f"wrote {path}", err=True)  # stdout is the report's (--json: JSON and nothing else)


def _echo_script_traceback(exc: BaseException) -> None:
    """The traceback of an exception a traced script raised, without roofline's and runpy's frames."""
    import traceback
    from pathlib import Path

    ours = str(Path(__file__).resolve().parents[1])  # src/roofline
    te = traceback.TracebackException.from_exception(exc)
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if not str(Path(f.filename).resolve()).startswith(ours) and "runpy" not in f.filename])
    click.echo("".join(te.format()).rstrip("\n"), err=True)


@click.command()
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--quick", is_flag=True, help="Fewer repeats and smaller sizes: a few seconds on a CPU.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (memory_bytes_per_s, peak_flop_per_s, runs).")
@click.option("--save", default=None, metavar="FILE", help="Write the measured machine file (for --machine).")
@click.option("--buffer-size", default=None, metavar="SIZE",
              help="Bytes per streaming array, 1 MiB to 64 GiB, e.g. 256MiB (default: 4-8x the last-level cache).")
@click.option("--dtype", "dtypes", multiple=True, help="Measure only these matmul dtypes (repeatable).")
@click.option("--backend", "backends", multiple=True, type=click.Choice(["numpy", "torch"]),
              help="CPU: measure only with these libraries (default: numpy and torch where installed).")
@click.option("--id", "machine_id", default=None, help="Id of the saved machine (default: measured-<device name>).")
@click.option("--collectives", is_flag=True,
              help="Measure collectives instead (all-reduce, all-gather, reduce-scatter, all-to-all, send/recv) "
                   "with torch.distributed over --devices processes on 127.0.0.1: gloo on cpu, NCCL on cuda; "
                   "--save writes a system file whose node link is the fitted all-reduce.")
@click.option("--devices", type=POS, default=None,
              help="With --collectives: processes (cpu, default 2) or GPUs (cuda, default every visible one).")
@click.option("--budget", "budget_s", type=Quantity("time_s"), default=None, metavar="SECONDS",
              help="With --collectives: the whole run's time limit, e.g. 60 or 90s (default: 30 s quick, "
                   "120 s full on cpu; 60 s and 180 s on cuda); what finished is reported.")
@click.option("--device-file", default=None, metavar="FILE",
              help="With --collectives --save: the machine file of the device (from `roofline measure --save`) "
                   "for a CPU or a GPU not in the catalog; without it, its ceilings are measured now (quick) and "
                   "saved beside the system file as NAME.device.toml.")
@click.option("--save-calibration", default=None, metavar="FILE",
              help="With --collectives --device cuda: write the collectives' share of the link (busbw / the "
                   "link's bandwidth) as a calibration file for `roofline serve --calibration FILE`.")
def measure(device: str, quick: bool, as_json: bool, save: str | None, buffer_size: str | None,
            dtypes: tuple[str, ...], backends: tuple[str, ...], machine_id: str | None, collectives: bool,
            devices: int | None, budget_s: float | None, device_file: str | None,
            save_calibration: str | None) -> None:
    """Measure this machine's ceilings: streaming bandwidth and matmul FLOP/s per dtype.

    Inside the chip too: on a CPU, each cache level's bandwidth (L1, L2, L3) from a working-set ladder,
    16 KiB to 4x the last-level cache per thread (at most 64 MiB with --quick, 512 MiB without), its
    plateaus named by the caches' sizes (the Empirical Roofline Toolkit's and CARM's method); on CUDA
    with Triton, the L2 and L1/shared-memory bandwidths and the exponential units' rate. --save
    writes them as memory levels of the machine file.

    With --collectives, measure the link between devices instead: each collective over a ladder of
    sizes (time, algbw, busbw as nccl-tests defines them) and its fitted latency (alpha) and
    bandwidth (beta).

    \b
    Examples:
      roofline measure --quick
      roofline measure --save my-cpu.toml && roofline kernel matmul 4096 4096 4096 --machine my-cpu.toml
      roofline measure --device cuda --json
      roofline measure --collectives --devices 2 --quick
      roofline measure --collectives --device cuda --save my-node.toml
    """
    if collectives:
        given = [flag for flag, value in (("--buffer-size", buffer_size), ("--dtype", dtypes),
                                          ("--backend", backends)) if value]
        if given:
            raise RooflineError(f"{', '.join(given)} measure ceilings, not --collectives; leave them out")
        _measure_collectives(device, devices, quick, budget_s, as_json, save, machine_id, device_file,
                             show=not as_json, save_calibration=save_calibration)
        return
    for flag, value in (("--devices", devices), ("--budget", budget_s), ("--device-file", device_file),
                        ("--save-calibration", save_calibration)):
        if value is not None:
            raise RooflineError(f"{flag} applies to --collectives only")
    _measure(device, quick, as_json, save, buffer_size, dtypes, backends, machine_id, show=True)


def _device_beside(device: str, path: Path, machine_id: str | None) -> str:
    """Measure this device's ceilings quickly, save them at `path`, and return the name a system file
    beside it uses for them."""
    from roofline.fileio import atomic_write
    from roofline.hardware import machine_to_toml
    from roofline.measure.ceilings import measure_ceilings
    from roofline.measure.runs import MeasureSettings

    settings = MeasureSettings(device=device, quick=True)
    machine = measure_ceilings(settings).to_machine(f"{machine_id}-device" if machine_id else None)
    atomic_write(path, machine_to_toml(machine, header="written by `roofline measure --collectives --save`: "
                                                          "the device the system file beside it names",
                                          digits=MEASURED_DIGITS))
    return path.name


def _measure_collectives(device: str, devices: int | None, quick: bool, budget_s: float | None, as_json: bool,
                         save: str | None, machine_id: str | None, device_file: str | None, show: bool,
                         save_calibration: str | None = None) -> Any:
    from roofline.errors import need_torch
    from roofline.measure.collectives_run import CollectivesSettings, measure_collectives

    if save_calibration and device == "cpu":
        raise RooflineError("--save-calibration needs the link's bandwidth, which a CPU run (gloo over "
                            "127.0.0.1) has none of; measure a GPU's link with --device cuda")
    need_torch("roofline measure --collectives")
    outputs([("--device-file", device_file)], save=save, save_calibration=save_calibration)  # before it starts
    beside = Path(save).with_name(Path(save).stem + ".device.toml") if save else None
    if beside is not None and not device_file:  # and the device's file, written beside the system file
        outputs(save=save, device_file=str(beside), save_calibration=save_calibration)
    if device_file:
        from roofline.hardware import get_machine

        get_machine(device_file)  # a file that does not load fails now, in one line
    plan = CollectivesSettings(device=device, devices=devices, quick=quick, budget_s=budget_s)
    with progress(show) as say:
        c = measure_collectives(plan, say)
        device_ref = device_file
        if save and beside is not None and c.catalog_id is None and device_file is None:
            # the system file must name a device --machine can load: measure this one's ceilings (quick)
            say("the device's ceilings, for the system file")
            device_ref = _device_beside(device, beside, machine_id)

    def text() -> str:
        from roofline.report.text.collectives import collectives_text

        return collectives_text(c)

    _print_measured(c.to_dict, text, as_json, save)
    if save:
        from roofline.fileio import atomic_write

        atomic_write(save, c.to_link_section(machine_id, device=device_ref))  # no all-reduce fit: one line
        if not as_json:
            echo(f"saved the measured system to {save} (node link: the {c.link_fit.collective} fit)")
    if save_calibration:
        _save_calibration_of_collectives(c, save_calibration, as_json)
    return c


def _save_calibration_of_collectives(c: Any, path: str, as_json: bool) -> None:
    from roofline.fileio import atomic_write
    from roofline.measure.calibration import Calibration

    cal = Calibration.from_collectives(c, produced_by=f"roofline measure --collectives ({c.backend}, {c.ranks} "
                                                      f"ranks{', quick' if c.quick else ''})")
    if not cal.classes:  # nothing to write: say why, the run's results are printed above
        click.echo(f"roofline: warning: --save-calibration {path} not written: {'; '.join(cal.notes)}", err=True)
        return
    atomic_write(path, cal.to_json())
    if not as_json:
        echo(f"saved the calibration (communication) to {path} (use it with roofline serve --calibration "
                   f"{path})")

@click.command()
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--quick", is_flag=True, help="Smaller kernels and fewer repeats.")
@click.option("--dtype", default=None, help="Kernel dtype (default: fp32 on a CPU, bf16 on CUDA).")
@click.option("--machine", "-m", default=None,
              help="Roof to place the kernels under: a machine file or catalog id (default: measure it now).")
@click.option("--only", "only", multiple=True, metavar="WORD",
              help="Run only the cases whose name starts with WORD (matmul, add, rmsnorm, softmax, silu, mul, "
                   "attention); repeatable.")
@click.option("--repeats", type=click.IntRange(min=1), default=None, help="Timed samples per kernel.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the placements and the accuracy summary.")
@click.option("--png", default=None, metavar="FILE", help="Draw the measured points under the roof (PNG).")
@click.option("--html", default=None, metavar="FILE", help="The interactive chart (HTML).")
@click.option("--save-calibration", default=None, metavar="FILE",
              help="Write the measured shares of the roof (25th-75th percentile per bound class) as a "
                   "calibration file for `roofline serve --calibration FILE`.")
def bench(device: str, quick: bool, dtype: str | None, machine: str | None, only: tuple[str, ...],
          repeats: int | None, as_json: bool, png: str | None, html: str | None,
          save_calibration: str | None) -> None:
    """Run real kernels and place each measured point beside its prediction under the roof.

    \b
    Examples:
      roofline bench --quick
      roofline bench --machine my-cpu.toml --only matmul --only attention
      roofline bench --device cuda --png bench.png
      roofline bench --device cuda --save-calibration my-gpu.calibration.json
    """
    from roofline.dtypes import get_dtype
    from roofline.errors import need_torch
    from roofline.hardware import get_machine
    from roofline.measure.accuracy import Accuracy
    from roofline.measure.bench import bench_machine, check_request, run_bench
    from roofline.measure.ceilings import need_cuda
    from roofline.report.text.accuracy import accuracy_table
    from roofline.units import format_bytes_per_s, format_flop_per_s

    outputs([("--machine", machine)], save_calibration=save_calibration, png=png, html=html)  # before anything runs
    if device == "cuda":
        need_cuda("bench --device cuda")
    else:
        need_torch("roofline bench")
    dt = get_dtype(dtype or ("bf16" if device == "cuda" else "fp32"))
    check_request(dt, only)  # before the roof is measured: a bad --only or --dtype fails in no time
    with progress(not as_json) as say:
        if machine is None:
            roof, seconds = bench_machine(device, quick, dt.name, say)
            how = f"measured now in {seconds:.1f} s"
        else:
            roof = get_machine(machine)
            how = "measured" if roof.measured else "datasheet"
        results = run_bench(roof, device=device, dtype=dt, quick=quick, repeats=repeats, only=only, progress=say)
    placements = [r.placement for r in results]
    acc = Accuracy.of(placements)
    for p in acc.above_roof:
        click.echo(f"roofline: warning: {p.name} measured ABOVE its roof ({p.fraction_of_roof or 0:.0%}): "
                   "the model undercounts its work or the timing is wrong", err=True)
    title = f"bench on {roof.name} ({dt.name})"
    if save_calibration:
        from roofline.fileio import atomic_write
        from roofline.measure.calibration import Calibration

        roof_is = "measured now" if machine is None else f"{roof.id}, {'measured' if roof.measured else 'datasheet'}"
        produced = (f"roofline bench{' --quick' if quick else ''} ({device}, {dt.name}, roof {roof_is}"
                    f"{', only ' + ' '.join(only) if only else ''})")
        atomic_write(save_calibration, Calibration.from_placements(placements, machine=roof.id,
                                                                   produced_by=produced).to_json())
    if as_json:
        d = {"machine": {"id": roof.id, "name": roof.name, "measured": roof.measured,
                         "memory_bytes_per_s": roof.memory_bytes_per_s,
                         "peak_flop_per_s": dict(roof.matrix_flop_per_s)},
             "dtype": dt.name, "kernels": [r.to_dict() for r in results], "summary": acc.to_dict()}
        if save_calibration:
            d["saved_calibration"] = save_calibration
        dump(d)
    else:
        echo(f"roof ({how}): {format_bytes_per_s(roof.memory_bytes_per_s, 4)}, "
                   f"{dt.peak_key} {format_flop_per_s(roof.peak_flop_per_s(dt), 4)}")
        echo(accuracy_table(placements, title=title))
        echo("\n".join(acc.lines()))
        if save_calibration:
            echo(f"saved the calibration to {save_calibration} (use it with roofline serve --calibration "
                       f"{save_calibration})")
    _placements_outputs(placements, roof, dt, png, html, title)

@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("script", type=click.Path(dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--machine", "-m", default=DEFAULT_MACHINE, show_default=True, help="Machine id, alias or machine file.")
@click.option("--dtype", default=None,
              help="Put every matmul on this dtype's roof (default: each on its own operands' dtype; fp32 "
                   "without a matrix peak on the FP32 cores).")
@click.option("--fusion", type=click.Choice(["traced", "none"]), default=None,
              help=f"traced (default): {PLAN_HELP['traced']}; none: {PLAN_HELP['none']}.")
@click.option("--plan", "old_plan", type=click.Choice(["traced", "none"]), default=None, hidden=True,
              help="Old spelling of --fusion.")
@click.option("--time", "time_ops", is_flag=True, help="Time every op (synchronizing around each).")
@click.option("--autograd", is_flag=True,
              help="Trace with autograd on (decomposed ops, backward if the script runs it) instead of "
                   "inference mode.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: the analysis, FLOPs by kind, unknown ops (the script's own output goes to stderr).")
@click.option("--png", default=None, metavar="FILE", help="Roofline chart of the traced kernels (PNG).")
@click.option("--html", default=None, metavar="FILE", help="The interactive chart (HTML).")
def trace(script: str, args: tuple[str, ...], machine: str, dtype: str | None, fusion: str | None,
          old_plan: str | None, time_ops: bool, autograd: bool, as_json: bool, png: str | None,
          html: str | None) -> None:
    """Run a PyTorch SCRIPT (with ARGS) under the tracer and place every op it ran on a machine.

    Options go before SCRIPT; everything after it is the script's own arguments.

    \b
    Examples:
      roofline trace --machine h100 my_model.py --batch 8
      roofline trace --autograd --json train_step.py
    """
    from roofline.errors import need_torch
    from roofline.graph import UNFUSED
    from roofline.tracing import trace_script

    need_torch("roofline trace")
    outputs([("SCRIPT", script), ("--machine", machine)], png=png, html=html)  # before the script runs
    check_roof(machine, dtype)
    check_script(script)
    plan = fusion_option(fusion, old_plan, {"traced": "traced", "none": "none"}, "traced", "--plan")
    try:
        import contextlib
        import sys

        with contextlib.redirect_stdout(sys.stderr):  # the script's prints: stdout is the report's
            t = trace_script(script, args, inference=not autograd, time_ops=time_ops)
    except RooflineError:
        raise
    except Exception as exc:  # the script's own error: its traceback, as python would show it, then one line
        _echo_script_traceback(exc)
        raise RooflineError(f"{script} raised {type(exc).__name__}: {exc}") from None
    for op, why in t.errors.items():
        click.echo(f"roofline: warning: {op} was not counted ({why})", err=True)
    if not t.ops:
        raise RooflineError(f"{script} ran no PyTorch ops")
    analysis = t.analyze(machine, dtype, UNFUSED if plan == "none" else t.plan)
    from roofline.report.text.trace import trace_dict, trace_text

    if as_json:
        dump(trace_dict(script, t, analysis))
    else:
        echo(trace_text(script, t, analysis, timed=time_ops, dtype_given=dtype is not None))
    _placements_outputs(analysis.placements, analysis.machine, analysis.dtype, png, html, f"{script} traced")


COMMANDS = (measure, bench, trace)
