"""A Python script run as `python script.py ARGS` would run it, and the same run under the recorder.

`run_script` sets sys.argv and __name__ == "__main__" (and puts sys.argv back); a missing script or a
non-zero exit status is one RooflineError. `trace_script` runs it under roofline.tracing.recorder;
roofline.tracing.profile runs it under torch.profiler the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roofline.errors import RooflineError
from roofline.tracing.analysis import Trace
from roofline.tracing.recorder import trace


def run_script(path: str, argv: Sequence[str] = ()) -> None:
    """Run a Python script as `python path ARGS` would (__name__ == "__main__", sys.argv set and put back);
    a missing script or a non-zero exit status is one RooflineError."""
    import runpy
    import sys
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise RooflineError(f"no script at {path}")
    old_argv = sys.argv
    sys.argv = [str(p), *argv]
    try:
        runpy.run_path(str(p), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise RooflineError(f"{path} exited with status {exc.code}") from None
    finally:
        sys.argv = old_argv


def trace_script(path: str, argv: Sequence[str] = (), **options: Any) -> Trace:
    """Run a Python script under the tracer (as `python script.py ARGS` would, __name__ == "__main__")."""
    from pathlib import Path

    with trace(name=options.pop("name", Path(path).stem), **options) as t:
        run_script(path, argv)
    return t


__all__ = ["run_script", "trace_script"]
