"""What every command shares: parameter types, JSON and warning output, the one fusion option.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from roofline.errors import RooflineError
from roofline.fileio import after_writes, check_outputs
from roofline.units import Kind, UnitError, parse_positive_int, parse_quantity

# how a size or token count may be written (units.COUNT_SUFFIXES), said once for every --help
COUNT_HELP = "Suffixes: k = 1000, Ki = 1024 (128k = 128,000; 128Ki = 131,072)."


# a library parameter an error names (roofline.errors.term) -> the flag that sets it, where not --name
FLAGS = {"utilization": "--memory-utilization", "itl_slo_s": "--itl-slo", "ttft_slo_s": "--ttft-slo",
         "latency_target_s": "--latency-target", "disaggregate_devices": "--disaggregate",
         "step_overhead_s": "--step-overhead", "overrides": "--set"}


def flag(name: str) -> str:
    """The command line's flag for a library parameter: FLAGS, else --name with '-' for '_'."""
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def _label(param: click.Parameter | None) -> str:
    """How an error names the parameter: M for an argument, --batch for an option."""
    if param is None:
        return "value"
    if param.param_type_name == "argument":
        return param.human_readable_name.upper()
    return param.opts[0]


class PositiveInt(click.ParamType):
    """A size or token count from 1 to 2**53: "8192", "128k" (128,000), "128Ki" (131,072); "-5", "0",
    "abc" and "1e999" fail with one line that names the argument and the range."""

    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        label = _label(param)
        try:
            return parse_positive_int(value, label)
        except UnitError as exc:
            self.fail(str(exc), param, ctx)


class Quantity(click.ParamType):
    """A positive quantity with its unit: "268 MB", "4.4e11", "440 GFLOP"; finite and at most 1e30 in
    base units (units.MAX_QUANTITY), else one line that says so."""

    def __init__(self, kind: Kind) -> None:
        self.kind: Kind = kind
        self.name = kind

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        label = _label(param)
        try:
            number = parse_quantity(value, self.kind)
        except UnitError as exc:
            self.fail(f"{label}: {exc}", param, ctx)
        if not number > 0:
            self.fail(f"{label} must be positive, got {value}", param, ctx)
        return number


class PositiveNumber(click.ParamType):
    """A plain number in (0, maximum]: "2.5"; "nan", "inf", "-1" and "1e999" fail with one line that
    names the option and the range (click's FLOAT takes "nan" and "inf")."""

    name = "X"

    def __init__(self, maximum: float) -> None:
        self.maximum = maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        label = _label(param)
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        if not 0 < number <= self.maximum:  # NaN fails this too
            shown = str(value) if len(str(value)) <= 40 else str(value)[:20] + "..."
            self.fail(f"{label} must be a positive number, at most {self.maximum:g}; got {shown}", param, ctx)
        return number


POS = PositiveInt()


class NonEmptyText(click.types.StringParamType):
    """A text option given an empty value ("" or spaces) is refused in one line: `--dtype ''` would
    otherwise read as "not given" and the default would run without a word. A file name says so."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            label = _label(param)
            if isinstance(param, click.Option) and param.metavar == "FILE":
                from roofline.fileio import target_of

                try:
                    target_of(value, label)  # the one message for an empty file name, with an example
                except RooflineError as exc:
                    self.fail(str(exc), param, ctx)
            self.fail(f"{label} is empty; give a value", param, ctx)
        return super().convert(value, param, ctx)


def refuse_empty_values(command: click.Command) -> None:
    """Every plain text option of `command` (and of its subcommands) refuses an empty value."""
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_flag and type(param.type) is click.types.StringParamType:
            param.type = NonEmptyText()
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            refuse_empty_values(sub)


def dump(obj: Any) -> None:
    """JSON on stdout (no NaN or infinity: those are written as null by the library)."""
    click.echo(json.dumps(obj, indent=2, allow_nan=False))


def show(value: Any, as_json: bool, explain: bool, derive: Callable[[Any], str], text: Callable[[Any], str]) -> None:
    """One result printed as the flags ask: its JSON (to_dict), its derivation (--explain) or its text."""
    if as_json:
        dump(value.to_dict())
    else:
        click.echo(derive(value) if explain else text(value))


def printable(text: str) -> str:
    """`text` with its control characters escaped: a newline in a file name keeps a message one line,
    and an escape sequence in one is shown, not run by the terminal."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def warn(text: str) -> None:
    click.echo(f"roofline: warning: {printable(text)}", err=True)


def wrote(path: object) -> None:
    """Say "wrote FILE" once the file is in place (a command's files are renamed together at its end)."""
    after_writes(lambda: click.echo(f"wrote {path}", err=True))


def one_of(as_json: bool, explain: bool) -> None:
    """--json and --explain each replace the table; given both, one would be dropped without a word."""
    if as_json and explain:
        raise RooflineError("--json and --explain each print the whole result; give one of them")


def outputs(reads: Sequence[tuple[str, str | None]] = (), **paths: str | None) -> None:
    """Check every output path before anything runs or is written: each can be written (its folder
    takes a new file; not a folder, a read-only file, a path under a file, an empty name), its name
    ends as its format does, no two name one file, and none is a file the command reads (`reads`:
    (the label an error names, e.g. TRACE or --machine; what was given) pairs; a preset name is no
    file and is skipped). Files are compared by device and inode. None: not given."""
    check_outputs({f"--{name.replace('_', '-')}": path for name, path in paths.items()}, reads)


def listed(label: str, text: str | None) -> list[tuple[str, str | None]]:
    """`reads` pairs for a comma-separated option (--machine h100,./m.toml): one per name."""
    return [] if text is None else [(label, part.strip()) for part in text.split(",")]


def check_script(path: str) -> None:
    """A SCRIPT that cannot be Python fails in one line before anything runs: a pipe or a device (never
    opened, so nothing waits on it), or a binary (Python source holds no NUL byte). A missing file is
    the runner's to name."""
    import os
    import stat

    try:
        st = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise RooflineError(f"{path} is not a regular file (a device, pipe or socket); give a Python script")
    with open(path, "rb") as handle:
        if b"\0" in handle.read(1 << 20):
            raise RooflineError(f"{path} is not a Python script (it holds NUL bytes: a binary file?)")


def check_roof(machine: str, dtype: str | None) -> None:
    """Look up --machine and --dtype before a script runs: a misspelt name fails in no time, not after
    the whole program has run."""
    from roofline.dtypes import get_dtype
    from roofline.hardware import get_machine

    get_machine(machine)
    if dtype is not None:
        get_dtype(dtype)


def fusion_option(fusion: str | None, old: str | None, old_to_new: dict[str, str], default: str,
                  old_flag: str) -> str:
    """`--fusion` is the one spelling of the fusion idea; an old flag still works and says what replaces it."""
    if old is not None:
        new = old_to_new[old]
        if fusion is not None and fusion != new:
            raise RooflineError(f"{old_flag} {old} contradicts --fusion {fusion}; give --fusion only")
        warn(f"{old_flag} {old} is now spelled --fusion {new}")
        return new
    return fusion or default


def fusion_help(choices: dict[str, str]) -> str:
    return "; ".join(f"{name}: {what}" for name, what in choices.items()) + "."


# the library's defaults, spelled here so that `roofline --help` need not load the models room;
# tests/test_cli_core.py holds them equal to roofline.models.DEFAULT_PLAN, PLANS and DEFAULT_UTILIZATION
DEFAULT_FUSION = "flash"
MODEL_FUSIONS = ("none", "flash", "fused")
DEFAULT_MEMORY_UTILIZATION = 0.9

# what each plan means, said once for every command's --help
PLAN_HELP = {
    "none": "every op its own kernel; attention writes its scores to memory (naive)",
    "flash": "attention one fused kernel, scores on chip (FlashAttention)",
    "fused": "flash, and norms into matmuls, activations and residual adds into epilogues",
    "traced": "the kernels as the program ran them",
}


@contextmanager
def progress(enabled: bool) -> Iterator[Callable[[str], None]]:
    """A spinner with the current step on stderr (only on a terminal: logs stay clean)."""
    if not enabled or not sys.stderr.isatty():
        yield lambda _text: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), BarColumn(), TimeElapsedColumn(), TextColumn("{task.description}"),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("starting", total=None)
        yield lambda text: bar.update(task, description=text)
