"""Outputs named by a hostile or careless user: devices, FIFOs, links, read-only files, paths under a
file, empty names, names at the length limit, a full disk as stdout, and a kill in the middle.

Each test names what happened before the fix. The tests run as whatever user runs them; where root
behaves differently (it may write any file) the mode bits decide, so the outcome is the same.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.fileio import atomic_write, check_outputs, target_of, writing_together

GPT2 = ("model", "gpt2", "--context", "512")  # the smallest preset: a CSV of its kernels in well under a second
CSV_HEADER = "name,kind,count,flop,bytes"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    """stderr is exactly one line, the error, with no traceback."""
    assert err.count("\n") == 1 and err.startswith("roofline: error: "), err
    assert "Traceback" not in err
    return err.rstrip("\n")


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".rl-"))


# --- 1. what is not a regular file is written through, never replaced ----------------------------------

def test_a_character_device_stays_a_device(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # before: as root, `--csv /dev/null` renamed a regular file over the device node
    private = tmp_path / "null"
    try:  # a /dev/null of our own first (1, 3 is /dev/null's device number), so a regression breaks only it
        os.mknod(private, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (OSError, AttributeError):
        private = Path("/dev/null")
    for device in dict.fromkeys([private, Path("/dev/null")]):
        before = os.stat(device)
        code, _, err = run(capsys, *GPT2, "--csv", str(device))
        assert code == 0 and f"wrote {device}" in err
        # one device may take several outputs: the same-file rule is for files
        code, _, _ = run(capsys, "kernel", "add", "1000", "--png", str(device), "--svg", str(device))
        assert code == 0
        after = os.stat(device)
        assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev == os.makedev(1, 3)


def _read_fifo_in_thread(fifo: Path) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as handle:
            got.append(handle.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    return thread, got


def _release(fifo: Path, thread: threading.Thread) -> None:
    """A reader still waiting (the writer never came) gets its end of file, so the test cannot hang."""
    thread.join(timeout=20)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=5)


def test_a_fifo_is_written_through(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # before: a regular file was renamed over the FIFO and its reader waited forever
    fifo, plain = tmp_path / "kernels.fifo", tmp_path / "kernels.csv"
    os.mkfifo(fifo)
    thread, got = _read_fifo_in_thread(fifo)
    try:
        code, _, err = run(capsys, *GPT2, "--csv", str(fifo))
    finally:
        _release(fifo, thread)
    assert code == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert run(capsys, *GPT2, "--csv", str(plain))[0] == 0
    assert got == [plain.read_bytes()] and got[0].decode().startswith(CSV_HEADER)  # the same bytes as a file gets


def test_dev_stdout_goes_down_stdout_after_what_was_printed(tmp_path: Path) -> None:
    # before: /dev/stdout (a link to /proc/self/fd/1) was replaced by a regular file, as root
    private = tmp_path / "stdout"
    private.symlink_to("/proc/self/fd/1")  # what /dev/stdout is, so that a regression breaks only this one
    for name in (private, Path("/dev/stdout")):
        out = tmp_path / "out.txt"
        with open(out, "wb") as stdout:
            proc = subprocess.run([sys.executable, "-m", "roofline.cli", *GPT2, "--csv", str(name)], stdout=stdout,
                                  stderr=subprocess.PIPE, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert name.is_symlink() and os.readlink(name) == "/proc/self/fd/1"
        text = out.read_text()
        # the CSV (its header, then one row per kernel), then the table the command prints, in that order
        assert text.startswith(CSV_HEADER) and "time floor" in text.split(CSV_HEADER, 1)[1]


@pytest.mark.skipif(not hasattr(os, "mknod"), reason="no mknod")
def test_a_block_device_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    try:
        os.mknod(disk, 0o600 | stat.S_IFBLK, os.makedev(7, 200))  # a loop device number, never opened
    except OSError:
        pytest.skip("cannot create a block device node here")
    code, _, err = run(capsys, *GPT2, "--csv", str(disk))
    assert code == 2 and "it is a block device, not a file" in one_error_line(err)
    assert stat.S_ISBLK(os.stat(disk).st_mode)


# --- 2. links and read-only files ------------------------------------------------------------------------

def test_a_symlink_stays_a_link_and_its_target_is_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # before: the link was replaced by a regular file and its target kept the old bytes
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "kernels.csv"
    real.write_text("OLD\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    code, _, err = run(capsys, *GPT2, "--csv", str(link))
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text().startswith(CSV_HEADER)
    assert temporaries(tmp_path) == [] and temporaries(real.parent) == []
    dangling = tmp_path / "new-link.csv"
    dangling.symlink_to(tmp_path / "real" / "new.csv")  # points at a file yet to be written
    assert run(capsys, *GPT2, "--csv", str(dangling))[0] == 0
    assert dangling.is_symlink() and (tmp_path / "real" / "new.csv").read_text().startswith(CSV_HEADER)


def test_a_read_only_file_is_refused_not_replaced(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # before: root renamed over a chmod 0444 file without a word
    ro = tmp_path / "kernels.csv"
    ro.write_text("KEEP\n")
    ro.chmod(0o444)
    code, out, err = run(capsys, *GPT2, "--csv", str(ro))
    assert code == 2 and out == ""
    assert "it is read-only (mode 0444)" in one_error_line(err) and "chmod u+w" in err
    assert ro.read_text() == "KEEP\n" and stat.S_IMODE(ro.stat().st_mode) == 0o444


def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared.csv"
    shared.write_text("old\n")
    shared.chmod(0o640)
    atomic_write(shared, "new\n")
    assert shared.read_text() == "new\n" and stat.S_IMODE(shared.stat().st_mode) == 0o640


# --- 3. fsync, cleanup on a signal, short temporary names ----------------------------------------------

def test_the_temporary_file_is_synced_before_the_rename_and_the_folder_after(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("sync folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "sync file")
        real_fsync(fd)

    def replace(src: str, dst: str, **dir_fds: int) -> None:
        assert Path(src).name.startswith(".rl-") and Path(src).name.endswith(".tmp")
        # relative to the folder checked at the start, held open (issue 24), never to its path again
        assert set(dir_fds) == {"src_dir_fd", "dst_dir_fd"} and dst == "a.csv", (dst, dir_fds)
        events.append("rename")
        real_replace(src, dst, **dir_fds)

    monkeypatch.setattr("roofline.fileio.os.fsync", fsync)
    monkeypatch.setattr("roofline.fileio.os.replace", replace)
    atomic_write(tmp_path / "a.csv", "x\n")
    assert events == ["sync file", "rename", "sync folder"]


def test_a_250_character_name_is_written_and_a_256_character_one_refused(capsys: pytest.CaptureFixture[str],
                                                                        tmp_path: Path) -> None:
    # before: the temporary name was ".{name}.XXXXXXXX.tmp", 14 bytes longer than the name: 250 + 14 > 255
    long = tmp_path / ("k" * 246 + ".csv")  # 246 + 4 = 250 bytes, legal (NAME_MAX = 255)
    code, _, err = run(capsys, *GPT2, "--csv", str(long))
    assert code == 0, err
    assert long.read_text().startswith(CSV_HEADER) and temporaries(tmp_path) == []
    too_long = tmp_path / ("k" * 252 + ".csv")  # 252 + 4 = 256 bytes, one more than NAME_MAX
    code, _, err = run(capsys, *GPT2, "--csv", str(too_long))
    assert code == 2 and "(--csv)" in one_error_line(err)


_STAGE_AND_WAIT = textwrap.dedent("""
    import sys, time
    from roofline.fileio import atomic_write, writing_together
    with writing_together():
        atomic_write(sys.argv[1], b"new" * 100_000)
        print("staged", flush=True)
        time.sleep(60)
""")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_removes_the_pending_temporary_file(tmp_path: Path, signum: int) -> None:
    # before: SIGTERM between writing the temporary file and the rename left ".name.XXXX.tmp" behind
    target = tmp_path / "big.csv"
    target.write_text("OLD\n")
    proc = subprocess.Popen([sys.executable, "-c", _STAGE_AND_WAIT, str(target)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "staged\n"
        assert len(temporaries(tmp_path)) == 1  # staged, waiting for its rename
        proc.send_signal(signum)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    # SIGTERM: the process dies of it, as it would without the handler; SIGINT: KeyboardInterrupt, and
    # Python ends an uncaught one by dying of SIGINT too
    assert proc.returncode == -signum
    assert temporaries(tmp_path) == [] and target.read_text() == "OLD\n"


def test_the_signal_handlers_are_restored_once_nothing_is_pending(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with writing_together():
        atomic_write(tmp_path / "a.csv", "a\n")
        assert signal.getsignal(signal.SIGTERM) is not before[0]  # a file is pending: ours
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


# --- 4. every output checked up front; all staged, then all renamed -----------------------------------

@pytest.mark.parametrize("bad", ["under-a-file", "missing-folder", "read-only"])
def test_a_bad_html_leaves_the_good_csv_alone(capsys: pytest.CaptureFixture[str], tmp_path: Path, bad: str) -> None:
    # before: --csv ok.csv was replaced, then --html failed
    ok = tmp_path / "ok.csv"
    ok.write_text("GOOD\n")
    (tmp_path / "plain.txt").write_text("a file, not a folder\n")
    html = {"under-a-file": tmp_path / "plain.txt" / "x.html", "missing-folder": tmp_path / "nope" / "x.html",
            "read-only": tmp_path / "ro.html"}[bad]
    if bad == "read-only":
        html.write_text("RO\n")
        html.chmod(0o444)
    code, out, err = run(capsys, *GPT2, "--csv", str(ok), "--html", str(html))
    line = one_error_line(err)
    assert code == 2 and out == "" and "(--html)" in line
    assert {"under-a-file": "plain.txt is a file, not a folder", "missing-folder": "does not exist",
            "read-only": "read-only"}[bad] in line
    assert ok.read_text() == "GOOD\n" and temporaries(tmp_path) == []


def test_a_late_failure_replaces_none_of_the_staged_files(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # the CSV is staged before the page is drawn; drawing the page fails; the CSV stays as it was
    ok, page = tmp_path / "ok.csv", tmp_path / "page.html"
    ok.write_text("GOOD\n")

    def broken(*args: object, **kwargs: object) -> str:
        raise RooflineError("the page could not be drawn")

    monkeypatch.setattr("roofline.report.outputs.model_html", broken)
    code, _, err = run(capsys, *GPT2, "--csv", str(ok), "--html", str(page))
    assert code == 2 and one_error_line(err) == "roofline: error: the page could not be drawn"
    assert "wrote" not in err  # nothing is said to be written that was not
    assert ok.read_text() == "GOOD\n" and not page.exists() and temporaries(tmp_path) == []


def test_writing_together_renames_only_at_the_end(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("old a\n")
    with writing_together():
        atomic_write(a, "new a\n")
        atomic_write(b, "new b\n")
        assert a.read_text() == "old a\n" and not b.exists() and len(temporaries(tmp_path)) == 2
    assert (a.read_text(), b.read_text()) == ("new a\n", "new b\n") and temporaries(tmp_path) == []
    with pytest.raises(KeyboardInterrupt), writing_together():
        atomic_write(a, "newer a\n")
        raise KeyboardInterrupt
    assert a.read_text() == "new a\n" and temporaries(tmp_path) == []


def test_check_outputs_refuses_each_unwritable_path(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(RooflineError, match=r"f is a file, not a folder"):
        check_outputs({"--csv": tmp_path / "f" / "deeper" / "x.csv"})
    with pytest.raises(RooflineError, match="it is a folder"):
        check_outputs({"--csv": tmp_path})
    with pytest.raises(RooflineError, match="ends in a slash"):
        check_outputs({"--csv": f"{tmp_path}/new/"})
    with pytest.raises(RooflineError, match="name the same file"):
        check_outputs({"--csv": tmp_path / "a.csv", "--output": tmp_path / "." / "a.csv"})
    assert target_of("/dev/null").how == "through" and target_of(tmp_path / "new.csv").how == "replace"


# --- 5. empty names, --save before measuring, a full stdout ---------------------------------------------

@pytest.mark.parametrize("argv", [
    (*GPT2, "--csv", ""),
    ("kernel", "add", "1000", "--png", ""),
    ("machines", "h100", "--svg", ""),
    ("sweep", "gpt2", "--batch", "1:4", "--output", ""),
    ("measure", "--quick", "--save", ""),
])
def test_an_empty_file_name_is_refused(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    # before: `--csv ''` wrote nothing and said nothing, exit 0
    option = argv[-2]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"roofline: error: {option} is an empty file name; give a file name")


def test_measure_save_is_checked_before_measuring(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # before: a bad --save failed after the 30 s of measuring
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured before --save was checked")

    monkeypatch.setattr("roofline.measure.ceilings.measure_ceilings", never)
    ro = tmp_path / "ro.toml"
    ro.write_text("KEEP\n")
    ro.chmod(0o444)
    for save, why in ((tmp_path / "nope" / "m.toml", "does not exist"), (ro, "read-only"),
                      (tmp_path, "it is a folder")):
        code, _, err = run(capsys, "measure", "--quick", "--save", str(save))
        assert code == 2 and "(--save)" in one_error_line(err) and why in err


def test_a_full_stdout_is_one_line_and_exit_2() -> None:
    # before: OSError ENOSPC escaped as a traceback, then "Exception ignored ... stdout" at exit
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "roofline.cli", "machines"], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == "roofline: error: No space left on device: standard output\n"


def test_a_bad_last_output_path_leaves_the_earlier_files_alone(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    good_csv, good_png = tmp_path / "keep.csv", tmp_path / "keep.png"
    good_csv.write_text("GOOD\n")
    good_png.write_text("GOOD\n")
    missing = tmp_path / "no-such-folder" / "x.html"
    # before: keep.csv and keep.png were replaced, then the command failed on --html
    code, out, err = run(capsys, "model", "gpt2", "--context", "512", "--csv", str(good_csv), "--png", str(good_png),
                         "--html", str(missing))
    assert code == 2 and out == ""
    assert "(--html)" in one_error_line(err) and "does not exist" in err
    assert good_csv.read_text() == "GOOD\n" and good_png.read_text() == "GOOD\n"
    code, _, err = run(capsys, "kernel", "matmul", "64", "64", "64", "--png", str(good_png), "--html", str(missing))
    assert code == 2 and good_png.read_text() == "GOOD\n"
    code, _, err = run(capsys, "sweep", "gpt2", "--batch", "1:4", "--csv", str(good_csv), "--png", str(missing))
    assert code == 2 and good_csv.read_text() == "GOOD\n"
    code, _, err = run(capsys, "machines", "h100", "--png", str(good_png), "--svg", str(missing))
    assert code == 2 and good_png.read_text() == "GOOD\n"


def test_two_outputs_naming_one_file_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    same = tmp_path / "chart.png"
    # before: the PNG was written, then the SVG replaced it under the .png name, exit 0
    code, _, err = run(capsys, "kernel", "matmul", "64", "64", "64", "--png", str(same), "--svg", str(same))
    assert code == 2 and "--png and --svg name the same file" in one_error_line(err)
    assert not same.exists()
    code, _, err = run(capsys, "compare", "gpt2", "--csv", str(same), "--output", str(tmp_path / "." / "chart.png"))
    assert code == 2 and "name the same file" in one_error_line(err)


def test_an_output_named_for_another_format_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    assert main(["kernel", "add", "1000", "--png", str(tmp_path / "chart.jpg")]) == 2
    err = capsys.readouterr().err
    assert "--png writes PNG, but" in err and "chart.png" in err and err.count("\n") == 1
    assert not (tmp_path / "chart.jpg").exists()


# --- an output that is an input, two names for one file, a folder swapped mid-run (issue 24) ----------


def test_a_hard_link_and_a_symlink_are_the_file_they_name(tmp_path: Path) -> None:
    """Compared by device and inode: a hard link (another name, the same inode) and a symlink (another
    path to the same inode) are the input itself, and two outputs that are one inode are refused."""
    trace = tmp_path / "k.json"
    trace.write_text("KEEP\n")
    os.link(trace, tmp_path / "hard.csv")
    (tmp_path / "soft.csv").symlink_to("k.json")
    for alias in ("hard.csv", "soft.csv"):
        with pytest.raises(RooflineError, match=f"--csv .*{alias} is the file TRACE .*k.json that this command reads"):
            check_outputs({"--csv": tmp_path / alias}, [("TRACE", str(trace))])
    with pytest.raises(RooflineError, match="--csv and --html name the same file"):
        (tmp_path / "a.csv").write_text("")
        os.link(tmp_path / "a.csv", tmp_path / "b.html")
        check_outputs({"--csv": tmp_path / "a.csv", "--html": tmp_path / "b.html"})
    # a preset name, a missing file and another file are no input of the output
    check_outputs({"--csv": tmp_path / "other.csv"}, [("--machine", "h100"), ("TRACE", str(trace)),
                                                      ("--ncu", str(tmp_path / "missing.csv"))])
    assert trace.read_text() == "KEEP\n"


def test_a_model_folder_stands_for_its_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(RooflineError, match="is the file MODEL"):
        check_outputs({"--html": tmp_path / "config.json"}, [("MODEL", str(tmp_path))])


def test_a_folder_swapped_for_a_symlink_mid_run_replaces_nothing(tmp_path: Path) -> None:
    """The output is staged in the folder checked at the start (held open); if that folder's path now
    leads elsewhere (swapped for a symlink to a folder holding a read-only file), nothing is renamed
    and the file there keeps its bytes."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    victim = elsewhere / "a.csv"
    victim.write_text("KEEP\n")
    victim.chmod(0o444)
    with pytest.raises(RooflineError, match="was replaced while the command ran; nothing was written"), \
            writing_together():
        atomic_write(out / "a.csv", "x\n")
        out.rename(tmp_path / "moved")
        out.symlink_to(elsewhere)
    assert victim.read_text() == "KEEP\n"
    assert temporaries(tmp_path / "moved") == [] and not (tmp_path / "moved" / "a.csv").exists()
