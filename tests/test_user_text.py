"""What a user reads never calls the source article "the seed": no string in src/, no line of the README,
no --help text and no --explain output says it (identifiers such as torch's manual_seed pass)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import click
import pytest

from roofline.cli import LazyGroup, cli, main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


SEED = re.compile(r"seed", re.IGNORECASE)


def python_text_hits(source: str) -> list[str]:
    """The string literals (messages, --help docstrings, f-strings) of a Python source that say "seed".
    Code identifiers (torch's manual_seed, a `seed` parameter) are names, not text, and pass."""
    hits = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING and SEED.search(tok.string):
            hits.append(f"line {tok.start[0]}: {tok.string[:80]}")
        elif tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1) and SEED.search(tok.string):
            hits.append(f"line {tok.start[0]}: {tok.string[:80]}")
    return hits


def test_the_scanner_flags_text_and_passes_identifiers() -> None:
    assert python_text_hits('raise ValueError("as the seed says")\n') != []
    assert python_text_hits('def f():\n    """From the Seed article."""\n') != []
    assert python_text_hits('x = f"{n} per the seed"\n') != []
    assert python_text_hits("gen = torch.Generator().manual_seed(n)\ndef g(seed: int = 0): pass\n") == []


def test_no_user_facing_text_in_src_says_seed() -> None:
    hits = []
    for path in sorted((ROOT / "src" / "roofline").rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        if path.suffix == ".py":
            hits += [f"{path.relative_to(ROOT)} {h}" for h in python_text_hits(path.read_text())]
        elif path.suffix in (".toml", ".json", ".html", ".js", ".css", ".md", ".txt"):
            hits += [f"{path.relative_to(ROOT)}:{i}" for i, line in enumerate(path.read_text().splitlines(), 1)
                     if SEED.search(line)]
    assert hits == []


def test_readme_never_says_seed() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert [f"README.md:{i}: {line}" for i, line in enumerate(lines, 1) if SEED.search(line)] == []


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [path]
    commands = group.loaded() if isinstance(group, LazyGroup) else group.commands
    for name, command in commands.items():
        if isinstance(command, click.Group):
            out += _commands(command, (*path, name))
        else:
            out.append((*path, name))
    return out


def test_every_help_text_is_free_of_seed(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _commands(cli)
    assert ("models",) in commands and len(commands) >= 13  # the group and its 12 commands
    for path in commands:
        code, out, err = run(capsys, *path, "--help")
        assert code == 0 and out.startswith("Usage: roofline"), path
        assert not SEED.search(out + err), (path, [ln for ln in out.splitlines() if SEED.search(ln)])


@pytest.mark.parametrize("argv", [
    ("kernel", "matmul", "4096", "4096", "4096", "--explain"),
    ("kernel", "attention", "--seq", "8192", "--head-dim", "128", "--fusion", "none", "--explain"),
    ("model", "llama-3-70b", "--machine", "h100", "--tp", "8", "--batch", "64", "--context", "8192", "--explain"),
    ("serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output", "256",
     "--batch", "64", "--explain"),
])
def test_explain_outputs_are_free_of_seed(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 0 and len(out.splitlines()) > 20  # a real derivation was printed
    assert not SEED.search(out + err)
