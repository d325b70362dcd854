"""Writing files so that a failure never leaves a truncated file in place of a good one, never
replaces a device, a link or a read-only file, and never replaces the first outputs of a command that
fails on its last; reading a user's file with a bound on its size and kind (`read_text_file`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen

# --- writing -------------------------------------------------------------------------------------
#
# What an output path names decides how it is written:
# - a missing path or a regular file (through any symlinks, which stay links): the bytes go to a
#   temporary file `.rl-XXXXXXXX.tmp` in the real file's folder (short, so a 250-character name
#   still fits NAME_MAX), synced to disk, then renamed over the file; the folder is synced after the
#   rename so that the rename itself survives a crash. A read-only file is refused, never replaced.
# - this process's own standard output or error (/dev/stdout, /proc/self/fd/1, or the very file the
#   shell sent stdout to): the bytes go down that stream, after what was printed before them.
# - a character device (/dev/null, a terminal) or a FIFO: written through, as the shell's `>` does;
#   the device node stays a device node.
# - anything else (a folder, a block device, a socket) is refused.
# Several files of one command are written together (`writing_together`): each is staged as its
# synced temporary file, and only when the command ends without an error are they all renamed, so a
# failure on the last output leaves the first ones untouched. SIGTERM or SIGINT while a temporary
# file is pending removes it.

_REPLACE, _THROUGH, _STREAM = "replace", "through", "stream"
_NAME_MAX = 255  # bytes in one file name on Linux and macOS, when the folder cannot be asked


@frozen
class Target:
    """Where the bytes for one output path go: `given` is what the user named; `path` is the regular
    file replaced (symlinks resolved) or the device or FIFO opened; `fd` the stream written to."""

    given: Path
    path: Path
    how: str
    fd: int = -1
    key: tuple[int, int] | None = None  # (device, inode) of the existing file, device, FIFO or stream
    is_device: bool = False
    folder: tuple[int, int] | None = None  # (device, inode) of the folder a replaced file is renamed in


def _cannot(given: object, which: str, why: str) -> RooflineError:
    name = str(given)
    shown = name if len(name) <= 300 else f"{name[:40]}... ({len(name):,} characters)"  # never a 100 KB line
    return RooflineError(f"cannot write {shown}{which}: {why}")


def _is_read_only(path: Path, st: os.stat_result) -> bool:
    # root may write any file, so the mode bits are checked as well as access(2): a file made read-only
    # (chmod 0444) was made so on purpose, and a rename would replace it without a word
    return not st.st_mode & 0o222 or not os.access(path, os.W_OK)


def _own_stream(st: os.stat_result) -> int:
    """1 or 2 if `st` is the file this process's stdout or stderr is, else -1."""
    for fd in (1, 2):
        try:
            mine = os.fstat(fd)
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino):
            return fd
    return -1


def _not_a_folder(given: Path) -> str:
    """Why a path under a file (ENOTDIR) cannot be written: its first folder that is not one."""
    for parent in reversed(given.parents):
        if parent.exists() and not parent.is_dir():
            return f"{parent} is {'a file' if parent.is_file() else 'a device or special file'}, not a folder"
    return f"{given.parent} is not a folder"


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return _NAME_MAX


def target_of(path: str | os.PathLike[str], option: str = "") -> Target:
    """How `path` is written (see above), or RooflineError saying in one line why it cannot be:
    an empty name, a folder, a missing folder, a path under a file, a read-only file, a block device
    or socket, a name too long for its folder."""
    text = os.fspath(path)
    which = f" ({option})" if option else ""
    if not str(text).strip():
        wanted = option.removeprefix("--")
        example = f"out{_FORMATS[wanted][0]}" if wanted in _FORMATS else _EXAMPLES.get(wanted, "out.txt")
        raise RooflineError(f"{option or 'the output'} is an empty file name; give a file name, e.g. {example}")
    given = Path(text)
    if str(text).endswith(("/", os.sep)):
        raise _cannot(text, which, "it ends in a slash, so it names a folder; give a file name")
    try:
        st: os.stat_result | None = os.stat(given)  # follows symlinks: what the bytes would land on
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise _cannot(given, which, _not_a_folder(given)) from None
    except (OSError, ValueError) as exc:  # ELOOP, ENAMETOOLONG, EACCES; ValueError: a NUL byte
        raise _cannot(given, which, getattr(exc, "strerror", None) or str(exc)) from None
    if st is not None:
        mode = st.st_mode
        fd = _own_stream(st)
        if fd > 0:
            return Target(given, given, _STREAM, fd, (st.st_dev, st.st_ino), stat.S_ISCHR(mode))
        if stat.S_ISDIR(mode):
            raise _cannot(given, which, "it is a folder")
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            return Target(given, given, _THROUGH, -1, (st.st_dev, st.st_ino), stat.S_ISCHR(mode))
        if not stat.S_ISREG(mode):
            kind = "block device" if stat.S_ISBLK(mode) else "socket" if stat.S_ISSOCK(mode) else "special file"
            raise _cannot(given, which, f"it is a {kind}, not a file; name a regular file")
        real = Path(os.path.realpath(given))
        if _is_read_only(real, st):
            raise _cannot(given, which, f"it is read-only (mode {stat.S_IMODE(mode):04o}); make it writable "
                                        f"(chmod u+w {given}) or name another file")
    else:
        real = Path(os.path.realpath(given))  # a dangling symlink: the file it points to is created
        folder = real.parent
        shown = given.parent if real.name == given.name and not given.is_symlink() else folder
        if not folder.exists():
            raise _cannot(given, which, f"folder {shown} does not exist")
        if not folder.is_dir():
            raise _cannot(given, which, _not_a_folder(real))
        longest = _name_max(folder)
        if len(os.fsencode(real.name)) > longest:
            raise _cannot(given, which, f"its name is {len(os.fsencode(real.name))} bytes long, more than the "
                                        f"{longest} a file name may have here; name it shorter")
    if not os.access(real.parent, os.W_OK | os.X_OK):  # also a read-only filesystem, even for root
        raise _cannot(given, which, f"folder {real.parent} is not writable")
    try:
        where = os.stat(real.parent)
    except OSError as exc:
        raise _cannot(given, which, exc.strerror or str(exc)) from None
    return Target(given, real, _REPLACE, key=(st.st_dev, st.st_ino) if st is not None else None,
                  folder=(where.st_dev, where.st_ino))


def writable_target(path: str | os.PathLike[str], option: str = "") -> Path:
    """`path` if a file can be written there (see `target_of`), else RooflineError in one line."""
    return target_of(path, option).given


# temporary files not yet renamed, removed if SIGTERM or SIGINT stops the process; process-wide because
# a signal handler is
_PENDING: set[str] = set()
_PREVIOUS: dict[int, Any] = {}
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name))


def _on_signal(signum: int, frame: Any) -> None:
    """Remove every pending temporary file, then do what the signal did before (stop, or raise
    KeyboardInterrupt)."""
    for name in list(_PENDING):
        with contextlib.suppress(OSError):
            os.unlink(name)
    _PENDING.clear()
    previous = _PREVIOUS.get(signum, signal.SIG_DFL)
    _restore_handlers()
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)  # die of the signal, as the process would have without us
    os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    if _PREVIOUS or threading.current_thread() is not threading.main_thread():
        return  # installed already, or a thread, where signal.signal cannot be called
    for sig in _SIGNALS:
        previous = signal.getsignal(sig)
        if previous in (signal.SIG_IGN, None):
            continue  # ignored (nohup): the signal does not stop us, so nothing needs removing
        _PREVIOUS[sig] = previous
        signal.signal(sig, _on_signal)


def _restore_handlers() -> None:
    if not _PREVIOUS or threading.current_thread() is not threading.main_thread():
        return
    for sig, previous in _PREVIOUS.items():
        if signal.getsignal(sig) is _on_signal:
            signal.signal(sig, previous)
    _PREVIOUS.clear()


def _pending(tmp: str) -> None:
    _install_handlers()
    _PENDING.add(tmp)


def _settled(tmp: str, remove: bool) -> None:
    """`tmp` renamed (remove=False) or abandoned (remove=True): no longer pending."""
    if remove:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _PENDING.discard(tmp)
    if not _PENDING:
        _restore_handlers()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view):]


def _open_folder(target: Target) -> int:
    """A descriptor of the folder `target` is renamed in, if it is still the folder `target_of`
    checked (same device and inode): a folder swapped for a symlink or another folder mid-run is
    refused, and every later step works relative to this descriptor, never to the path again."""
    try:
        fd = os.open(target.path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise _cannot(target.given, "", exc.strerror or str(exc)) from None
    st = os.fstat(fd)
    if target.folder is not None and (st.st_dev, st.st_ino) != target.folder:
        os.close(fd)
        raise _cannot(target.given, "", f"folder {target.path.parent} was replaced while the command ran; "
                                        "nothing was written, run it again")
    return fd


@frozen
class _Staged:
    """A synced temporary file `name` in the folder open as `folder_fd`, waiting to replace `target`."""

    target: Target
    folder_fd: int
    name: str

    @property
    def path(self) -> str:
        return os.path.join(self.target.path.parent, self.name)


def _stage(target: Target, payload: bytes) -> _Staged:
    """The bytes in a synced temporary file beside `target.path` (created relative to the checked
    folder's descriptor), with the mode (and, for root, the owner) of the file it will replace."""
    import secrets

    dfd = _open_folder(target)
    while True:
        name = f".rl-{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600,
                         dir_fd=dfd)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            os.close(dfd)
            raise _cannot(target.given, "", exc.strerror or str(exc)) from None
    staged = _Staged(target, dfd, name)
    _pending(staged.path)
    try:
        try:
            _write_all(fd, payload)
            os.fsync(fd)
            try:
                old: os.stat_result | None = os.stat(target.path.name, dir_fd=dfd)
            except FileNotFoundError:
                old = None
            if old is None:
                os.fchmod(fd, 0o666 & ~_umask())
            else:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                if getattr(os, "geteuid", lambda: -1)() == 0:  # root replacing someone's file: it stays theirs
                    with contextlib.suppress(OSError):
                        os.fchown(fd, old.st_uid, old.st_gid)
        finally:
            os.close(fd)
    except OSError as exc:
        _abandon(staged)
        raise _cannot(target.given, "", exc.strerror or str(exc)) from None
    except BaseException:
        _abandon(staged)
        raise
    return staged


def _abandon(staged: _Staged) -> None:
    with contextlib.suppress(OSError):
        os.unlink(staged.name, dir_fd=staged.folder_fd)
    _settled(staged.path, remove=False)
    with contextlib.suppress(OSError):
        os.close(staged.folder_fd)


def _rename(staged: _Staged) -> None:
    """Rename the temporary file over the target, relative to the folder checked at the start, after
    checking the folder's path still leads to it (else nothing is replaced)."""
    target, dfd = staged.target, staged.folder_fd
    try:
        now = os.stat(target.path.parent)
        mine = os.fstat(dfd)
    except OSError as exc:
        raise _cannot(target.given, "", exc.strerror or str(exc)) from None
    if (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
        raise _cannot(target.given, "", f"folder {target.path.parent} was replaced while the command ran; "
                                        "nothing was written, run it again")
    try:
        os.replace(staged.name, target.path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except OSError as exc:
        raise _cannot(target.given, "", exc.strerror or str(exc)) from None
    _settled(staged.path, remove=False)
    with contextlib.suppress(OSError):
        os.fsync(dfd)  # the rename itself survives a crash; some filesystems cannot sync a folder
    with contextlib.suppress(OSError):
        os.close(dfd)


def _write_through(target: Target, payload: bytes) -> None:
    """Into a device or FIFO, or down this process's stdout or stderr, without replacing anything."""
    try:
        if target.how == _STREAM:
            stream = sys.stdout if target.fd == 1 else sys.stderr
            with contextlib.suppress(Exception):
                stream.flush()  # what was printed before comes first
            _write_all(target.fd, payload)
            return
        # no O_CREAT, no O_TRUNC: only what exists is opened; a FIFO waits here for its reader
        fd = os.open(target.path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
        try:
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):  # it changed since it was checked
                raise _cannot(target.given, "", "it is no longer a device or FIFO; run the command again")
            _write_all(fd, payload)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _cannot(target.given, "", exc.strerror or str(exc)) from None


class WriteSet:
    """Files written together: `write` stages each one (or writes a device, FIFO or stream through at
    once), `commit` renames every staged file over its target, `discard` removes them all."""

    def __init__(self) -> None:
        self._staged: list[_Staged] = []
        self._after: list[Callable[[], None]] = []

    def write(self, path: str | os.PathLike[str], data: str | bytes, option: str = "") -> Path:
        target = target_of(path, option)
        payload = data.encode() if isinstance(data, str) else data
        if target.how == _REPLACE:
            self._staged.append(_stage(target, payload))
        else:
            _write_through(target, payload)
        return target.given

    def after(self, action: Callable[[], None]) -> None:
        """Run `action` (e.g. print "wrote FILE") once every file is in place."""
        self._after.append(action)

    def commit(self) -> None:
        staged, self._staged = self._staged, []
        for i, one in enumerate(staged):
            try:
                _rename(one)
            except RooflineError:
                for rest in staged[i:]:
                    _abandon(rest)
                self._after.clear()
                raise
        after, self._after = self._after, []
        for action in after:
            action()

    def discard(self) -> None:
        staged, self._staged = self._staged, []
        for one in staged:
            _abandon(one)
        self._after.clear()


_CURRENT: ContextVar[WriteSet | None] = ContextVar("roofline_write_set", default=None)


@contextlib.contextmanager
def writing_together() -> Iterator[WriteSet]:
    """Every `atomic_write` inside the block is staged and renamed when the block ends; an exception
    (a bad option found late, Ctrl-C) removes every staged file and replaces nothing. A nested block
    joins the outer one. SystemExit commits: it is a deliberate exit (click's on a closed pipe), and
    the files are whole."""
    outer = _CURRENT.get()
    if outer is not None:
        yield outer
        return
    ws = WriteSet()
    token = _CURRENT.set(ws)
    try:
        yield ws
    except SystemExit:
        _CURRENT.reset(token)
        ws.commit()
        raise
    except BaseException:
        _CURRENT.reset(token)
        ws.discard()
        raise
    _CURRENT.reset(token)
    ws.commit()


def after_writes(action: Callable[[], None]) -> None:
    """Run `action` once the files written so far are in place: now, or when `writing_together` ends."""
    ws = _CURRENT.get()
    if ws is None:
        action()
    else:
        ws.after(action)


def atomic_write(path: str | os.PathLike[str], data: str | bytes, option: str = "") -> Path:
    """Write `data` to `path` as described above: all or nothing, never replacing a device, a link or
    a read-only file. Inside `writing_together` the rename waits for the block's end."""
    ws = _CURRENT.get()
    if ws is not None:
        return ws.write(path, data, option)
    ws = WriteSet()
    try:
        written = ws.write(path, data, option)
    except BaseException:
        ws.discard()
        raise
    ws.commit()
    return written


# an output option -> the file name endings that match what it writes (the first is suggested)
_FORMATS = {"png": (".png",), "svg": (".svg",), "html": (".html", ".htm"), "csv": (".csv", ".txt")}
_EXAMPLES = {"save": "my-machine.toml", "save-calibration": "my.calibration.json", "save-trace": "run.json",
             "calibration": "my.calibration.json", "device-file": "my-cpu.toml"}


def _probe(target: Target, which: str) -> None:
    """Create and remove a temporary file where the output will be staged: the one true test that the
    folder takes a new file (permissions, a read-only or full filesystem)."""
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=".rl-", suffix=".tmp", dir=target.path.parent)
    except OSError as exc:
        raise _cannot(target.given, which, exc.strerror or str(exc)) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def input_files(named: Iterable[tuple[str, str | os.PathLike[str] | None]]) -> dict[object, tuple[str, str]]:
    """The identities (`_identity`) of the files a command reads, each with the option and name it
    was given by. A name that is no file (a preset such as h100) is left out; a folder stands for the
    config.json in it, which is what a model folder is read as."""
    seen: dict[object, tuple[str, str]] = {}
    for option, path in named:
        if path is None or not str(path).strip():
            continue
        text = os.fspath(path)
        try:
            st = os.stat(text)
        except (OSError, ValueError):
            continue  # not a file: a preset name, or a missing file its reader names
        if stat.S_ISDIR(st.st_mode):
            text = os.path.join(text, "config.json")
            try:
                st = os.stat(text)
            except OSError:
                continue
        if stat.S_ISCHR(st.st_mode):
            continue  # /dev/stdin or a terminal is read through, never replaced
        seen.setdefault((st.st_dev, st.st_ino), (option, text))
    return seen


def check_outputs(paths: Mapping[str, str | os.PathLike[str] | None],
                  inputs: Iterable[tuple[str, str | os.PathLike[str] | None]] = ()) -> None:
    """Before anything is written: every output can be written (`target_of`, then a temporary file
    created and removed in its folder), its name ends as its format does, no two options name the
    same file (one device such as /dev/null may take several), and no output is a file the command
    reads (`inputs`: (option, path) pairs; `roofline import k.csv --csv k.csv` would destroy the trace).
    Files are compared by device and inode, so a hard link or a symlink to a file is that file. A
    command writing several files (--csv, --png, --html) then fails before touching any of them,
    instead of replacing the first ones and failing on the last. `paths` maps each option (e.g.
    "--png") to its file or None (not given); an empty name is refused."""
    reads = input_files(inputs)
    seen: dict[object, str] = {}
    for option, path in paths.items():
        if path is None:
            continue
        label = option if option.startswith("-") else ""  # a library argument (png=) is not named
        target = target_of(path, label)
        which = f" ({label})" if label else ""
        key: object = target.key if target.key is not None else target.path
        if key in reads and not target.is_device:
            source, name = reads[key]
            raise RooflineError(f"{option} {target.given} is the file {source} {name} that this command reads "
                                "(the same device and inode); writing it would destroy the input: name "
                                "another output file")
        if key in seen and not target.is_device:
            raise RooflineError(f"{seen[key]} and {option} name the same file {target.given}; give each its own "
                                "file")
        seen[key] = option
        suffix = target.given.suffix
        wanted = option.removeprefix("--")
        # a device's or FIFO's name is not a format's (kernels.fifo takes CSV as well as any)
        if target.how == _REPLACE and wanted in _FORMATS and suffix and suffix.lower() not in _FORMATS[wanted]:
            raise RooflineError(f"{option} writes {wanted.upper()}, but {target.given} ends in {suffix}; "
                                f"name it {target.given.with_suffix(_FORMATS[wanted][0])}")
        if target.how == _REPLACE:
            _probe(target, which)


# --- reading a user's file ------------------------------------------------------------------------

MAX_USER_FILE_BYTES = 1 << 20  # 1 MiB: a machine file is a few KiB; more is not one (model configs: config_input)

# byte-order marks, longest first (UTF-32 LE's begins with UTF-16 LE's)
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"), (b"\xef\xbb\xbf", "utf-8-sig"),
         (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def read_text_file(path: str | os.PathLike[str], what: str, max_bytes: int = MAX_USER_FILE_BYTES,
                   error: type[RooflineError] = RooflineError) -> str:
    """The text of a user's file: a regular file only (a FIFO or /dev/zero is refused, never read, so
    nothing hangs or fills memory), at most `max_bytes`, UTF-8 (UTF-16 or UTF-32 with a byte-order
    mark are accepted too). Anything else is one `error` naming the file: "{what} file {path} ..."."""
    p = Path(path)
    head = f"{what} file {p}"
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"{head} does not exist") from None
    except IsADirectoryError:
        raise error(f"{head} is a folder; give a file") from None
    except OSError as exc:
        raise error(f"{head}: cannot read it ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{head} is a folder; give a file")
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{head} is not a regular file (a device, pipe or socket); give a file")
        if info.st_size > max_bytes:
            raise error(f"{head} is {info.st_size:,} bytes; a {what} file is at most {max_bytes:,} bytes")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"{head}: cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew after fstat
        raise error(f"{head} is over {max_bytes:,} bytes; a {what} file is at most {max_bytes:,} bytes")
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise error(f"{head} is not {encoding.upper().removesuffix('-SIG')} text (byte {data[exc.start]:#04x} "
                    f"at offset {exc.start}); save it as UTF-8") from None


def parse_document(loads: Callable[[str], Any], text: str, decode_error: type[Exception], error: type[RooflineError],
                   invalid: Callable[[Exception], str], nested: str, too_long: str) -> Any:
    """`loads(text)` (a TOML or JSON parser), or one line of `error`: `invalid(exc)` for a syntax error
    (`decode_error`), `nested` where the document nests too deeply for the parser (RecursionError), and
    `too_long` for an integer past Python's limit on its digits (the ValueError int() raises)."""
    try:
        return loads(text)
    except decode_error as exc:
        raise error(invalid(exc)) from None
    except RecursionError:
        raise error(nested) from None
    except ValueError:
        raise error(too_long) from None
