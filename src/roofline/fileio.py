"""Writing files so that a failure never leaves a truncated file in place of a good one.

Layering: imports only roofline.errors.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from roofline.errors import RooflineError


def writable_target(path: str | os.PathLike[str], option: str = "") -> Path:
    """`path` if a file can be written there: its folder exists and it is not itself a folder."""
    target = Path(path)
    which = f" ({option})" if option else ""
    if not target.parent.is_dir():
        raise RooflineError(f"cannot write {target}{which}: folder {target.parent} does not exist")
    if target.is_dir():
        raise RooflineError(f"cannot write {target}{which}: it is a folder")
    return target


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write to a temporary file beside `path`, then rename over it: all or nothing."""
    target = writable_target(path)
    directory = target.parent
    payload = data.encode() if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise RooflineError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise RooflineError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# an output option -> the file name endings that match what it writes (the first is suggested)
_FORMATS = {"png": (".png",), "svg": (".svg",), "html": (".html", ".htm"), "csv": (".csv", ".txt")}


def check_outputs(paths: dict[str, str | os.PathLike[str] | None]) -> None:
    """Before anything is written: every output's folder exists, no output is a folder, and no two
    options name the same file. A command writing several files (--csv, --png, --html) then fails
    before touching any of them, instead of replacing the first ones and failing on the last.
    `paths` maps each option (e.g. "--png") to its file or None."""
    seen: dict[Path, str] = {}
    for option, path in paths.items():
        if not path:
            continue
        target = writable_target(path, option)
        key = target.resolve()
        if key in seen:
            raise RooflineError(f"{seen[key]} and {option} name the same file {target}; give each its own file")
        seen[key] = option
        wanted = option.removeprefix("--")
        if wanted in _FORMATS and target.suffix and target.suffix.lower() not in _FORMATS[wanted]:
            raise RooflineError(f"{option} writes {wanted.upper()}, but {target} ends in {target.suffix}; "
                                f"name it {target.with_suffix(_FORMATS[wanted][0])}")
