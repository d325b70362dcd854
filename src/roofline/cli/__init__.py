"""The `roofline` command: one group, its commands registered here by name, one error policy.

Each command module (machines, kernel, model, measure) parses its options, calls the library and
prints through roofline.report; none does arithmetic. Heavy modules (rich, matplotlib, numpy, torch)
are imported inside the commands, so `roofline --help` and a kernel query start fast.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import sys

import click

from roofline.cli.common import flag, printable, refuse_empty_values
from roofline.errors import RooflineError
from roofline.fileio import writing_together

# Each command: the module that defines it (roofline.cli.<module>) and its line in `roofline --help`
# (its short help). The group imports a command's module only when that command runs, so `roofline --help`
# and a kernel query import none of the others.
COMMANDS: dict[str, tuple[str, str]] = {
    "collective": ("collective", "One collective on a system: floor, band, bus bandwidth."),
    "bench": ("measure", "Run real kernels; place each measured point by its floor."),
    "calibrate": ("validate", "Fit the expected-time model on measured kernel tables."),
    "compare": ("model", "Models side by side: × machines × splits × dtypes."),
    "diff": ("profile", "A program's kernels against its analytic model."),
    "import": ("profile", "Place every kernel of a saved trace (Kineto JSON, ncu CSV)."),
    "kernel": ("kernel", "Place one kernel: intensity, ridge, floor, bound."),
    "machine": ("machines", "One machine's or system's ceilings, with sources."),
    "machines": ("machines", "The machine catalog: peaks, bandwidths, ridges."),
    "measure": ("measure", "Measure this machine's ceilings (bandwidth, matmul)."),
    "model": ("model", "Every kernel of one step of a transformer."),
    "models": ("models", "The model presets and their layer kinds."),
    "plan": ("plan", "Search the (tp, pp, ep, dp) splits of a model's step."),
    "profile": ("profile", "Run a PyTorch script under torch.profiler; place it."),
    "serve": ("serve", "Serving: TTFT, ITL, throughput, the batch that fits."),
    "sweep": ("model", "A model over batch × length × dtype × machine × split."),
    "trace": ("measure", "Run a PyTorch script under the tracer; place its ops."),
    "train": ("train", "A training step: kernels, memory, communication, MFU."),
    "validate": ("validate", "Measured kernels against our floor and expected band."),
}


def _commands_of(module: str) -> tuple[click.Command, ...]:
    """The commands roofline.cli.<module> defines, imported now (a module of this room: the layering
    test reads `roofline.cli.` in the name as an import of this room)."""
    return tuple(importlib.import_module(f"roofline.cli.{module}").COMMANDS)


class LazyGroup(click.Group):
    """A group whose commands are imported when first asked for (`COMMANDS`); its help lists them from
    the table without importing any."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            for command in _commands_of(COMMANDS[cmd_name][0]):
                refuse_empty_values(command)  # `--dtype ''` is one clear line, never the default run
                command.short_help = COMMANDS.get(command.name or "", ("", command.short_help))[1]
                self.add_command(command)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]  # a narrow terminal wraps them
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def loaded(self) -> dict[str, click.Command]:
        """Every command, each module imported (for tests and tools that walk them all)."""
        ctx = click.Context(self)
        return {name: command for name in self.list_commands(ctx) if (command := self.get_command(ctx, name))}


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="roofline")
def cli() -> None:
    """Roofline analysis: is a kernel waiting on arithmetic or on memory, and how fast can it go?

    \b
    Examples:
      roofline machines
      roofline kernel matmul 4096 4096 4096 --machine h100 --explain
      roofline kernel attention --seq 8192 --head-dim 128 --fusion none
      roofline model llama-3-70b --phase decode --batch 64 --context 8192
    """



def _error(text: str) -> None:
    """The one error line (a newline in a file name is shown as \\n: still one line)."""
    click.echo(f"roofline: error: {printable(text)}", err=True)


def _one_short_process() -> None:
    """The cyclic collector set for a process that runs one command and exits. Its default pass every 700
    new container objects walks the ~20,000 that the imports make and that live to the end, and at exit
    it walks them all once more, finding nothing a command leaves behind: 7% of one `roofline model`
    decode run's instructions (36 of 500 M, valgrind callgrind; bench/results/bench_startup.txt). A pass
    every 50,000 still bounds what unreachable cycles hold; `gc.freeze` at exit (atexit handlers run
    before the interpreter's last collection) leaves that last walk nothing to visit. A command's files
    are closed by `writing_together` before then, never by a collection."""
    gc.set_threshold(50_000)
    atexit.register(gc.freeze)


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error a user can cause ends in one line on stderr and exit code 2. Called
    without `argv` (the `roofline` script, `python -m roofline.cli`), it is the process's own command
    line, and the collector is set for a short process (`_one_short_process`); a caller passing `argv`
    (the tests, a tool running several commands) keeps its own settings."""
    if argv is None:
        _one_short_process()
    if sys.stdout is None:  # `roofline machines >&-`: the result would vanish without a word, exit 0
        click.echo("roofline: error: standard output is closed; send it to a file or /dev/null", err=True)
        return 2
    try:
        with writing_together():  # a command's files are renamed together when it ends without an error
            cli.main(args=argv, prog_name="roofline", standalone_mode=False)
    except click.MissingParameter as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        _error(f"{exc.format_message()}{hint}")
        return 2
    except click.BadParameter as exc:
        # our parameter types name the parameter themselves; click's "Invalid value for ..." repeats it
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        _error(f"{exc.message}{hint}")
        return 2
    except click.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            click.echo(exc.ctx.get_help())  # a bare group: show its help, as --help would
            return 0
        hint = ""
        if exc.ctx is not None:
            hint = f" (see `{exc.ctx.command_path} --help`)"
        _error(f"{exc.format_message()}{hint}")
        return 2
    except click.ClickException as exc:
        _error(exc.format_message())
        return exc.exit_code if exc.exit_code else 2
    except RooflineError as exc:
        _error(exc.text(flag))
        return 2
    except click.exceptions.Abort:
        click.echo("roofline: aborted", err=True)
        return 130
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except OSError as exc:  # standard output full or gone (`roofline machines > /dev/full`): one line
        real = sys.__stdout__
        if real is not None and sys.stdout is real:  # nothing left to flush into it at exit
            with contextlib.suppress(Exception):
                os.dup2(os.open(os.devnull, os.O_WRONLY), real.fileno())
        name = str(exc.filename or "standard output")
        shown = name if len(name) <= 60 else f"{name[:40]}... ({len(name):,} characters)"  # a pasted 100 KB name
        _error(f"{exc.strerror or exc}: {shown}")
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
