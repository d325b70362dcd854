"""A Chrome trace's events read as a stream, with stated bounds on what is kept.

A Kineto trace (torch.profiler's `export_chrome_trace`) is one JSON object whose "traceEvents" list
holds every event; other keys (schemaVersion, deviceProperties, distributedInfo, traceName, ...)
hold metadata. `json.loads` of the whole file needs the file's text and every event as Python
objects at once: about 14 bytes of memory per byte of trace (a 20 MB trace of 30,000 operators took
276 MB here), so a 1 GiB trace would need over 13 GiB. This reader walks the file in 4 MiB pieces,
decodes one event at a time (`json.JSONDecoder.raw_decode`) and keeps only the events `keep`
accepts (the importer's categories: operators, kernels, copies, runtime calls), so a trace of
mostly Python-function or flow events streams through in bounded memory. It stops, with one line,
as soon as more than `max_kept` events are kept or the file is past `max_bytes`: the bounds are
stated up front (`MAX_TRACE_BYTES`, `MAX_TRACE_KERNELS` in roofline.tracing.kineto), not met as an
exhausted machine.

What it accepts is what `json.loads` accepts for such a file (an object at the top, any keys, any
values); what it refuses gets the same messages the whole-file reader gave: not valid JSON (with the
line and column), nested too deeply, not a text file.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError

CHUNK_BYTES = 1 << 22  # 4 MiB a read: large enough that the per-read cost vanishes, small beside any bound
_WS = " \t\n\r"
_NUMBER = "0123456789.eE+-"
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")  # between a list's items, or at its end


class _Source:
    """The file's text as a growing window: `text[pos:]` is what is left to decode of what was read."""

    def __init__(self, handle: Any, path: str, max_bytes: int) -> None:
        self.handle, self.path, self.max_bytes = handle, path, max_bytes
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.json = json.JSONDecoder()
        self.text, self.pos, self.eof = "", 0, False
        self.lines_before = 0  # newlines in the characters dropped from the window's front (for errors)
        self.column_before = 0  # characters dropped after the last of those newlines
        self.read_bytes = 0

    def more(self) -> bool:
        """Reads one more piece (dropping what was decoded); False at the end of the file."""
        if self.eof:
            return False
        data = self.handle.read(CHUNK_BYTES)
        self.read_bytes += len(data)
        if self.read_bytes > self.max_bytes:
            self.too_big()
        try:
            piece = self.utf8.decode(data, final=not data)
        except UnicodeDecodeError:
            raise RooflineError(f"{self.path} is not a text file; give a Chrome/Kineto trace JSON "
                                "(torch.profiler: prof.export_chrome_trace(PATH))") from None
        dropped = self.text[:self.pos]
        newlines = dropped.count("\n")
        self.lines_before += newlines
        self.column_before = (len(dropped) - dropped.rfind("\n") - 1) if newlines else self.column_before + len(dropped)
        self.text, self.pos = self.text[self.pos:] + piece, 0
        self.eof = not data
        return True

    def too_big(self, exact: bool = False) -> None:
        more = "" if exact else " or more"
        raise RooflineError(f"{self.path} is {self.read_bytes:,} bytes{more}; a trace is read up to "
                            f"{self.max_bytes:,} bytes: record fewer steps (torch.profiler.schedule(wait=1, warmup=1, "
                            "active=1)) or without with_stack")

    def skip_ws(self) -> str:
        """The next character that is not white space ("" at the end of the file), not consumed."""
        while True:
            text, n = self.text, len(self.text)
            i = self.pos
            while i < n and text[i] in _WS:
                i += 1
            self.pos = i
            if i < n:
                return text[i]
            if not self.more():
                return ""

    def expect(self, chars: str) -> str:
        c = self.skip_ws()
        if c == "" or c not in chars:
            self.fail("Expecting " + " or ".join(repr(ch) for ch in chars))
        self.pos += 1
        return c

    def value(self) -> Any:
        """The next JSON value; one followed by nothing but number characters up to the window's end is
        decoded again with more text (a number cut by a read: "12" of "1234", "0." of "0.5")."""
        self.skip_ws()
        while True:
            try:
                obj, end = self.json.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.more():
                    continue
                self.fail(exc.msg, exc.pos)
            except (RecursionError, ValueError):  # nested too deeply, or an int past Python's digit limit
                raise RooflineError(f"{self.path} is not a Chrome/Kineto trace: its JSON nests too deeply or holds "
                                    "too long a number") from None
            # what follows could still belong to a number ("0." of "0.5" decodes as 0): read on first. Only
            # a short tail is looked at (a copy of the window's rest per event would make the read quadratic)
            if not self.eof and len(self.text) - end < 64 and not self.text[end:].lstrip(_NUMBER) and self.more():
                continue
            self.pos = end
            return obj

    def items(self) -> Iterator[Any]:
        """The items of the list whose "[" was just consumed, to its "]" (consumed too). Items followed by
        their separator inside the window are decoded back to back by the C scanner (most of a trace);
        an item the window cuts, or anything unusual, goes through `value` and `expect`, which read on and
        name the error."""
        scan = self.json.scan_once  # type: ignore[attr-defined]  # the C scanner raw_decode wraps
        separator = _SEPARATOR.match
        if self.skip_ws() == "]":
            self.pos += 1
            return
        while True:
            text, pos, n = self.text, self.pos, len(self.text)
            while True:
                try:
                    obj, end = scan(text, pos)
                except (StopIteration, ValueError, RecursionError):
                    break
                m = separator(text, end)
                if m is None or m.end() >= n:
                    break
                yield obj
                pos = m.end()
                if m.group(1) == "]":
                    self.pos = pos
                    return
            self.pos = pos
            yield self.value()
            if self.expect(",]") == "]":
                return
            self.skip_ws()

    def fail(self, msg: str, at: int | None = None) -> None:
        at = self.pos if at is None else at
        line = self.lines_before + self.text.count("\n", 0, at) + 1
        start = self.text.rfind("\n", 0, at)
        column = at - start if start >= 0 else self.column_before + at + 1
        raise RooflineError(f"{self.path} is not valid JSON (line {line}, column {column}: {msg}); a truncated "
                            "trace? export it again with prof.export_chrome_trace(PATH)")


def _not_a_trace(path: str | Path) -> RooflineError:
    return RooflineError(f"{path} is JSON but not a Chrome/Kineto trace (no traceEvents list); export one with "
                         "torch.profiler: prof.export_chrome_trace(PATH)")


def stream_trace_events(path: str | Path, keep: Callable[[Any], bool], max_kept: int, max_bytes: int,
                        too_many: Callable[[int], str]) -> list[Any]:
    """The events of the file's "traceEvents" list that `keep` accepts, in file order; every other
    top-level value decoded and dropped. More than `max_kept` kept: RooflineError(too_many(max_kept))
    at once, without reading the rest."""
    p = Path(path)
    if not p.is_file():
        raise RooflineError(f"no trace file at {path}")
    kept: list[Any] = []
    found = False
    with p.open("rb") as handle:
        src = _Source(handle, str(path), max_bytes)
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:  # refused before a byte is read
            src.read_bytes = size
            src.too_big(exact=True)
        if src.skip_ws() != "{":
            if src.skip_ws() == "":
                src.fail("Expecting value")
            src.value()  # valid JSON (a list, a number) or "not valid JSON" with its line
            raise _not_a_trace(path)
        src.pos += 1
        if src.skip_ws() == "}":
            src.pos += 1
        else:
            while True:
                if src.skip_ws() != '"':
                    src.fail("Expecting property name enclosed in double quotes")
                key = src.value()
                src.expect(":")
                if key == "traceEvents" and src.skip_ws() == "[":
                    found = True
                    src.pos += 1
                    for event in src.items():
                        if keep(event):
                            kept.append(event)
                            if len(kept) > max_kept:
                                raise RooflineError(too_many(max_kept))
                else:
                    src.value()
                if src.expect(",}") == "}":
                    break
        if src.skip_ws() != "":
            src.fail("Extra data")
    if not found:
        raise _not_a_trace(path)
    return kept


__all__ = ["CHUNK_BYTES", "stream_trace_events"]
