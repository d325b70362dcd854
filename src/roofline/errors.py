"""The one exception family a user can cause. The CLI turns each into one line on stderr, exit 2.

A missing optional dependency is one of them: `need_torch` imports torch or says what to install.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

TORCH_HINT = "pip install -e '.[torch]' (it pins torch==2.13.0)"


TERM = "\x1f"  # brackets a parameter's name inside an error's text (term)


def term(name: str) -> str:
    """A library parameter named in an error's text ("tp", "itl_slo_s"). Read as is, the error says the
    library's name; the command line shows its own flag in its place (RooflineError.text)."""
    return f"{TERM}{name}{TERM}"


class _Terms:
    """`T.tp` is term("tp"): the parameters an error's text names, written as attributes."""

    def __getattr__(self, name: str) -> str:
        return term(name)


T = _Terms()


class RooflineError(ValueError):
    """Bad input a user can cause: a bad size, an unknown name, a malformed file."""

    @property
    def marked(self) -> str:
        """The text with its parameters still marked (to nest it in another error's text)."""
        return str(self.args[0]) if self.args else ""

    def text(self, name_of: Callable[[str], str] | None = None) -> str:
        """The text with each marked parameter named by `name_of` (the CLI: its flag), else by itself."""
        parts = self.marked.split(TERM)
        return "".join((name_of(p) if name_of else p) if i % 2 else p for i, p in enumerate(parts))

    def __str__(self) -> str:
        return self.text()


def printable(text: str) -> str:
    """`text` with every character that is not printable escaped as Python writes it (a newline as
    `\\n`, ESC as `\\x1b`, NUL as `\\x00`, the right-to-left override U+202E as `\\u202e`): a newline in a
    file name keeps a message one line, and an escape sequence in a trace's op name is shown, not run
    by the terminal."""
    if text.isprintable():  # nearly every line: checked at C speed, not a character at a time
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def printable_lines(text: str) -> str:
    """`printable` on each line of a report: its own line breaks kept, anything else escaped."""
    return "\n".join(printable(line) for line in text.split("\n"))


def shown(value: Any) -> str:
    """A value for an error line, at most 60 characters whatever it is (a 5,000-digit integer, a huge list)."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's str() digit limit
        return f"an integer of more than {sys.get_int_max_str_digits():,} digits"
    return text if len(text) <= 60 else text[:57] + "..."


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Names close to `word`, best first; substring matches count as close too."""
    pool = sorted(set(choices))
    lowered = word.lower()
    import difflib  # here, not at import: only a refused name needs it

    near = difflib.get_close_matches(lowered, pool, n=n, cutoff=0.5)
    for name in pool:
        if len(near) >= n:
            break
        if (lowered in name or name in lowered) and name not in near:
            near.append(name)
    return near


def unknown(what: str, word: str, choices: Iterable[str], hint: str = "") -> RooflineError:
    """'unknown machine 'h10'; did you mean h100, h200? (see `roofline machines`)'."""
    pool = list(choices)
    near = close_matches(word, pool) if len(word) <= 100 else []
    text = f"unknown {what} {shown(word)}"  # a pasted 100 KB name is never echoed whole
    if near:
        text += f"; did you mean {', '.join(near)}?"
    else:
        text += f"; known: {', '.join(sorted(pool)[:12])}{', ...' if len(pool) > 12 else ''}"
    if hint:
        text += f" ({hint})"
    return RooflineError(text)


def need_torch(what: str) -> Any:
    """Import torch or fail with one line that says what to install."""
    try:
        import torch
    except ImportError:
        raise RooflineError(f"{what} needs torch, which is not installed: {TORCH_HINT}") from None
    return torch
