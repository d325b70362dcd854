"""`roofline profile`, `roofline import` and `roofline diff`: the measured roofline of any program.

    roofline profile my_model.py --batch 8 --machine h100          # run it under torch.profiler + the tracer
    roofline import trace.json --machine h100 --png trace.png       # a saved Kineto trace, re-plotted
    roofline import trace.json --ncu kernels.csv --machine h100     # predicted and measured bytes side by side
    roofline diff trace.json --config ./my-model/config.json        # the program against its analytic model

Each command parses its options, calls roofline.tracing (and roofline.diff for the join with
roofline.models) and prints through roofline.report. torch is imported only by `profile`.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click

from roofline.cli.common import POS, NonNegativeInt, check_roof, check_script, dump, echo, outputs, warn, wrote
from roofline.errors import RooflineError
from roofline.hardware.catalog import DEFAULT_MACHINE

STAND_IN = ("CPU op times placed on {name}'s roof ({id}), a stand-in: no --machine was given and no CPU is in the "
            "catalog; measure this CPU's roof with `roofline measure --save cpu.toml` (about a minute), then give "
            "--machine cpu.toml")


def _program(path: str, ncu: str | None = None) -> Any:
    """A Profile from a trace file: Kineto JSON, or an ncu raw CSV; with `ncu`, its counters joined in."""
    from roofline.tracing.kineto import load_kineto
    from roofline.tracing.ncu import attach_ncu, load_ncu, ncu_profile

    if path.lower().endswith(".csv"):
        if ncu:
            raise RooflineError("--ncu joins a CSV to a Kineto trace; give the trace JSON as TRACE")
        return ncu_profile(load_ncu(path), path)
    profile = load_kineto(path)
    if ncu:
        if profile.device != "cuda":
            raise RooflineError(f"{path} has no GPU kernels to join Nsight Compute's rows to (a CPU trace)")
        attach_ncu(profile, load_ncu(ncu))
    return profile


def _report(profile: Any, machine: str | None, dtype: str | None, title: str, as_json: bool, csv_path: str | None,
            png: str | None, html: str | None, top: int, against: str | None, extra: dict[str, Any]) -> None:
    """`machine` None: the default machine; a CPU run placed on it is said to be a stand-in (one warning)."""
    from roofline.report.text.profile import profile_csv, profile_rows, profile_text

    analysis = profile.trace.analyze(machine or DEFAULT_MACHINE, dtype)
    stand_in = machine is None and profile.device == "cpu" and analysis.machine.kind != "cpu"
    rows = profile_rows(analysis, profile)
    diff = None
    if against:
        from roofline.diff import diff_program
        from roofline.models import load_config

        diff = diff_program(profile.trace, load_config(against))
    drawn = None
    if png or html:
        drawn = _drawable(analysis)
    if stand_in:  # once nothing can fail for want of input: an error stays the first line
        warn(STAND_IN.format(name=analysis.machine.name, id=analysis.machine.id))
    # everything is computed; now write (charts first, then the CSV: all or nothing on a bad path)
    if drawn is not None:
        from roofline.report.outputs import Scenario, write_model_outputs

        for path in write_model_outputs([Scenario(title, drawn)], png=png, html=html, title=title):
            wrote(path)
    if csv_path:
        from roofline.fileio import atomic_write

        wrote(atomic_write(csv_path, profile_csv(rows)))
    if as_json:
        d: dict[str, Any] = {"title": title, "device": profile.device, "shapes": profile.shapes,
                             "machine": analysis.machine.id, "machine_stand_in": stand_in,
                             "dtype": analysis.dtype.name, "kernels": rows,
                             "measured_time_s": profile.measured_time_s, "launch_gap_s": profile.gap_time_s,
                             "unknown_ops": dict(profile.trace.unknown), "not_counted": dict(profile.trace.errors),
                             "notes": list(dict.fromkeys(profile.notes)), **extra}
        if diff is not None:
            d["diff"] = diff.to_dict()
        dump(d)
        return
    echo(profile_text(rows, profile, analysis, title, top, stand_in=stand_in))
    for k, v in extra.items():
        if k == "flop_agreement" and v is not None:
            echo(f"FLOPs counted from the profile's shapes / the tracer's: {v:.4f}")
    if diff is not None:
        from roofline.report.text.profile import diff_text

        echo("")
        echo(diff_text(diff))


def _drawable(analysis: Any) -> Any:
    """The analysis to chart, every kernel in it: the chart draws those with FLOPs and bytes and lists the
    others (time-only kernels have no point), so that it counts the kernels the table counts. A trace
    with no kernel to draw at all is refused."""
    if not any(p.flop > 0 and p.bytes > 0 for p in analysis.placements):
        raise RooflineError("no kernel has both FLOPs and bytes to draw (a time-only trace); use --csv or --json")
    return analysis


_COMMON = [
    click.option("--machine", "-m", default=None,
                 help=f"Machine id, alias or machine file [default: {DEFAULT_MACHINE}; a CPU run placed on it is "
                      "told so: `roofline measure --save cpu.toml` writes this CPU's roof]."),
    click.option("--dtype", default=None, help="Compute dtype for the roof (default: the machine's)."),
    click.option("--against", default=None, metavar="CONFIG",
                 help="Also compare the kernels with the analytic model of this config.json or preset "
                      "(as `roofline diff`)."),
    click.option("--top", type=NonNegativeInt(), default=30, show_default=True,
                 help="Kernels in the table, slowest first (0: all)."),
    click.option("--json", "as_json", is_flag=True, help="Print JSON: every kernel, measured and predicted."),
    click.option("--csv", "csv_path", default=None, metavar="FILE", help="Write every kernel as CSV."),
    click.option("--png", default=None, metavar="FILE", help="Roofline chart of the measured kernels (PNG)."),
    click.option("--html", default=None, metavar="FILE", help="The interactive page (HTML)."),
]


def _common(f: Any) -> Any:
    for option in reversed(_COMMON):
        f = option(f)
    return f


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("script", type=click.Path(dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@_common
@click.option("--from-start", is_flag=True,
              help="Record the whole script (construction and weight initialisation too), not from its first "
                   "forward call.")
@click.option("--autograd", is_flag=True, help="Run with autograd on (training steps) instead of inference mode.")
@click.option("--save-trace", default=None, metavar="FILE",
              help="Also write the profiler's trace (Chrome/Kineto JSON) for `roofline import` to re-plot.")
def profile(script: str, args: tuple[str, ...], machine: str | None, dtype: str | None, against: str | None, top: int,
            as_json: bool, csv_path: str | None, png: str | None, html: str | None, from_start: bool,
            autograd: bool, save_trace: str | None) -> None:
    """Run a PyTorch SCRIPT (with ARGS) under torch.profiler and the tracer and place every kernel with
    its MEASURED time: achieved FLOP/s and bandwidth, share of its roof, and a verdict.

    Options go before SCRIPT; everything after it is the script's own arguments, and the script's own
    output goes to stderr (stdout is the report's). On a CPU the times are the ops' own; on CUDA the
    kernels', with the launch gaps between them.

    \b
    Examples:
      roofline profile --machine my-cpu.toml my_model.py --batch 8
      roofline profile --machine h100 --against ./config.json --save-trace run.json generate.py
    """
    from roofline.cli.measure import _echo_script_traceback
    from roofline.tracing.profile import profile_script

    outputs([("SCRIPT", script), ("--machine", machine), ("--against", against)],
            csv=csv_path, png=png, html=html, save_trace=save_trace)
    check_roof(machine or DEFAULT_MACHINE, dtype)  # the script, and the config compared against: before it runs
    check_script(script)
    if against:
        from roofline.models import load_config

        load_config(against)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the script's prints: stdout is the report's
            run = profile_script(script, args, from_start=from_start, inference=not autograd)
    except RooflineError:
        raise
    except Exception as exc:  # the script's own error: its traceback, as python would show it, then one line
        _echo_script_traceback(exc)
        raise RooflineError(f"{script} raised {type(exc).__name__}: {exc}") from None
    if run.traced is not None:
        for op, why in run.traced.errors.items():
            warn(f"{op} was not counted by the tracer ({why})")
    if save_trace:
        import json

        from roofline.fileio import atomic_write

        wrote(atomic_write(save_trace, json.dumps(run.chrome)))
    p = run.profile
    title = (f"{script} profiled on {p.device}: {len(p.trace.times_s)} kernels"
             f"{' from the first forward' if not from_start else ''}")
    _report(p, machine, dtype, title, as_json, csv_path, png, html, top, against,
            {"script": script, "flop_agreement": run.flop_agreement()})


@click.command("import")
@click.argument("trace_file", metavar="TRACE", type=click.Path(dir_okay=False))
@click.option("--ncu", default=None, metavar="CSV",
              help="Nsight Compute raw CSV of the same run (`ncu --csv --page raw`): measured bytes per level "
                   "and FLOPs beside the predicted ones.")
@_common
def import_command(trace_file: str, ncu: str | None, machine: str | None, dtype: str | None, against: str | None,
                   top: int,
                   as_json: bool, csv_path: str | None, png: str | None, html: str | None) -> None:
    """Place every kernel of a saved trace with its measured time, without running anything again.

    TRACE is a Chrome/Kineto JSON from torch.profiler (prof.export_chrome_trace; record_shapes=True
    gives the shapes the FLOPs and bytes are counted from) or an Nsight Compute raw CSV.

    \b
    Examples:
      roofline import run.json --machine h100 --png run.png --html run.html
      roofline import run.json --ncu kernels.csv --machine h100 --csv kernels-measured.csv
      roofline import kernels.csv --machine h100
    """
    outputs([("TRACE", trace_file), ("--ncu", ncu), ("--machine", machine), ("--against", against)],
            csv=csv_path, png=png, html=html)
    p = _program(trace_file, ncu)
    title = f"{Path(trace_file).name} ({'CUDA kernels' if p.device == 'cuda' else 'CPU ops'})"
    _report(p, machine, dtype, title, as_json, csv_path, png, html, top, against, {"trace": trace_file})


@click.command("diff")
@click.argument("program", metavar="TRACE_OR_SCRIPT", type=click.Path(dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--config", "config", required=True, metavar="CONFIG",
              help="The model's config.json (a file or its folder) or a preset name.")
@click.option("--phase", type=click.Choice(["prefill", "decode"]), default=None,
              help="Default: prefill when the program ran more than one token per sequence, else decode.")
@click.option("--batch", type=POS, default=None, help="Sequences (default: read from the program's embedding).")
@click.option("--seq", type=POS, default=None,
              help="Prompt length (prefill) or context (decode); default: read from the program.")
@click.option("--step", type=POS, default=1, show_default=True,
              help="Which forward step of the program to compare (a generate loop runs one per token: 1 is its "
                   "prefill, 2 its first decode step).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def diff(program: str, args: tuple[str, ...], config: str, phase: str | None, batch: int | None, seq: int | None,
         step: int, as_json: bool) -> None:
    """Compare a program's kernels with the analytic model of the same config, kind by kind, and name
    each difference (logits for every position, unfused q/k/v or gate/up GEMMs, a cat-grown KV cache,
    a masked window computing the full square, MLA re-expanded, the experts a step hit).

    TRACE_OR_SCRIPT is a saved Kineto trace (JSON) or a PyTorch script (.py, run under the tracer,
    with ARGS).

    \b
    Examples:
      roofline diff run.json --config ./llama/config.json
      roofline diff generate.py --config ./llama/config.json -- --tokens 1
    """
    from roofline.diff import diff_program
    from roofline.models import load_config

    cfg = load_config(config)
    if program.endswith(".py"):
        from roofline.cli.measure import _echo_script_traceback
        from roofline.errors import need_torch
        from roofline.tracing import trace_script

        need_torch("roofline diff SCRIPT")
        check_script(program)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # the script's prints: stdout is the report's
                t = trace_script(program, args)
        except RooflineError:
            raise
        except Exception as exc:
            _echo_script_traceback(exc)
            raise RooflineError(f"{program} raised {type(exc).__name__}: {exc}") from None
    else:
        if args:
            raise RooflineError(f"extra arguments after a trace file: {' '.join(args)}")
        t = _program(program).trace
    d = diff_program(t, cfg, phase, batch, seq, step=step)
    if as_json:
        dump(d.to_dict())
        return
    from roofline.report.text.profile import diff_text

    echo(diff_text(d))


COMMANDS = (profile, import_command, diff)
