"""The `roofline` command: one group, its commands registered here by name, one error policy.

Each command module (machines, kernel, model, measure) parses its options, calls the library and
prints through roofline.report; none does arithmetic. Heavy modules (rich, matplotlib, numpy, torch)
are imported inside the commands, so `roofline --help` and a kernel query start fast.
"""

from __future__ import annotations

import contextlib
import os
import sys

import click

from roofline.cli import collective, kernel, machines, measure, model, models, plan, profile, serve, validate
from roofline.cli.common import flag, printable, refuse_empty_values
from roofline.errors import RooflineError
from roofline.fileio import writing_together


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


for _module in (machines, kernel, model, models, plan, serve, collective, measure, profile, validate):
    for _command in _module.COMMANDS:
        cli.add_command(_command)
refuse_empty_values(cli)  # `--dtype ''` is one clear line, never the default run without a word


def _error(text: str) -> None:
    """The one error line (a newline in a file name is shown as \\n: still one line)."""
    click.echo(f"roofline: error: {printable(text)}", err=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error a user can cause ends in one line on stderr and exit code 2."""
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
