"""Results shared within one search of splits: what every candidate layout of a `serve_search` would
otherwise work out again with the same inputs (the sample points of the decode step model, the lengths
its features vary with, the ring configuration its sample graphs are built on, a layout's weights per
device). Outside a search (`sharing()` not entered) nothing is kept: each call computes its own.

Each entry is the value of a function of its key alone, so sharing it is exact (the same floats);
a key that names an object by id() keeps that object in the entry, so the id is not reused while
the search runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

V = TypeVar("V")
_SCOPE: ContextVar[dict[Any, Any] | None] = ContextVar("roofline_shared_results", default=None)


@contextmanager
def sharing() -> Iterator[None]:
    """Share results inside the block (nested blocks share the outer one's); dropped at its end."""
    token = _SCOPE.set({}) if _SCOPE.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _SCOPE.reset(token)


def shared(key: Any, make: Callable[[], V], *keep: Any) -> V:
    """make(), once per key inside a sharing() block (every call outside one); `keep`: objects the
    key names by id(), held with the entry."""
    scope = _SCOPE.get()
    if scope is None:
        return make()
    hit = scope.get(key)
    if hit is None:
        hit = scope[key] = (make(), keep)
    return hit[0]


def first_time(key: Any, *keep: Any) -> bool:
    """True the first time `key` is asked of inside a sharing() block (every time outside one): for work a
    search does once for what its layouts share, not once a layout; `keep` as for shared()."""
    scope = _SCOPE.get()
    if scope is None:
        return True
    k = ("first time", key)
    if k in scope:
        return False
    scope[k] = (True, keep)
    return True


__all__ = ["first_time", "shared", "sharing"]
