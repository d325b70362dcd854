"""The one exception family a user can cause. The CLI turns each into one line on stderr, exit 2.

Layering: imports nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RooflineError(ValueError):
    """Bad input a user can cause: a bad size, an unknown name, a malformed file."""


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Names close to `word`, best first; substring matches count as close too."""
    pool = sorted(set(choices))
    lowered = word.lower()
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
    near = close_matches(word, pool)
    text = f"unknown {what} {word!r}"
    if near:
        text += f"; did you mean {', '.join(near)}?"
    else:
        text += f"; known: {', '.join(sorted(pool)[:12])}{', ...' if len(pool) > 12 else ''}"
    if hint:
        text += f" ({hint})"
    return RooflineError(text)
