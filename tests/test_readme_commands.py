"""Every command line README.md shows is run, in the README's order, in one temporary folder.

The folder starts with the files the README's commands name but do not make (tests/fixtures/readme/: a
tiny Llama config.json as ./my-model and ./llama, the scripts my_model.py and generate.py, and an ncu
CSV as kernels.csv); files that one command writes (my-cpu.toml, my-node.toml, run.json) are read by
the later ones, as a reader following the README would. Each command must exit 0 and write every file
it names as an output. What is not run, and why: `bash scripts/test.sh` (it is this suite), and a
command that needs a CUDA GPU (`measure --device cuda`; `import --ncu`, which joins ncu's rows to a CUDA
trace's kernels) runs only where there is one (the `gpu` marker). The first command's
`pip install -e . &&` is what scripts/test.sh has already done; the rest of that line is run.

Figures quoted in a command's comment (`# KV 320 KiB/token, limit 59.8 FLOP/B`) are checked against
what that command prints, in the unit it prints them, to the digits quoted (59.8 matches a printed
59.78); a clause that says "≈" quotes a formula's round figure (≈ d/2 = 64) and is not held to it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIXTURES = ROOT / "tests" / "fixtures"
NOT_RUN = {"bash scripts/test.sh": "it is the test suite itself"}
# measuring a GPU, and joining ncu rows to the GPU kernels of the CUDA trace the profile line records there
NEEDS_CUDA = ("--device cuda", "--ncu ")
OUTPUT_FLAGS = ("--csv", "--png", "--svg", "--html", "--save", "--save-trace", "--save-calibration", "--levels-png")
COMMENT = re.compile(r"\s#\s")  # a comment after a command: ' # ' (a '#' inside a word is no comment)
# a figure with its unit, as the comments quote them and the commands print them: 59.8 FLOP/B, 320 KiB,
# 72.9 GiB, 268 MB, 21%, 30 ms (a unit is not the start of a longer word: "ms" is not "msec")
FIGURE = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s?(FLOP/B|KiB|MiB|GiB|TiB|kB|MB|GB|TB|µs|ms|%)(?![A-Za-z])")
BATCH = re.compile(r"\bbatch (\d+)(?![\d…,.])")  # "batch 462 meets 30 ms"; not the range "batch 1…1024"


@dataclass(frozen=True)
class Command:
    line: int  # README.md line where it starts
    shell: str  # the command as bash runs it
    comment: str  # what the README says it prints, after '#'


def _commands() -> list[Command]:
    """`roofline ...` lines of the ```bash blocks and `$ roofline ...` lines of the ```console blocks,
    a trailing backslash joining the next line."""
    out: list[Command] = []
    lang, pending, start = None, "", 0
    for number, raw in enumerate(README.read_text().splitlines(), 1):
        if raw.startswith("```"):
            lang = raw[3:].strip() if lang is None else None
            continue
        if lang not in ("bash", "console"):
            continue
        text = raw.strip()
        if not pending:
            if lang == "console":
                if not text.startswith("$ "):
                    continue
                text = text[2:]
            start = number
        pending = f"{pending} {text}".strip() if pending else text
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        cut = COMMENT.search(pending)
        code, comment = (pending[:cut.start()], pending[cut.end():]) if cut else (pending, "")
        code = code.strip().removeprefix("pip install -e . && ")
        if code and code not in NOT_RUN:
            out.append(Command(start, code, comment.strip()))
        pending = ""
    return out


def _inline_commands() -> list[Command]:
    """Commands written inline in the prose (`roofline machine b200 --explain`): a verb and at least one more
    word, none of them a placeholder (FILE, SCRIPT, [ARGS]); a span may wrap over a line break."""
    text = README.read_text()
    out = []
    for span in re.finditer(r"`(roofline [^`]+)`", text):
        words = span.group(1).split()
        if len(words) >= 3 and not any(re.search(r"[A-Z]{2,}|\[|\.\.\.", w) for w in words[1:]):
            out.append(Command(text.count("\n", 0, span.start()) + 1, " ".join(words), ""))
    return out


def _python_blocks() -> list[tuple[int, str]]:
    """The README's ```python blocks, each with the line it starts on."""
    text = README.read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in re.finditer(r"```python\n(.*?)```", text, re.S)]


def _unique(commands: list[Command]) -> list[Command]:
    seen: set[str] = set()
    return [c for c in commands if not (c.shell in seen or seen.add(c.shell))]


COMMANDS = _unique(_commands() + _inline_commands())
# figures the prose quotes, each with the README command whose output holds them
PROSE = [("on 4, each would need 72.9 GiB of the 72 GiB usable",
          "roofline model llama-3-70b --machine h100 --tp 4 --batch 64 --context 8192 --json"),
         ("is under NVLS's floor of 787 GB/s busbw", "roofline collective all-reduce 16GiB --machine hgx-h200")]
PYTHON_BLOCKS = _python_blocks()


def _outputs(shell: str) -> list[str]:
    words = shlex.split(shell.replace("&&", " ").replace(">", " > "))
    named = [words[i + 1] for i, w in enumerate(words[:-1]) if w in OUTPUT_FLAGS or w == ">"]
    return [n for n in named if not n.startswith("-")]


def test_the_readme_shows_commands_of_every_section() -> None:
    # the extraction itself: the quick start, the kernel examples, models, splits, serving, measuring, profiles
    shown = " ".join(c.shell for c in COMMANDS)
    for verb in ("kernel", "machines", "model", "sweep", "compare", "plan", "serve", "measure", "bench", "trace",
                 "profile", "import", "diff", "train", "collective"):
        assert f"roofline {verb} " in shown, verb
    assert len(COMMANDS) >= 40


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("readme")
    shutil.copytree(FIXTURES / "readme", where, dirs_exist_ok=True)
    shutil.copy(FIXTURES / "ncu_raw_small.csv", where / "kernels.csv")
    return where


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # the `roofline` this interpreter installed
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "160"}


@pytest.mark.torch
@pytest.mark.parametrize(("line", "code"), PYTHON_BLOCKS, ids=[f"README.md:{n}" for n, _ in PYTHON_BLOCKS])
def test_readme_python_block_runs(line: int, code: str, folder: Path) -> None:
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"README.md:{line}: the python block failed:\n{done.stderr[-2000:]}"


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("command", [
    pytest.param(c, id=f"README.md:{c.line}", marks=[pytest.mark.gpu] if any(n in c.shell for n in NEEDS_CUDA)
                 else []) for c in COMMANDS])
def test_readme_command_exits_0_and_writes_its_files(command: Command, folder: Path) -> None:
    if any(n in command.shell for n in NEEDS_CUDA):
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA GPU")
    done = subprocess.run(["bash", "-c", f"set -eo pipefail; {command.shell}"], cwd=folder, env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"README.md:{command.line}: `{command.shell}` exited {done.returncode}:\n" \
                                 f"{done.stderr[-2000:]}"
    for name in _outputs(command.shell):
        assert (folder / name).is_file() and (folder / name).stat().st_size > 0, f"{name} was not written"
    printed = figures(done.stdout + done.stderr)
    for quoted in quoted_figures(command.comment):
        assert any(agrees(quoted, p) for p in printed), \
            f"README.md:{command.line} says {''.join(quoted)!r}; the command printed no such figure"


def figures(text: str) -> list[tuple[str, str]]:
    """(value, unit) of every figure in text, a batch size as (value, 'batch')."""
    return FIGURE.findall(text) + [(n, "batch") for n in BATCH.findall(text)]


def quoted_figures(comment: str) -> list[tuple[str, str]]:
    """The figures a comment holds a command to: those of its clauses (split at ',' and ';') without '≈'."""
    return [f for clause in re.split(r"[,;]\s", comment) if "≈" not in clause for f in figures(clause)]


@pytest.mark.parametrize(("phrase", "shell"), PROSE)
def test_figures_the_prose_quotes_are_what_the_command_prints(phrase: str, shell: str, folder: Path) -> None:
    assert phrase in " ".join(README.read_text().split()), "the README no longer says so: update PROSE"
    assert shell in {c.shell for c in COMMANDS}
    done = subprocess.run(["bash", "-c", shell], cwd=folder, env=_env(), capture_output=True, text=True, timeout=600)
    printed = figures(done.stdout + done.stderr)
    for quoted in figures(phrase):
        assert any(agrees(quoted, p) for p in printed), f"the README says {''.join(quoted)!r}; the command did not"


def agrees(quoted: tuple[str, str], printed: tuple[str, str]) -> bool:
    """Same unit, and the printed value rounds to the quoted one at the quoted digits: 59.78 is '59.8'."""
    (q, unit), (p, printed_unit) = quoted, printed
    if unit != printed_unit:
        return False
    decimals = len(q.partition(".")[2])
    return abs(float(p.replace(",", "")) - float(q.replace(",", ""))) <= 0.5 * 10.0**-decimals + 1e-12


def test_a_quoted_figure_agrees_to_its_digits() -> None:
    # 1.4999 FLOP/B printed is the README's 1.5; 80.1 µs its 80 µs; 59.78 its 59.8; 63.4 is not 64
    assert agrees(("1.5", "FLOP/B"), ("1.4999", "FLOP/B")) and agrees(("80", "µs"), ("80.1", "µs"))
    assert agrees(("59.8", "FLOP/B"), ("59.78", "FLOP/B")) and not agrees(("64", "FLOP/B"), ("63.4", "FLOP/B"))
    assert not agrees(("72.9", "GiB"), ("72.9", "GB")) and not agrees(("78.2", "GiB"), ("72.9", "GiB"))
    assert quoted_figures("naive: ≈ d/2 = 64 FLOP/B, 63.6 FLOP/B printed") == [("63.6", "FLOP/B")]
    assert FIGURE.findall("30 msec at 21%, 320 KiB/token") == [("21", "%"), ("320", "KiB")]
    assert figures("batch 462 meets 30 ms over batch 1…1024") == [("30", "ms"), ("462", "batch")]
