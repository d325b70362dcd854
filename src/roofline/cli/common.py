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

from roofline.errors import RooflineError, printable, printable_lines
from roofline.fileio import after_writes, check_outputs
from roofline.units import Kind, UnitError, ascii_digits, parse_positive_int, parse_quantity

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
            number = parse_positive_int(value, label)
        except UnitError as exc:
            self.fail(str(exc), param, ctx)
        if label in LENGTHS and isinstance(value, str):
            note = decimal_length_note(value, number, label)
            if note:
                after_writes(lambda: warn(note))  # said once the command has ended well, never before an error
        return number


LENGTHS = ("--context", "--prompt", "--seq", "--kv-seq")  # token lengths, usually a power of two


def decimal_length_note(text: str, number: int, label: str) -> str:
    """"32k" is 32,000 (k = 1000, as Hugging Face's "128k" context is 128,000): said where a power of two
    is the likelier intent, a length whose k-count is a power of two (4k, 32k, 128k), with the spelling of
    the power of two beside it. Empty otherwise."""
    head = text.strip()
    if not head.endswith(("k", "K")) or number % 1000:
        return ""
    count = number // 1000
    if count < 2 or count & (count - 1):
        return ""
    return f"{label} {head} is {number:,} tokens (k = 1000); for {count * 1024:,} = {count} × 1024 write {count}Ki"


class NonNegativeInt(click.ParamType):
    """0 or a count up to 2**53, as PositiveInt reads it: `--top 0` (all) or `--top 30`; a 400-digit
    number is refused as too large, never taken as "all" without a word."""

    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if str(value).strip() == "0":
            return 0
        try:
            return parse_positive_int(value, _label(param))
        except UnitError as exc:
            self.fail(str(exc).replace("must be a positive integer", "must be 0 (all) or a positive integer"), param,
                      ctx)


class Number(click.types.FloatParamType):
    """click's FLOAT with the digits 0-9 only (units.ascii_digits): "٠.٨" is refused, not read as 0.8."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            try:
                ascii_digits(value, _label(param))
            except UnitError as exc:
                self.fail(str(exc), param, ctx)
        return super().convert(value, param, ctx)


NUMBER = Number()


class Share(click.ParamType):
    """A share in (0, 1] (a memory utilization: `model`, `serve`, `plan` and `train` take this one type),
    checked as the option is read, before any analysis runs or warns, with one message for every value
    outside it, a word or a number: "--memory-utilization must be in (0, 1], got 0.0", as the library
    says it; the digits 0-9 only (units.ascii_digits: "٠.٨" is refused, not read as 0.8)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        label = _label(param)
        if isinstance(value, str):
            try:
                ascii_digits(value, label)
            except UnitError as exc:
                self.fail(str(exc), param, ctx)
        try:
            number = float(value)
            shown = str(number)
        except (TypeError, ValueError, OverflowError):
            number = math.nan
            shown = str(value) if len(str(value)) <= 40 else str(value)[:20] + "..."
        if not 0 < number <= 1:  # NaN fails this too
            self.fail(f"{label} must be in (0, 1], got {shown}", param, ctx)
        return number


SHARE = Share()


class Quantity(click.ParamType):
    """A positive quantity with its unit: "268 MB", "4.4e11", "440 GFLOP"; finite and at most 1e30 in
    base units (units.MAX_QUANTITY), else one line that says so."""

    def __init__(self, kind: Kind, unit_required: str = "") -> None:
        self.kind: Kind = kind
        self.name = kind
        self.unit_required = unit_required  # the unit a bare number is suggested in ("ms"); "" takes base units

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        label = _label(param)
        try:
            number = parse_quantity(value, self.kind)
        except UnitError as exc:
            self.fail(f"{label}: {exc}", param, ctx)
        if not number > 0:
            self.fail(f"{label} must be positive, got {value}", param, ctx)
        if self.unit_required and isinstance(value, str) and not any(ch.isalpha() for ch in value.replace("e", "")):
            self.fail(f"{label} {value.strip()}: a time needs its unit, e.g. {value.strip()}{self.unit_required} "
                      f"(serving targets are usually milliseconds) or {value.strip()}s", param, ctx)
        return number


# a serving time target (--itl-slo, --ttft-slo, --latency-target): "30" alone is refused with "30ms" suggested,
# never taken as 30 seconds without a word
TIME_TARGET = Quantity("time_s", unit_required="ms")


class PositiveNumber(click.ParamType):
    """A plain number in (0, maximum]: "2.5"; "nan", "inf", "-1" and "1e999" fail with one line that
    names the option and the range (click's FLOAT takes "nan" and "inf")."""

    name = "X"

    def __init__(self, maximum: float) -> None:
        self.maximum = maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        label = _label(param)
        try:
            ascii_digits(str(value), label)
            number = float(value)
        except (TypeError, ValueError, OverflowError):  # UnitError is a ValueError: "٢" is not a number here
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
    click.echo(indented_json(obj))


def indented_json(obj: Any) -> str:
    """`json.dumps(obj, indent=2, allow_nan=False)`, byte for byte, in about half its time: given an indent
    the standard library encodes in Python through a generator a level (its C encoder takes none), which
    was a third of one `roofline train --json` run after start-up; here one recursive function appends to
    a list, strings escaped by the C function json itself uses. A NaN or infinity raises ValueError and an
    object json cannot encode TypeError, with json's messages; a structure that holds itself raises
    RecursionError (json: ValueError): the library's outputs are trees."""
    out: list[str] = []
    _json(obj, "\n", out)
    return "".join(out)


_ESCAPE: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _json_float(x: float) -> str:
    if x != x or x in (math.inf, -math.inf):
        raise ValueError(f"Out of range float values are not JSON compliant: {x!r}")
    return float.__repr__(x)


def _json(o: Any, nl: str, out: list[str]) -> None:
    """`o` as json's encoder writes it at the indent `nl` (a newline and the spaces of its level)."""
    if isinstance(o, str):
        out.append(_ESCAPE(o))
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif isinstance(o, int):
        out.append(int.__repr__(o))
    elif isinstance(o, float):
        out.append(_json_float(o))
    elif isinstance(o, (list, tuple)):
        if not o:
            out.append("[]")
            return
        inner = nl + "  "
        out.append("[" + inner)
        for i, v in enumerate(o):
            if i:
                out.append("," + inner)
            _json(v, inner, out)
        out.append(nl + "]")
    elif isinstance(o, dict):
        if not o:
            out.append("{}")
            return
        inner = nl + "  "
        out.append("{" + inner)
        first = True
        for k, v in o.items():
            if isinstance(k, str):
                key = k
            elif isinstance(k, float):
                key = _json_float(k)
            elif k is True or k is False or k is None:
                key = {True: "true", False: "false", None: "null"}[k]
            elif isinstance(k, int):
                key = int.__repr__(k)
            else:
                raise TypeError(f"keys must be str, int, float, bool or None, not {k.__class__.__name__}")
            if first:
                first = False
            else:
                out.append("," + inner)
            out.append(_ESCAPE(key) + ": ")
            _json(v, inner, out)
        out.append(nl + "}")
    else:
        raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def echo(text: str) -> None:
    """A report on stdout with every character that is not printable escaped, line by line (an ESC, OSC
    or NUL byte or U+202E in a trace's op, an ncu kernel or a machine's name is shown as `\\x1b`, never
    run by the terminal), as the error lines already are; the report's own line breaks stay."""
    click.echo(printable_lines(text))


def show(value: Any, as_json: bool, explain: bool, derive: Callable[[Any], str], text: Callable[[Any], str]) -> None:
    """One result printed as the flags ask: its JSON (to_dict), its derivation (--explain) or its text."""
    if as_json:
        dump(value.to_dict())
    else:
        echo(derive(value) if explain else text(value))


def warn(text: str) -> None:
    click.echo(f"roofline: warning: {printable(text)}", err=True)


def wrote(path: object) -> None:
    """Say "wrote FILE" once the file is in place (a command's files are renamed together at its end)."""
    after_writes(lambda: click.echo(f"wrote {printable(str(path))}", err=True))  # a newline in it: still one line


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
