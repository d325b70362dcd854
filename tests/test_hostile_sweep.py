"""The hostile sweep (issue 13, "Every bad input"): every command, every class of bad input.

Each row is one invocation a hostile or careless user might type, run in-process through
`roofline.cli.main` in a folder of hostile files (missing, a folder, empty, binary, truncated JSON
and TOML, wrong types, read-only, a FIFO, a file where a folder should be). Each must end clean:

- exit code 2 and stderr exactly one non-empty line beginning `roofline: error:` that names what
  is wrong (the fragment in the row), nothing on stdout, no "Traceback";
- or, where the input is legal but odd (WARNED), exit 0 and exactly one `roofline: warning:` line;
- and in both cases no file in the folder created, removed or changed (names, kinds, sizes, mtimes
  and bytes compared before and after).

`measure` and `bench` rows must be refused before anything is measured, and `trace`/`profile` rows
before the script runs: the measuring functions and runpy.run_path are replaced by ones that fail
the test, and the script, if it ever ran, would write a file the snapshot would catch. Inputs that
could hang or exhaust memory if a regression opened them (a FIFO, /dev/zero) run in a subprocess
with a timeout (SUBPROCESS). The last test looks for the next class: hypothesis mixes options and
hostile values per command and holds every mixture to the same rule.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.cli import main
from roofline.hardware.catalog import DATA as DATA_DIR
from roofline.models.config import PRESETS_DIR

GPT2 = "gpt2"  # the smallest preset: every model row that gets past its options runs in milliseconds
SERVE = "serve gpt2 --prompt 16 --output 16"
KNOWN = "known: "  # an unknown name lists what is known

# --- the hostile folder ---------------------------------------------------------------------------------


def _machine_toml(**replace: str) -> str:
    """The catalog's H100 file with some lines replaced: a machine file of the wrong types."""
    text = (DATA_DIR / "h100-sxm.toml").read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new, 1)
    return text


def _cuda_trace() -> dict[str, object]:
    """A valid Kineto trace: one aten::mm 1024³ (fp16) launching one 20 µs kernel."""
    return {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 40.0, "dur": 10.0,
         "args": {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["c10::Half", "c10::Half"],
                  "Concrete Inputs": ["", ""]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 45.0, "dur": 2.0,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm_f16f16_f16f32", "pid": 0, "tid": 7, "ts": 55.0,
         "dur": 20.0, "args": {"correlation": 2, "stream": 7, "device": 0}},
    ]}


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    (d / "afile").write_text("a regular file where a folder should be\n")
    (d / "folder").mkdir()
    (d / "empty.json").write_bytes(b"")
    (d / "empty.toml").write_bytes(b"")
    (d / "trunc.json").write_text('{"hidden_size": 4')
    (d / "trunc.toml").write_text("[peak\nbf16 = ")
    (d / "bin.dat").write_bytes(bytes(range(128, 256)) + b"\x00" * 64 + bytes(range(128)))
    (d / "list.json").write_text("[1, 2]\n")
    preset = json.loads((PRESETS_DIR / "llama-3-8b.json").read_text())
    (d / "wrongtypes.json").write_text(json.dumps({**preset, "hidden_size": "4096"}))  # a string, not a number
    (d / "zero.json").write_text(json.dumps({**preset, "num_attention_heads": 0}))  # a division by zero
    (d / "strpeak.toml").write_text(_machine_toml(**{'bf16 = "989.4 TFLOP/s"': "bf16 = true"}))
    (d / "idnum.toml").write_text(_machine_toml(**{'id = "h100-sxm"': "id = 5"}))
    (d / "nanbw.toml").write_text(_machine_toml(**{'bandwidth = "3.35 TB/s"': "bandwidth = nan"}))
    (d / "negbw.toml").write_text(_machine_toml(**{'bandwidth = "3.35 TB/s"': 'bandwidth = "-3.35 TB/s"'}))
    (d / "ro.csv").write_text("KEEP\n")
    (d / "ro.csv").chmod(0o444)
    (d / "trace.json").write_text(json.dumps(_cuda_trace()))
    (d / "trunc_trace.json").write_text(json.dumps(_cuda_trace())[:100])
    (d / "notrace.json").write_text('{"traceEvents": 5}')
    (d / "noevents.json").write_text('{"traceEvents": []}')
    (d / "bad.csv").write_text("kernel,x\n1,2\n")
    (d / "cal.json").write_text('{"classes": {"compute": {"low": 2, "high": 1}}}')
    # a script that leaves a file behind if it ever runs: the snapshot would catch it
    (d / "marker.py").write_text("import pathlib\npathlib.Path('RAN').write_text('the script ran')\n")
    (d / "binary.py").write_bytes(b"\x7fELF\x02\x01\x01\x00" * 8)  # a binary named like a script
    (d / "zlink.json").symlink_to("/dev/zero")  # a link to a device: the device is what would be read
    (d / "loop").symlink_to("loop")  # a link to itself
    os.mkfifo(d / "fifo")
    # two names for one file (issue 24): a hard link and a symlink to the trace, a file linked as HTML
    os.link(d / "trace.json", d / "hardtrace.json")
    (d / "linktrace.csv").symlink_to("trace.json")
    (d / "hl.csv").write_text("KEEP\n")
    os.link(d / "hl.csv", d / "hl.html")
    nolink = _machine_toml(**{'id = "h100-sxm"': 'id = "my-cpu"'})  # as `measure --save` writes: no link
    start = nolink.index("[interconnect]")
    end = nolink.find("\n[", start + 1)
    (d / "nolink.toml").write_text(nolink[:start] + (nolink[end + 1:] if end > 0 else ""))
    (d / "m.toml").write_text(_machine_toml(**{'id = "h100-sxm"': 'id = "my-h100"'}))  # a valid machine file
    return d


def snapshot(folder: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under `folder`: its kind and mode, size, mtime and (a regular file's) bytes' digest."""
    seen: dict[str, tuple[object, ...]] = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else ""
        seen[str(path.relative_to(folder))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return seen


@pytest.fixture(autouse=True)
def never_measure_or_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row of measure, bench, trace or profile must be refused before anything is measured or run."""
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("measured or ran a script before the bad input was refused")

    for target in ("roofline.measure.ceilings.measure_ceilings", "roofline.measure.bench.bench_machine",
                   "roofline.measure.bench.run_bench", "roofline.measure.collectives_run.measure_collectives",
                   "runpy.run_path"):  # the one place trace, profile and diff run a script
        monkeypatch.setattr(target, refuse)


@pytest.fixture
def inside(arena: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(arena)
    before = snapshot(arena)
    yield arena
    assert snapshot(arena) == before, "a file in the folder was created, removed or changed"


def one_line(err: str, prefix: str) -> str:
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    line = err.rstrip("\n")
    assert line.startswith(prefix) and len(line) > len(prefix), err
    assert len(line) <= 1000, f"a {len(line):,}-character line"  # a pasted 100 KB argument is never echoed whole
    return line


# --- the table: (the command line, a fragment of its one error line) -------------------------------------

REFUSED: list[tuple[str, str]] = [
    # kernel matmul: sizes negative, zero, huge, non-numeric, NaN, inf, empty; unknown names; bad tiles
    ("kernel matmul 0 4096 4096", "M must be a positive integer, got 0"),
    ("kernel matmul -1 4096 4096", "M must be a positive integer, got -1"),
    ("kernel matmul 4096 4096", "Missing argument 'K'"),
    ("kernel matmul abc 1 1", "M must be a positive integer, got 'abc'"),
    ("kernel matmul 1e3 1 1", "write it like 8192, 128k"),
    ("kernel matmul nan 1 1", "M must be a positive integer, got 'nan'"),
    ("kernel matmul inf 1 1", "M must be a positive integer, got 'inf'"),
    ("kernel matmul '' 1 1", "M must be a positive integer, got ''"),
    ("kernel matmul 1 1 100000000000000000000000", "is too large: a size or count is at most 2**53"),
    ("kernel matmul 1 1 9007199254740993", "at most 2**53 = 9,007,199,254,740,992"),  # 2**53 + 1
    ("kernel matmul 1 1 1.5", "K must be a positive integer, got '1.5'"),
    ("kernel matmul 1 1 1 --batch 0", "--batch must be a positive integer, got 0"),
    ("kernel matmul 1 1 1 --tile 0x1x1", "expected 3 positive whole numbers joined by x"),
    ("kernel matmul 1 1 1 --tile abc", "expected 3 positive whole numbers joined by x"),
    ("kernel matmul 1 1 1 --tile 1x1", "expected 3 positive whole numbers joined by x"),
    ("kernel matmul 1 1 1 --tile ''", "--tile is empty"),
    ("kernel matmul 1 1 1 --machine nosuch", "unknown machine 'nosuch'; " + KNOWN),
    ("kernel matmul 1 1 1 --machine ''", "--machine is empty"),
    ("kernel matmul 1 1 1 --dtype fp7", "unknown dtype 'fp7'; did you mean fp8"),
    (f"kernel matmul 1 1 1 --dtype {'x' * 100_000}", "unknown dtype 'xxxx"),  # was: the 100 KB name echoed whole
    ("kernel matmul 1 1 1 --dtype ''", "--dtype is empty"),  # was: the default dtype, without a word
    ("kernel matmul 1 1 1 --dtype ' '", "--dtype is empty"),
    ("kernel matmul 1 1 1 --storage-dtype xyz", "unknown dtype 'xyz'"),
    ("kernel matmul 1 1 1 --storage-dtype ''", "--storage-dtype is empty"),
    ("kernel matmul 1 1 1 --dtype fp4 --machine h100", "lists no matrix peak for fp4"),
    ("kernel matmul 1 1 1 --json --explain", "--json and --explain each print the whole result"),
    ("kernel matmul 1 1 1 --bogus", "unexpected extra argument (--bogus)"),
    # kernel: bad files as machines
    ("kernel matmul 1 1 1 --machine missing.toml", "machine file missing.toml does not exist"),
    ("kernel matmul 1 1 1 --machine folder", "unknown machine 'folder'"),
    ("kernel matmul 1 1 1 --machine empty.toml", "missing 'id'"),
    ("kernel matmul 1 1 1 --machine trunc.toml", "is not valid TOML"),
    ("kernel matmul 1 1 1 --machine bin.dat", "is not UTF-8 text"),
    ("kernel matmul 1 1 1 --machine strpeak.toml", "strpeak.toml"),
    ("kernel matmul 1 1 1 --machine idnum.toml", "idnum.toml"),
    ("kernel matmul 1 1 1 --machine nanbw.toml", "nanbw.toml"),
    ("kernel matmul 1 1 1 --machine negbw.toml", "negbw.toml"),
    # kernel: outputs
    ("kernel matmul 1 1 1 --png nodir/x.png", "cannot write nodir/x.png (--png): folder nodir does not exist"),
    ("kernel matmul 1 1 1 --png afile/x.png", "afile is a file, not a folder"),
    ("kernel matmul 1 1 1 --png ro.csv", "it is read-only (mode 0444)"),
    ("kernel matmul 1 1 1 --png ''", "--png is an empty file name; give a file name, e.g. out.png"),
    ("kernel matmul 1 1 1 --png folder", "cannot write folder (--png): it is a folder"),
    ("kernel matmul 1 1 1 --png folder/", "it ends in a slash"),
    ("kernel matmul 1 1 1 --svg x.svg --png x.svg", "--svg and --png name the same file x.svg"),
    ("kernel matmul 1 1 1 --png x.svg", "--png writes PNG, but x.svg ends in .svg"),
    ("kernel matmul 1 1 1 --html nodir/x.html", "folder nodir does not exist"),
    ("kernel matmul 1 1 1 --levels-png nodir/x.png", "(--levels-png): folder nodir does not exist"),
    # the other kernels
    ("kernel nosuch 1", "No such command 'nosuch'"),
    ("kernel add 0", "N must be a positive integer, got 0"),
    ("kernel add -5", "N must be a positive integer, got -5"),
    ("kernel add 1.5", "N must be a positive integer, got '1.5'"),
    ("kernel add 2**53", "N must be a positive integer, got '2**53'"),
    ("kernel add 1 2", "unexpected extra argument (2)"),
    ("kernel add 1 --svg ro.csv", "(--svg): it is read-only"),
    ("kernel rmsnorm 1", "Missing argument 'COLS'"),
    ("kernel rmsnorm 0 8", "ROWS must be a positive integer, got 0"),
    ("kernel softmax x 8", "ROWS must be a positive integer, got 'x'"),
    ("kernel gelu 8 -8", "COLS must be a positive integer, got -8"),
    ("kernel silu 8 0", "COLS must be a positive integer, got 0"),
    ("kernel swiglu 8 1.5", "COLS must be a positive integer, got '1.5'"),
    ("kernel layernorm 8 NaN", "COLS must be a positive integer, got 'NaN'"),
    ("kernel layernorm 8 8 --dtype nope", "unknown dtype 'nope'"),
    ("kernel attention --head-dim 128", "Missing option '--seq'"),
    ("kernel attention --seq 0 --head-dim 128", "--seq must be a positive integer, got 0"),
    ("kernel attention --seq 8192 --head-dim 0", "--head-dim must be a positive integer, got 0"),
    ("kernel attention --seq 8192 --head-dim 128 --heads 0", "--heads must be a positive integer, got 0"),
    ("kernel attention --seq 8192 --head-dim 128 --heads 8 --kv-heads 3",
     "query heads (8) must be a multiple of key/value heads (3)"),
    ("kernel attention --seq 8192 --head-dim 128 --heads 8 --kv-heads 16",
     "query heads (8) must be a multiple of key/value heads (16)"),
    ("kernel attention --seq 8192 --head-dim 128 --fusion fused", "'fused' is not one of 'none', 'flash'"),
    ("kernel attention --seq 8192 --head-dim 128 --fusion ''", "'' is not one of 'none', 'flash'"),
    ("kernel attention --seq 8192 --head-dim 128 --tile 0x128", "expected 2 positive whole numbers joined by x"),
    ("kernel attention --seq 8192 --head-dim 128 --tile 128", "expected 2 positive whole numbers joined by x"),
    ("kernel attention --seq 8192 --head-dim 128 --exp-emulated 1.5", "must be from 0 to 1, got 1.5"),
    ("kernel attention --seq 8192 --head-dim 128 --exp-emulated -0.1", "must be from 0 to 1, got -0.1"),
    ("kernel attention --seq 8192 --head-dim 128 --exp-emulated nan", "must be from 0 to 1, got nan"),
    ("kernel attention --seq 8192 --head-dim 128 --exp-emulated inf", "must be from 0 to 1, got inf"),
    ("kernel attention --seq 8192 --head-dim 128 --kv-seq 0", "--kv-seq must be a positive integer, got 0"),
    ("kernel attention --seq 8192 --head-dim 128 --batch -1", "--batch must be a positive integer, got -1"),
    ("kernel attention --seq 8192 --head-dim 128 --seq 1k1", "--seq must be a positive integer, got '1k1'"),
    ("kernel custom --flop 1e9", "Missing option '--bytes'"),
    ("kernel custom --flop -1 --bytes 1e9", "--flop must be positive, got -1"),
    ("kernel custom --flop 0 --bytes 0", "--flop must be positive, got 0"),
    ("kernel custom --flop 1e9 --bytes 0", "--bytes must be positive, got 0"),
    ("kernel custom --flop nan --bytes 1e9", "cannot read 'nan' as a quantity in FLOP"),
    ("kernel custom --flop inf --bytes 1e9", "cannot read 'inf' as a quantity in FLOP"),
    ("kernel custom --flop 1e999 --bytes 1e9", "--flop"),
    ("kernel custom --flop '1 GB' --bytes 1e9", "'1 GB' is in bytes, expected FLOP"),
    ("kernel custom --flop 1e9 --bytes '1 TFLOP'", "'1 TFLOP' is in FLOP, expected bytes"),
    ("kernel custom --flop 1e9 --bytes ''", "cannot read '' as a quantity in bytes"),
    ("kernel custom --flop 1e9 --bytes 1e9 --name ''", "--name is empty"),  # was: a kernel with no name
    ("kernel custom --flop 1e9 --bytes 1e9 --machine /dev/zero", "is not a regular file"),
    # model: numbers
    ("model nosuch-model", "unknown model 'nosuch-model'; " + KNOWN),
    ("model 'gpt2\nrm -rf'", "unknown model 'gpt2\\nrm -rf'; did you mean gpt2?"),  # a newline shown escaped
    (f"model {'x' * 100_000}", "File name too long: xxxx"),  # was: the 100 KB name echoed whole
    ("model ''", "no config file at config.json"),
    (f"model {GPT2} --batch 0", "--batch must be a positive integer, got 0"),
    (f"model {GPT2} --batch -1", "--batch must be a positive integer, got -1"),
    (f"model {GPT2} --batch nan", "--batch must be a positive integer, got 'nan'"),
    (f"model {GPT2} --batch 1e3", "write it like 8192, 128k"),
    (f"model {GPT2} --batch 1,2", "--batch must be a positive integer, got '1,2'"),
    (f"model {GPT2} --batch ''", "--batch is empty"),
    (f"model {GPT2} --context 0", "--context must be a positive integer, got 0"),
    # the bad length refused before the other phase's flag is warned about (one line, not a warning and then it)
    (f"model {GPT2} --context 0 --prompt 8", "--context must be a positive integer, got 0"),
    (f"model {GPT2} --context 9007199254740993", "is too large"),
    (f"model {GPT2} --context {'9' * 400}", "is too large"),
    (f"model {GPT2} --phase prefill --context 512", "prefill takes --prompt P"),
    (f"model {GPT2} --phase decode --prompt 512", "decode takes --context L"),
    (f"model {GPT2} --phase sideways", "'sideways' is not one of 'prefill', 'decode'"),
    (f"model {GPT2} --logits some", "'some' is not one of 'last', 'all'"),
    (f"model {GPT2} --mla sideways", "'sideways' is not one of 'absorbed', 'expanded'"),
    # model: unknown names and empty values
    (f"model {GPT2} --weights-dtype fp7", "unknown dtype 'fp7'"),
    (f"model {GPT2} --weights-dtype ''", "--weights-dtype is empty"),  # was: the checkpoint's dtype, silently
    (f"model {GPT2} --kv-dtype ''", "--kv-dtype is empty"),
    (f"model {GPT2} --kv-dtype nope", "unknown dtype 'nope'"),
    (f"model {GPT2} --act-dtype nope", "unknown dtype 'nope'"),
    (f"model {GPT2} --act-dtype ''", "--act-dtype is empty"),
    (f"model {GPT2} --dtype ''", "--dtype is empty"),
    (f"model {GPT2} --fusion bogus", "'bogus' is not one of 'none', 'flash', 'fused'"),
    (f"model {GPT2} --fusion ''", "'' is not one of 'none', 'flash', 'fused'"),
    (f"model {GPT2} --machine nosuch", "unknown system 'nosuch'; " + KNOWN),
    (f"model {GPT2} --machine trunc.toml", "is not valid TOML"),
    (f"model {GPT2} --machine empty.json", "missing 'id'"),
    # model: --set and --experts-hit
    (f"model {GPT2} --set", "Option '--set' requires an argument"),
    (f"model {GPT2} --set foo", "--set takes KEY=VALUE (a config.json field), got 'foo'"),
    (f"model {GPT2} --set =3", "--set takes KEY=VALUE"),
    (f"model {GPT2} --set ''", "--set is empty"),
    (f"model {GPT2} --set n_head=abc", "field 'n_head' must be a positive integer"),
    (f"model {GPT2} --set n_head=5", "n_embd 768 is not a multiple of n_head 5"),
    (f"model {GPT2} --set no_such_field=3", "has no field 'no_such_field'"),
    (f"model {GPT2} --set n_layer=1e999", "field 'n_layer' must be a positive integer"),
    (f"model {GPT2} --set n_layer=NaN", "field 'n_layer' must be a positive integer"),
    (f"model {GPT2} --set n_layer=-1", "field 'n_layer' must be a positive integer"),
    (f"model {GPT2} --set n_layer=" + "[" * 5000, "n_layer"),  # deep nesting: no RecursionError
    ("model mixtral-8x7b --experts-hit 0", "--experts-hit must be a positive integer, got 0"),
    ("model mixtral-8x7b --experts-hit 9", "experts hit must be an integer in 1..8, got 9"),
    ("model mixtral-8x7b --experts-hit nan", "--experts-hit must be a positive integer, got 'nan'"),
    ("model mixtral-8x7b --experts-hit ''", "--experts-hit is empty"),
    # model: splits that do not divide the model, conflicting splits
    (f"model {GPT2} --tp 0", "--tp must be a positive integer, got 0"),
    (f"model {GPT2} --tp -2", "--tp must be a positive integer, got -2"),
    (f"model {GPT2} --tp 1.5", "--tp must be a positive integer, got '1.5'"),
    (f"model {GPT2} --tp 5", "--tp 5 does not divide gpt2's 12 query heads; try one of 1, 2, 3, 4, 6, 12"),
    (f"model {GPT2} --machine dgx-h100 --tp 16", "--tp 16 does not divide gpt2's 12 query heads"),
    ("model llama-3-70b --machine h100 --tp 3", "--tp 3 does not divide llama-3-70b's 64 query heads"),
    (f"model {GPT2} --pp 0", "--pp must be a positive integer, got 0"),
    (f"model {GPT2} --pp 13", "--pp 13 is more stages than gpt2's 12 layers"),
    (f"model {GPT2} --ep 2", "--ep 2 must divide the devices of a pipeline stage"),
    ("model mixtral-8x7b --ep 3", "--ep 3 must divide the devices of a pipeline stage"),
    (f"model {GPT2} --dp 3", "--batch 1 is not a multiple of --dp 3"),
    (f"model {GPT2} --dp 2 --batch 3", "--batch 3 is not a multiple of --dp 2"),
    (f"model {GPT2} --devices 0", "--devices must be a positive integer, got 0"),
    (f"model {GPT2} --devices 8 --tp 2", "--devices 8 but --tp × --pp × --dp = 2"),
    (f"model {GPT2} --memory-utilization 0", "--memory-utilization must be in (0, 1], got 0.0"),
    (f"model {GPT2} --memory-utilization 1.5", "--memory-utilization must be in (0, 1], got 1.5"),
    (f"model {GPT2} --memory-utilization -0.5", "--memory-utilization must be in (0, 1], got -0.5"),
    (f"model {GPT2} --memory-utilization nan", "--memory-utilization must be in (0, 1], got nan"),
    (f"model {GPT2} --memory-utilization inf", "--memory-utilization must be in (0, 1], got inf"),
    (f"model {GPT2} --memory-utilization abc", "--memory-utilization must be in (0, 1], got abc"),
    # found by the hypothesis mix below: the share is checked as the option is read, before the context warning
    (f"model {GPT2} --context 128k --memory-utilization 0", "--memory-utilization must be in (0, 1], got 0.0"),
    (f"model {GPT2} --json --explain", "--json and --explain each print the whole result"),
    # model: outputs
    (f"model {GPT2} --csv ''", "--csv is an empty file name; give a file name, e.g. out.csv"),
    (f"model {GPT2} --csv nodir/x.csv", "cannot write nodir/x.csv (--csv): folder nodir does not exist"),
    (f"model {GPT2} --csv ro.csv", "cannot write ro.csv (--csv): it is read-only"),
    (f"model {GPT2} --csv folder", "cannot write folder (--csv): it is a folder"),
    (f"model {GPT2} --csv afile/x.csv", "afile is a file, not a folder"),
    (f"model {GPT2} --csv a.csv --png a.csv", "--csv and --png name the same file a.csv"),
    (f"model {GPT2} --csv a.csv --png nodir/a.png", "folder nodir does not exist"),  # the CSV is not written
    (f"model {GPT2} --html nodir/x.html", "(--html): folder nodir does not exist"),
    (f"model {GPT2} --svg afile/x.svg", "afile is a file, not a folder"),
    (f"model {GPT2} --csv {'x' * 300}.csv", "(--csv): File name too long"),  # longer than NAME_MAX
    (f"model {GPT2} --csv {'x' * 100_000}.csv", "... (100,004 characters) (--csv): File name too long"),
    (f"model {GPT2} --csv loop", "cannot write loop (--csv): Too many levels of symbolic links"),
    (f"model {GPT2} --csv x.PNG", "--csv writes CSV, but x.PNG ends in .PNG; name it x.csv"),
    (f"model {GPT2} --csv /dev/full", "No space left on device"),  # a device written through, and full
    # model: bad config files
    ("model folder", "no config file at folder/config.json"),
    ("model empty.json", "config empty.json: not valid JSON"),
    ("model trunc.json", "config trunc.json: not valid JSON"),
    ("model bin.dat", "is not UTF-8 text"),
    ("model list.json", "expected a JSON object at the top level"),
    ("model wrongtypes.json", "'hidden_size' must be a positive integer"),
    ("model zero.json", "'num_attention_heads' must be a positive integer"),
    ("model missing.json", "no config file at missing.json"),
    ("model ro.csv", "ro.csv"),
    # sweep: malformed lists and ranges, unknown names, empty lists
    (f"sweep {GPT2} --batch 0:8", "range '0:8' must go from a positive start up to its end"),
    (f"sweep {GPT2} --batch 8:1", "range '8:1' must go from a positive start up to its end"),
    (f"sweep {GPT2} --batch 1:8:x1", "the step of '1:8:x1' must be x2 or more"),
    (f"sweep {GPT2} --batch 1:8:0", "the step of '1:8:0' must be 1 or more"),
    (f"sweep {GPT2} --batch 1:100000000:1", "is 100,000,000 values; at most 10,000"),
    (f"sweep {GPT2} --batch 1:2:3:4", "cannot read '1:2:3:4'; write a list like 1,8,64"),
    (f"sweep {GPT2} --batch ,,,", "--batch: no values given"),
    (f"sweep {GPT2} --batch ''", "--batch is empty"),
    (f"sweep {GPT2} --batch a:b", "cannot read 'a:b'"),
    (f"sweep {GPT2} --batch 1,,2,-3", "--batch must be a positive integer, got -3"),
    (f"sweep {GPT2} --batch 1:9007199254740993", "is too large"),
    (f"sweep {GPT2} --batch 1.5:8", "cannot read '1.5:8'"),
    (f"sweep {GPT2} --batch 1 --context 0", "--context must be a positive integer, got 0"),
    (f"sweep {GPT2} --batch 1 --context 1k:128k:x0", "the step of '1k:128k:x0' must be x2 or more"),
    (f"sweep {GPT2} --batch 1 --phase prefill --context 512", "prefill sweeps take --prompt, not --context"),
    (f"sweep {GPT2} --batch 1 --phase decode --prompt 512", "decode sweeps take --context, not --prompt"),
    (f"sweep {GPT2} --batch 1 --machine h100,nosuch", "unknown system 'nosuch'"),
    (f"sweep {GPT2} --batch 1 --machine ,", "--machine ',' names no machine"),
    (f"sweep {GPT2} --batch 1 --machine ''", "--machine is empty"),
    (f"sweep {GPT2} --batch 1 --kv-dtype bf16,nope", "unknown dtype 'nope'"),
    (f"sweep {GPT2} --batch 1 --kv-dtype ,", "--kv-dtype ',' names no dtype"),  # was: the default, silently
    (f"sweep {GPT2} --batch 1 --kv-dtype ''", "--kv-dtype is empty"),
    (f"sweep {GPT2} --batch 1 --weights-dtype ''", "--weights-dtype is empty"),
    (f"sweep {GPT2} --batch 1 --dtype ,,", "--dtype ',,' names no dtype"),
    (f"sweep {GPT2} --batch 1 --tp 0", "--tp must be a positive integer, got 0"),
    (f"sweep {GPT2} --batch 1 --tp 1,5", "--tp 5 does not divide gpt2's 12 query heads"),
    (f"sweep {GPT2} --batch 1 --tp ''", "--tp is empty"),
    (f"sweep {GPT2} --batch 1 --tp ,", "--tp: no values given"),
    (f"sweep {GPT2} --batch 4 --dp 3", "--batch 4 is not a multiple of --dp 3"),
    (f"sweep {GPT2} --batch 1:1024:1 --context 1:1024:1", "rows"),  # a grid of a million rows
    (f"sweep {GPT2} --format xml", "'xml' is not one of 'table', 'csv', 'json'"),
    (f"sweep {GPT2} --format csv --output ''", "--output is an empty file name"),
    (f"sweep {GPT2} --batch 1 --output nodir/x.txt", "cannot write nodir/x.txt (--output)"),
    (f"sweep {GPT2} --batch 1 --output ro.csv", "(--output): it is read-only"),
    (f"sweep {GPT2} --batch 1 --output x.csv --csv x.csv", "--output and --csv name the same file x.csv"),
    (f"sweep {GPT2} --batch 1 --png afile/p.png", "afile is a file, not a folder"),
    (f"sweep {GPT2} --batch 1 --svg folder", "cannot write folder (--svg): it is a folder"),
    ("sweep nosuch --batch 1", "unknown model 'nosuch'"),
    ("sweep trunc.json --batch 1", "not valid JSON"),
    (f"sweep {GPT2} --batch 1 --set n_head=0", "field 'n_head' must be a positive integer"),
    (f"sweep {GPT2} --batch 1 --experts-hit 0", "--experts-hit must be a positive integer, got 0"),
    # compare
    (f"compare {GPT2},nosuch", "unknown model 'gpt2,nosuch'; did you mean gpt2?"),
    ("compare ,", "unknown model ','"),
    ("compare", "Missing argument 'MODELS...'"),
    (f"compare {GPT2} --batch 0", "--batch must be a positive integer, got 0"),
    (f"compare {GPT2} --batch 8:1", "range '8:1' must go from a positive start up to its end"),
    (f"compare {GPT2} --context 1:2:3:4", "cannot read '1:2:3:4'"),
    (f"compare {GPT2} --machine nosuch", "unknown system 'nosuch'"),
    (f"compare {GPT2} --tp 5", "--tp 5 does not divide gpt2's 12 query heads"),
    (f"compare {GPT2} --kv-dtype bf16,xx", "unknown dtype 'xx'"),
    (f"compare {GPT2} --dtype ,,", "--dtype ',,' names no dtype"),
    (f"compare {GPT2} --format yaml", "'yaml' is not one of 'table', 'csv', 'json'"),
    (f"compare {GPT2} --output nodir/o.txt", "cannot write nodir/o.txt (--output)"),
    (f"compare {GPT2} --csv ro.csv", "(--csv): it is read-only"),
    (f"compare {GPT2} --output a.txt --csv a.txt", "--output and --csv name the same file a.txt"),
    (f"compare {GPT2} trunc.json", "config trunc.json: not valid JSON"),
    (f"compare {GPT2} --phase prefill --context 512", "prefill takes --prompt P"),
    (f"compare {GPT2} --memory-utilization 0", "No such option '--memory-utilization'"),
    # plan: SLOs nobody meets, conflicting objectives
    (f"plan {GPT2} --batch 0", "--batch must be a positive integer, got 0"),
    (f"plan {GPT2} --batch abc", "--batch must be a positive integer, got 'abc'"),
    (f"plan {GPT2} --objective speed", "'speed' is not one of 'time', 'throughput', 'latency'"),
    (f"plan {GPT2} --latency-target 0", "--latency-target must be positive, got 0"),
    (f"plan {GPT2} --latency-target -5ms", "--latency-target must be positive, got -5ms"),
    (f"plan {GPT2} --latency-target abc", "cannot read 'abc' as a quantity in seconds"),
    (f"plan {GPT2} --latency-target nan", "cannot read 'nan' as a quantity in seconds"),
    (f"plan {GPT2} --latency-target inf", "cannot read 'inf' as a quantity in seconds"),
    (f"plan {GPT2} --latency-target 5GB", "'5GB' is in bytes, expected seconds"),
    (f"plan {GPT2} --latency-target 1ns", "no split that fits meets the latency target 1 ns"),
    (f"plan {GPT2} --objective time --latency-target 5ms", "a latency target applies to the latency objective"),
    (f"plan {GPT2} --devices 0", "--devices must be a positive integer, got 0"),
    (f"plan {GPT2} --memory-utilization 2", "--memory-utilization must be in (0, 1], got 2.0"),
    (f"plan {GPT2} --machine nosuch", "unknown system 'nosuch'"),
    (f"plan {GPT2} --machine empty.json", "missing 'id'"),
    (f"plan {GPT2} --csv nodir/x.csv", "cannot write nodir/x.csv (--csv)"),
    (f"plan {GPT2} --csv ''", "--csv is an empty file name"),
    (f"plan {GPT2} --json --csv ro.csv", "(--csv): it is read-only"),
    (f"plan {GPT2} --phase prefill --context 100", "prefill takes --prompt P"),
    ("plan nosuch", "unknown model 'nosuch'"),
    ("plan llama-3.1-405b --machine h100 --devices 1", "no valid split of up to 1 devices of h100-sxm fits"),
    # train and plan --train: the step, the split, the training choices
    ("train gpt2 --global-batch 8", "give the sequence length: --seq S"),
    ("train gpt2 --seq 1024", "give the batch once"),
    ("train gpt2 --seq 0 --global-batch 8", "--seq must be a positive integer, got 0"),
    ("train gpt2 --seq 1024 --global-batch 8 --tp 5", "--tp 5 does not divide gpt2's 12 query heads"),
    ("train gpt2 --seq 1024 --global-batch 8 --pp 13", "--pp 13 is more stages than gpt2's 12 layers"),
    ("train gpt2 --seq 1024 --global-batch 8 --dp 3", "is not divisible by dp × micro-batch = 3 × 1 = 3; try 6, 9"),
    ("train gpt2 --seq 1024 --global-batch 8 --zero 2", "ZeRO stage 2 shards over the data-parallel ranks"),
    ("train gpt2 --seq 1024 --global-batch 2 --pp 4", "are fewer than the 4 pipeline stages"),
    ("train gpt2 --seq 1024 --global-batch 8 --cp 3", "--cp 3 does not divide the sequence of 1024 tokens"),
    ("train gpt2 --seq 1024 --global-batch 8 --tokens 15X", "--tokens must be a token count like 15T"),
    ("train gpt2 --seq 1024 --global-batch 8 --fsdp --zero 1", "--fsdp is ZeRO stage 3; it contradicts --zero 1"),
    ("train gpt2 --seq 1024 --global-batch 8 --png x.svg", "--png writes PNG"),
    ("train gpt2 --seq 1024 --global-batch 8 --json --explain", "give one of them"),
    ("train gpt2 --seq 1024 --global-batch 8 --virtual-stages 2", "give --pp above 1"),
    ("train gpt2 --seq 1024 --tokens-per-batch 1000", "is not a whole number of 1024-token sequences"),
    ("train gpt2 --seq 1024 --global-batch 8 --price-per-device-hour -1", "must be a positive number"),
    # --memory-utilization is one type (cli.common.Share) with one message in model, serve, plan and train
    ("train gpt2 --seq 1024 --global-batch 8 --memory-utilization 0",
     "--memory-utilization must be in (0, 1], got 0.0"),
    ("train gpt2 --seq 1024 --global-batch 8 --memory-utilization abc",
     "--memory-utilization must be in (0, 1], got abc"),
    ("plan --train gpt2 --seq 1024 --global-batch 8 --memory-utilization 1.5",
     "--memory-utilization must be in (0, 1], got 1.5"),
    ("train gpt2 --seq 1024 --global-batch 8 --machine nosuch", "unknown system 'nosuch'"),
    ("plan --train nosuch --seq 1024 --global-batch 8", "unknown model 'nosuch'"),
    ("plan --train gpt2 --global-batch 8", "give the sequence length"),
    ("plan --train llama-3.1-405b --machine dgx-h100 --devices 8 --seq 8192 --global-batch 8",
     "no valid split of 8 devices of dgx-h100 fits"),
    # serve: numbers, SLOs nobody meets, bands, what-ifs, calibration files
    ("serve gpt2 --output 16", "Missing option '--prompt'"),
    ("serve gpt2 --prompt 16", "Missing option '--output'"),
    ("serve gpt2 --prompt 0 --output 16", "--prompt must be a positive integer, got 0"),
    (f"{SERVE.replace('--output 16', '--output -1')}", "--output must be a positive integer, got -1"),
    (f"{SERVE.replace('--output 16', '--output 1.5')}", "--output must be a positive integer, got '1.5'"),
    (f"{SERVE} --batch 0", "--batch must be a positive integer, got 0"),
    (f"{SERVE} --itl-slo 0", "--itl-slo must be positive, got 0"),
    (f"{SERVE} --itl-slo 1ns", "--itl-slo 1 ns: no batch meets it"),
    (f"{SERVE} --ttft-slo 1ns", "--ttft-slo 1 ns: no batch meets it"),
    (f"{SERVE} --itl-slo abc", "cannot read 'abc' as a quantity in seconds"),
    (f"{SERVE} --itl-slo nan", "cannot read 'nan' as a quantity in seconds"),
    (f"{SERVE} --itl-slo 5GB", "'5GB' is in bytes, expected seconds"),
    (f"{SERVE} --price-per-device-hour -1", "must be a positive number, at most 1e+06; got -1"),
    (f"{SERVE} --price-per-device-hour 0", "must be a positive number, at most 1e+06; got 0"),
    (f"{SERVE} --price-per-device-hour nan", "got nan"),
    (f"{SERVE} --price-per-device-hour inf", "got inf"),
    (f"{SERVE} --price-per-device-hour 1e7", "got 1e7"),
    (f"{SERVE} --price-per-device-hour abc", "got abc"),
    (f"{SERVE} --efficiency-comm 0.8:0.7", "low 0.8 is above high 0.7"),
    (f"{SERVE} --efficiency-comm 0:0.5", "an efficiency is a share of the roofline in (0, 1], got 0"),
    (f"{SERVE} --efficiency-comm 0.5:1.5", "in (0, 1], got 1.5"),
    (f"{SERVE} --efficiency-comm nan:0.5", "in (0, 1], got nan"),
    (f"{SERVE} --efficiency-comm a:b", "cannot read 'a:b'; write LOW:HIGH"),
    (f"{SERVE} --efficiency-comm ''", "--efficiency-comm"),
    (f"{SERVE} --step-overhead 50us:20us", "low 50us is above high 20us"),
    (f"{SERVE} --step-overhead -1us:20us", "a time is not negative"),
    (f"{SERVE} --step-overhead 1GB:2GB", "'1GB' is in bytes, expected seconds"),
    (f"{SERVE} --step-overhead 1:2:3", "write LOW:HIGH times"),
    (f"{SERVE} --chunk 0", "--chunk must be a positive integer, got 0"),
    (f"{SERVE} --chunk abc", "--chunk must be a positive integer, got 'abc'"),
    (f"{SERVE} --disaggregate 0:4", "write P:D with positive device counts"),
    (f"{SERVE} --disaggregate 4", "write P:D with positive device counts"),
    (f"{SERVE} --disaggregate a:b", "write P:D, the prefill and decode devices"),
    (f"{SERVE} --disaggregate 5:5", "the prefill group runs TP 5"),
    (f"{SERVE} --disaggregate 1:1:1", "write P:D"),
    (f"{SERVE} --draft nosuch --acceptance 0.8", "unknown model 'nosuch'"),
    (f"{SERVE} --draft gpt2", "--draft needs --acceptance a"),
    (f"{SERVE} --draft ''", "--draft is empty"),
    (f"{SERVE} --draft gpt2 --acceptance 0", "--acceptance must be in (0, 1]"),
    (f"{SERVE} --draft gpt2 --acceptance 1.5", "--acceptance must be in (0, 1]"),
    (f"{SERVE} --draft gpt2 --acceptance nan", "--acceptance must be in (0, 1]"),
    (f"{SERVE} --draft gpt2 --acceptance 0.8 --draft-tokens 0", "--draft-tokens must be a positive integer"),
    (f"{SERVE} --acceptance 0.8", "--draft-tokens and --acceptance need --draft MODEL"),
    # the verify step checks k + 1 tokens at the mid-generation context 16 + 16 // 2 = 24: at most 23 drafted
    # (was: "earlier_global: more queries (1000001) than keys (24)", an internal op's name)
    (f"{SERVE} --draft gpt2 --acceptance 0.5 --draft-tokens 1000000", "draft at most 23 tokens"),
    (f"{SERVE} --draft trunc.json --acceptance 0.5", "config trunc.json: not valid JSON"),
    (f"{SERVE} --calibration missing.json", "calibration file missing.json does not exist"),
    (f"{SERVE} --calibration folder", "calibration file folder is a folder"),
    (f"{SERVE} --calibration empty.json", "empty.json: not JSON"),
    (f"{SERVE} --calibration trunc.json", "trunc.json: not JSON"),
    (f"{SERVE} --calibration bin.dat", "is not UTF-8 text"),
    (f"{SERVE} --calibration list.json", "list.json: neither an expected-time file"),
    (f"{SERVE} --calibration ''", "--calibration is an empty file name"),  # was: no calibration, silently
    (f"{SERVE} --csv nodir/x.csv", "cannot write nodir/x.csv (--csv)"),
    (f"{SERVE} --png ro.csv", "(--png): it is read-only"),
    (f"{SERVE} --html ''", "--html is an empty file name"),
    (f"{SERVE} --json --explain", "--json and --explain each print the whole result"),
    (f"{SERVE} --tp 5", "--tp 5 does not divide gpt2's 12 query heads"),
    (f"{SERVE} --machine nosuch", "unknown system 'nosuch'"),
    (f"{SERVE} --memory-utilization 0", "--memory-utilization must be in (0, 1]"),
    ("serve gpt2 --prompt 2000 --output 16", "2016 tokens exceeds gpt2's context of 1024"),
    ("serve llama-3.1-405b --prompt 16 --output 16 --machine h100 --tp 8", "take a larger split (roofline plan)"),
    # machine, machines, models
    ("machine", "Missing argument 'NAME'"),
    ("machine nosuch", "unknown machine or system 'nosuch'"),
    ("machine ''", "unknown machine or system ''"),
    ("machine h100 extra", "unexpected extra argument (extra)"),
    ("machine folder", "unknown machine or system 'folder'"),
    ("machine trunc.toml", "is not valid TOML"),
    ("machine bin.dat", "is not UTF-8 text"),
    ("machine empty.toml", "missing 'id'"),
    ("machine missing.toml", "machine file missing.toml does not exist"),
    ("machine strpeak.toml", "strpeak.toml"),
    ("machine h100 --json --explain", "--json and --explain each print the whole result"),
    ("machines nosuch", "unknown machine or system 'nosuch'"),
    ("machines h100 nosuch", "unknown machine or system 'nosuch'"),
    ("machines trunc.toml", "is not valid TOML"),
    ("machines --dtype fp7", "unknown dtype 'fp7'"),  # was: ignored, the whole catalog printed
    ("machines --dtype ''", "--dtype is empty"),
    ("machines --dtype ,", "--dtype ',' names no dtype"),
    ("machines --dtype fp8", "--dtype picks the roofs --png/--svg draw"),  # was: ignored without a word
    ("machines a100 --dtype fp4 --png x.png", "fp4"),  # a dtype the machine has no peak for
    ("machines --png x.png", "name the machines to draw"),
    ("machines h100 --png nodir/x.png", "cannot write nodir/x.png (--png)"),
    ("machines h100 --png ro.csv", "(--png): it is read-only"),
    ("machines h100 --png ''", "--png is an empty file name"),
    ("machines h100 --svg folder", "cannot write folder (--svg): it is a folder"),
    ("machines h100 --png a.png --svg a.png", "--png and --svg name the same file a.png"),
    ("machines --systems --dtype bf16", "--systems lists systems"),
    ("machines --systems --png x.png", "--systems lists systems"),
    ("machines dgx-h100 --png x.png", "dgx-h100 is a system of 8"),
    ("models extra", "unexpected extra argument (extra)"),
    ("models --bogus", "No such option '--bogus'"),
    ("nosuch-command", "No such command 'nosuch-command'"),
    # measure: refused before anything is measured
    ("measure --device tpu", "'tpu' is not one of 'cpu', 'cuda'"),
    ("measure --buffer-size 0", "--buffer-size '0' is out of range: give 1 MiB to 64 GiB"),
    ("measure --buffer-size -1", "is out of range"),
    ("measure --buffer-size 1KiB", "is out of range"),
    ("measure --buffer-size 1TiB", "is out of range"),
    ("measure --buffer-size abc", "cannot read 'abc' as a quantity in bytes"),
    ("measure --buffer-size nan", "cannot read 'nan' as a quantity in bytes"),
    ("measure --buffer-size '1 TFLOP'", "'1 TFLOP' is in FLOP, expected bytes"),
    ("measure --save nodir/x.toml", "cannot write nodir/x.toml (--save)"),
    ("measure --save ro.csv", "(--save): it is read-only"),
    ("measure --save ''", "--save is an empty file name; give a file name, e.g. my-machine.toml"),
    ("measure --save folder", "cannot write folder (--save): it is a folder"),
    ("measure --save afile/x.toml", "afile is a file, not a folder"),
    ("measure --dtype fp7", "unknown dtype 'fp7'"),
    ("measure --dtype ''", "--dtype is empty"),
    ("measure --backend jax", "'jax' is not one of 'numpy', 'torch'"),
    ("measure --id ''", "--id is empty"),  # was: 3 minutes of measuring, then nothing
    ("measure --devices 0", "--devices must be a positive integer, got 0"),
    ("measure --devices 2", "--devices applies to --collectives only"),
    ("measure --budget 0", "--budget must be positive, got 0"),
    ("measure --budget -5", "--budget must be positive, got -5"),
    ("measure --budget abc", "cannot read 'abc' as a quantity in seconds"),
    ("measure --budget 5", "--budget applies to --collectives only"),
    ("measure --device-file x.toml", "--device-file applies to --collectives only"),
    ("measure --save-calibration x.json", "--save-calibration applies to --collectives only"),
    ("measure --collectives --devices -1", "--devices must be a positive integer, got -1"),
    ("measure --collectives --budget inf", "cannot read 'inf' as a quantity in seconds"),
    ("measure --collectives --dtype bf16", "--dtype measure ceilings, not --collectives"),
    ("measure --collectives --buffer-size 1GiB", "--buffer-size measure ceilings, not --collectives"),
    ("measure --collectives --device-file missing.toml --save x.toml", "machine file missing.toml does not exist"),
    ("measure --collectives --device-file trunc.toml --save x.toml", "is not valid TOML"),
    ("measure --collectives --device-file '' --save x.toml", "--device-file is an empty file name"),
    ("measure --collectives --save-calibration x.json", "--save-calibration needs the link's bandwidth"),
    ("measure --collectives --save nodir/x.toml", "cannot write nodir/x.toml (--save)"),
    ("measure --json --save ro.csv", "(--save): it is read-only"),
    # bench: refused before the roof is measured
    ("bench --device tpu", "'tpu' is not one of 'cpu', 'cuda'"),
    ("bench --repeats 0", "0 is not in the range x>=1"),
    ("bench --repeats -1", "-1 is not in the range x>=1"),
    ("bench --repeats abc", "'abc' is not a valid integer range"),
    ("bench --only nosuch", "no bench case starts with nosuch"),  # was: after 90 s of measuring the roof
    ("bench --only ''", "--only is empty"),  # was: the whole bench
    ("bench --dtype fp7", "unknown dtype 'fp7'"),
    ("bench --dtype fp8", "bench runs in fp64, fp32, bf16 or fp16"),  # was: after measuring the roof
    ("bench --machine nosuch", "unknown machine 'nosuch'"),
    ("bench --machine trunc.toml", "is not valid TOML"),
    ("bench --machine ''", "--machine is empty"),
    ("bench --png nodir/x.png", "cannot write nodir/x.png (--png)"),
    ("bench --html ro.csv", "(--html): it is read-only"),
    ("bench --save-calibration ''", "--save-calibration is an empty file name"),
    ("bench --save-calibration afile/x.json", "afile is a file, not a folder"),
    ("bench --png x.png --html x.png", "--png and --html name the same file x.png"),
    # trace: options go before SCRIPT; all refused before the script runs
    ("trace missing.py", "no script at missing.py"),
    ("trace binary.py", "binary.py is not a Python script (it holds NUL bytes"),  # was: Python's SyntaxError too
    ("trace folder", "is a directory"),
    ("trace --machine nosuch marker.py", "unknown machine 'nosuch'"),  # was: after the script ran
    ("trace --machine trunc.toml marker.py", "is not valid TOML"),
    ("trace --dtype fp7 marker.py", "unknown dtype 'fp7'"),  # was: after the script ran
    ("trace --dtype '' marker.py", "--dtype is empty"),
    ("trace --fusion flash marker.py", "'flash' is not one of 'traced', 'none'"),
    ("trace --png nodir/x.png marker.py", "cannot write nodir/x.png (--png)"),
    ("trace --html ro.csv marker.py", "(--html): it is read-only"),
    ("trace --png '' marker.py", "--png is an empty file name"),
    ("trace --png a.png --html a.png marker.py", "--png and --html name the same file a.png"),
    # profile
    ("profile missing.py", "no script at missing.py"),
    ("profile binary.py", "binary.py is not a Python script (it holds NUL bytes"),
    ("profile folder", "is a directory"),
    ("profile --machine nosuch marker.py", "unknown machine 'nosuch'"),  # was: after the script ran
    ("profile --dtype fp7 marker.py", "unknown dtype 'fp7'"),  # was: after the script ran
    ("profile --against nosuch marker.py", "unknown model 'nosuch'"),  # was: after the script ran
    ("profile --against trunc.json marker.py", "config trunc.json: not valid JSON"),
    ("profile --top -1 marker.py", "--top must be 0 (all) or a positive integer, got -1"),  # was: cut at the end
    ("profile --top abc marker.py", "--top must be 0 (all) or a positive integer, got 'abc'"),
    ("profile --csv nodir/x.csv marker.py", "cannot write nodir/x.csv (--csv)"),
    ("profile --save-trace ro.csv marker.py", "(--save-trace): it is read-only"),
    ("profile --save-trace '' marker.py", "--save-trace is an empty file name"),
    # import: bad traces and CSVs, options
    ("import missing.json", "no trace file at missing.json"),
    ("import folder", "is a directory"),
    ("import empty.json", "empty.json is not valid JSON"),
    ("import bin.dat", "bin.dat is not a text file"),
    ("import trunc_trace.json", "a truncated trace?"),
    ("import notrace.json", "not a Chrome/Kineto trace (no traceEvents list)"),
    ("import list.json", "not a Chrome/Kineto trace"),
    ("import noevents.json", "has no operator or kernel events"),
    ("import trunc.toml", "is not valid JSON"),
    ("import bad.csv", "is not an Nsight Compute raw CSV"),
    ("import bad.csv --ncu bad.csv", "--ncu joins a CSV to a Kineto trace"),
    ("import trace.json --machine nosuch", "unknown machine 'nosuch'"),
    ("import trace.json --dtype fp7", "unknown dtype 'fp7'"),
    ("import trace.json --dtype ''", "--dtype is empty"),
    ("import trace.json --top -5", "--top must be 0 (all) or a positive integer, got -5"),
    ("import trace.json --against nosuch", "unknown model 'nosuch'"),
    ("import trace.json --against ''", "--against is empty"),
    ("import trace.json --ncu missing.csv", "no CSV file at missing.csv"),
    ("import trace.json --ncu bad.csv", "is not an Nsight Compute raw CSV"),
    ("import trace.json --ncu bin.dat", "bin.dat is not a text file"),
    ("import trace.json --ncu empty.json", "is not an Nsight Compute raw CSV"),
    ("import trace.json --ncu ''", "--ncu is empty"),  # was: no --ncu, silently
    ("import trace.json --csv nodir/x.csv", "cannot write nodir/x.csv (--csv)"),
    ("import trace.json --png x.png --html x.png", "--png and --html name the same file x.png"),
    ("import trace.json --json --png ''", "--png is an empty file name"),
    # control characters in a name: shown escaped, so the error stays one line and the terminal runs no escape
    ("import trace.json --ncu 'a\nb.csv'", "no CSV file at a\\nb.csv"),  # was: the error split over two lines
    (f"{SERVE} --calibration '\x1b[2Jx.json'", "calibration file \\x1b[2Jx.json does not exist"),
    (f"model {GPT2} --csv 'a\nb/x.csv'", "cannot write a\\nb/x.csv (--csv): folder a\\nb does not exist"),
    # an output that is an input, or two outputs that are one file, by device and inode (issue 24)
    ("import trace.json --csv trace.json", "--csv trace.json is the file TRACE trace.json that this command reads"),
    ("import hardtrace.json --png trace.json", "--png trace.json is the file TRACE hardtrace.json"),  # a hard link
    ("import trace.json --csv linktrace.csv", "--csv linktrace.csv is the file TRACE trace.json"),  # a symlink
    ("import trace.json --ncu bad.csv --csv bad.csv", "--csv bad.csv is the file --ncu bad.csv"),
    (f"{SERVE} --calibration cal.json --csv cal.json", "--csv cal.json is the file --calibration cal.json"),
    (f"{SERVE} --machine ./m.toml --csv m.toml", "--csv m.toml is the file --machine ./m.toml"),
    (f"model {GPT2} --csv hl.csv --html hl.html", "--csv and --html name the same file hl.html"),
    (f"model {GPT2} --machine m.toml --png m.toml", "--png m.toml is the file --machine m.toml"),
    ("model zero.json --html zero.json", "--html zero.json is the file MODEL zero.json"),
    (f"sweep {GPT2} --batch 1 --machine h100,m.toml --csv m.toml", "--csv m.toml is the file --machine m.toml"),
    (f"compare {GPT2} zero.json --output zero.json", "--output zero.json is the file MODELS zero.json"),
    (f"plan {GPT2} --machine m.toml --csv m.toml", "--csv m.toml is the file --machine m.toml"),
    ("kernel matmul 1 1 1 --machine m.toml --svg m.toml", "--svg m.toml is the file --machine m.toml"),
    ("kernel matmul 1 1 1 --calibration cal.json --html cal.json", "--html cal.json is the file --calibration"),
    ("machines h100 m.toml --png m.toml", "--png m.toml is the file NAMES m.toml"),
    ("trace --png marker.py marker.py", "--png marker.py is the file SCRIPT marker.py"),
    ("profile --csv marker.py marker.py", "--csv marker.py is the file SCRIPT marker.py"),
    ("profile --against zero.json --csv zero.json marker.py", "--csv zero.json is the file --against zero.json"),
    # a machine with no [interconnect] (a measured CPU): one device runs, a split is refused naming it (issue 24)
    (f"model {GPT2} --machine nolink.toml --tp 2", "the split TP 2 spreads the model over 2 devices, but my-cpu "
                                                   "has no [interconnect]"),
    (f"{SERVE} --machine nolink.toml --tp 2", "but my-cpu has no [interconnect]"),
    (f"sweep {GPT2} --batch 1 --machine nolink.toml --tp 1,2", "but my-cpu has no [interconnect]"),
    # diff
    ("diff trace.json", "Missing option '--config'"),
    ("diff missing.json --config gpt2", "no trace file at missing.json"),
    ("diff trace.json --config nosuch", "unknown model 'nosuch'"),
    ("diff trace.json --config trunc.json", "config trunc.json: not valid JSON"),
    ("diff trace.json --config ''", "--config is empty"),
    ("diff trace.json --config gpt2 --batch 0", "--batch must be a positive integer, got 0"),
    ("diff trace.json --config gpt2 --seq 0", "--seq must be a positive integer, got 0"),
    ("diff trace.json --config gpt2 --step 0", "--step must be a positive integer, got 0"),
    ("diff trace.json --config gpt2 --phase middle", "'middle' is not one of 'prefill', 'decode'"),
    ("diff trace.json --config gpt2 extra", "extra arguments after a trace file: extra"),
    ("diff trunc_trace.json --config gpt2", "a truncated trace?"),
    ("diff bin.dat --config gpt2", "bin.dat is not a text file"),
    ("diff folder --config gpt2", "is a directory"),
    ("diff marker.py --config nosuch", "unknown model 'nosuch'"),  # the config first: the script never runs
    ("diff binary.py --config gpt2", "binary.py is not a Python script (it holds NUL bytes"),
    # the measured tables (issue 20): refused before any table is opened
    # collective: unknown kind or algorithm, NVLS without NVSwitch, the custom kernels across nodes, bad sizes
    ("collective all-reduce 1MiB --algorithm foo", "unknown --algorithm 'foo'"),
    ("collective all-sum 1MiB", "unknown collective 'all-sum'"),
    ("collective all-reduce 0B", "SIZE must be positive"),
    ("collective all-reduce ''", "SIZE is empty"),
    ("collective all-reduce nan", "cannot read 'nan' as a quantity in bytes"),
    ("collective all-reduce 1MiB --machine l40s-pcie-8 --algorithm nvls", "l40s-pcie-8 has no NVLink SHARP"),
    ("collective all-reduce 1MiB --devices 16 --algorithm two-shot", "runs inside one node"),
    ("collective all-reduce 1MiB --devices 1", "--devices must be at least 2"),
    ("collective all-reduce 1MiB --machine nosuch", "unknown system 'nosuch'"),
    # expert parallel as deployed: replicas that do not divide, options without --ep or without experts
    ("model deepseek-v3 --machine hgx-h200 --dp 144 --ep 144 --batch 144 --redundant-experts 30",
     "286 slots do not divide over --ep 144; try --redundant-experts 32"),
    ("model deepseek-v3 --machine hgx-h200 --redundant-experts 32", "--redundant-experts 32 needs --ep > 1"),
    ("model gpt2 --two-batch-overlap", "gpt2 is not a mixture of experts"),
    ("model deepseek-v3 --dp 8 --ep 8 --batch 8 --dispatch-dtype fp16", "use fp8"),
    ("validate --engine nosuch", "'nosuch' is not one of 'trtllm', 'vllm', 'sglang'"),
    ("validate --kind nosuch", "'nosuch' is not one of 'gemm', 'attention'"),
    ("validate --max-rows -1", "--max-rows must be 0 (every row) or more, got -1"),
    ("validate --json --csv", "--json and --csv each print the whole result"),
    ("calibrate --machine h100", "Missing option '--from'"),
    ("calibrate --from nowhere --machine h100", "'nowhere' is not 'aiconfigurator'"),
    ("calibrate --from aiconfigurator --machine h100 --max-rows 0", "--max-rows must be a positive integer, got 0"),
]


def _id(argv: str) -> str:
    return argv if len(argv) <= 70 else argv[:60] + "..."


# cases whose command says "needs torch" before it reaches the argument under test (bench, trace and
# measure --collectives check for torch first; profile and diff check the script's path, then torch): without
# torch that is their one line, so these run where torch is installed (CI) and are skipped, with the reason,
# in a quick loop without it
NEEDS_TORCH = {
    "measure --collectives --device-file missing.toml --save x.toml",
    "measure --collectives --device-file trunc.toml --save x.toml",
    "measure --collectives --save nodir/x.toml",
    "bench --only nosuch",
    "bench --dtype fp7",
    "bench --dtype fp8",
    "bench --machine nosuch",
    "bench --machine trunc.toml",
    "trace missing.py",
    "trace binary.py",
    "trace --machine nosuch marker.py",
    "trace --machine trunc.toml marker.py",
    "trace --dtype fp7 marker.py",
    "trace --png nodir/x.png marker.py",
    "trace --html ro.csv marker.py",
    "trace --png a.png --html a.png marker.py",
    "profile missing.py",
    "diff binary.py --config gpt2",
    "bench --machine /dev/zero",
    "trace fifo",
    "trace --png marker.py marker.py",
}


def _cases(cases: list[tuple[str, str]]) -> list[Any]:
    return [pytest.param(a, f, id=_id(a), marks=[pytest.mark.torch] if a in NEEDS_TORCH else []) for a, f in cases]


@pytest.mark.parametrize(("argv", "fragment"), _cases(REFUSED))
def test_refused_in_one_line_and_nothing_touched(argv: str, fragment: str, inside: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code = main(shlex.split(argv))
    out, err = capsys.readouterr()
    line = one_line(err, "roofline: error: ")
    assert code == 2, (code, err)
    assert out == "", out
    assert fragment in line, line


# legal but odd: the command runs, and one warning line says what it did about it
WARNED: list[tuple[str, str]] = [
    # beyond the trained length: analysed anyway, and said
    (f"model {GPT2} --context 100000 --json", "beyond gpt2's max_position_embeddings (1024); analysed anyway"),
    # an option that does not apply to this model is ignored, and said
    (f"model {GPT2} --experts-hit 3 --json", "--experts-hit ignored: gpt2 is not a mixture of experts"),
    (f"model {GPT2} --mla expanded --json", "--mla expanded ignored: gpt2 has no multi-head latent attention"),
    # a model that does not fit one device: analysed, and the split that fits named
    ("model llama-3-70b --machine h100 --json", "the smallest valid split that fits is TP 2"),
    # decode takes --context; --prompt beside it is ignored, and said
    (f"model {GPT2} --context 512 --prompt 512 --json", "--prompt 512 ignored"),
    (f"sweep {GPT2} --batch 1 --context 512 --prompt 512 --format json", "--prompt ignored"),
    # a batch that does not fit in memory: the curve is drawn, and the limit named
    (f"{SERVE} --batch 100000000 --json", "batch 100000000 does not fit"),
]


@pytest.mark.parametrize(("argv", "fragment"), WARNED, ids=[_id(a) for a, _ in WARNED])
def test_legal_but_odd_is_one_warning_line(argv: str, fragment: str, inside: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(shlex.split(argv))
    out, err = capsys.readouterr()
    line = one_line(err, "roofline: warning: ")
    assert code == 0, err
    assert fragment in line, line
    json.loads(out)  # the result itself is whole


# inputs a regression could hang on (a FIFO with no writer) or exhaust memory with (/dev/zero): each in
# its own process with a timeout, so that the suite ends whatever happens
SUBPROCESS: list[tuple[str, str]] = [
    ("model fifo", "is not a regular file"),
    ("model /dev/zero", "is not a regular file"),
    ("kernel add 1 --machine fifo", "is not a regular file"),  # was: "unknown machine 'fifo'"
    ("machine /dev/zero", "is not a regular file"),
    (f"{SERVE} --calibration fifo", "is not a regular file"),
    (f"{SERVE} --calibration /dev/zero", "is not a regular file"),
    ("bench --machine /dev/zero", "is not a regular file"),
    ("import fifo", "fifo"),
    ("import trace.json --ncu /dev/zero", "/dev/zero"),
    ("diff fifo --config gpt2", "fifo"),
    ("model zlink.json", "config file zlink.json is not a regular file"),  # a link to /dev/zero
    ("trace fifo", "fifo is not a regular file (a device, pipe or socket); give a Python script"),
    ("profile /dev/zero", "/dev/zero is not a regular file"),
]


@pytest.mark.parametrize(("argv", "fragment"), _cases(SUBPROCESS))
def test_pipes_and_devices_are_refused_without_reading(argv: str, fragment: str, inside: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "roofline.cli", *shlex.split(argv)], cwd=inside,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    line = one_line(proc.stderr, "roofline: error: ")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert fragment in line, line


def test_a_closed_stdout_is_one_line_not_a_silent_exit_0(arena: Path) -> None:
    # before: `roofline machines >&-` printed into nothing and exited 0
    proc = subprocess.run(["sh", "-c", 'exec "$0" -m roofline.cli machines >&-', sys.executable], cwd=arena,
                          stderr=subprocess.PIPE, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert one_line(proc.stderr, "roofline: error: ") == "roofline: error: standard output is closed; send it to a " \
                                                            "file or /dev/null"


def test_the_sweep_covers_every_command_and_is_large() -> None:
    # every command `roofline --help` lists (and each kernel kind) has rows refused here
    from roofline.cli import cli

    commands = set(cli.loaded())
    covered = {shlex.split(a)[0] for a, _ in REFUSED + SUBPROCESS}
    assert commands <= covered, commands - covered
    kinds = set(cli.loaded()["kernel"].commands)  # type: ignore[attr-defined]
    covered_kinds = {shlex.split(a)[1] for a, _ in REFUSED if a.startswith("kernel ")}
    assert kinds <= covered_kinds, kinds - covered_kinds
    assert len(REFUSED) + len(WARNED) + len(SUBPROCESS) >= 200


# --- the next class, looked for by fuzzing: any mix of options and hostile values ------------------------

_NUMS = ["0", "-1", "1", "3", "8", "1.5", "nan", "inf", "", " ", "1e3", "128k", "4Ki", "9007199254740992",
         "9007199254740993", "x", "1,2", "1:8", "8:1"]
_DTYPES = ["bf16", "fp8", "fp4", "nvfp4", "int4", "fp7", "", ",", "bf16,fp8"]
_MACHINES = ["h100", "b200", "mi300x", "dgx-h100", "nosuch", "", "folder", "trunc.toml", "empty.toml", "strpeak.toml",
             "nanbw.toml", "missing.toml"]
_BAD_OUTPUTS = ["nodir/x.png", "afile/x.png", "ro.csv", "", "folder", "loop", "folder/"]
_TIMES = ["0", "1ns", "30ms", "-5ms", "nan", "5GB", "abc"]
_SHARES = ["0", "0.5", "1", "1.5", "nan", "-1", "0.8:0.7", "a:b"]
_GRAMMAR: dict[tuple[str, ...], dict[str, list[str]]] = {
    ("kernel", "matmul", "64", "64", "64"): {"--batch": _NUMS, "--dtype": _DTYPES, "--storage-dtype": _DTYPES,
                                            "--machine": _MACHINES, "--tile": ["8x8x8", "0x1x1", "", "1x1"],
                                            "--png": _BAD_OUTPUTS, "--html": _BAD_OUTPUTS},
    ("kernel", "attention"): {"--seq": _NUMS, "--head-dim": _NUMS, "--heads": _NUMS, "--kv-heads": _NUMS,
                              "--fusion": ["none", "flash", "fused", ""], "--exp-emulated": _SHARES,
                              "--machine": _MACHINES, "--dtype": _DTYPES},
    ("kernel", "custom"): {"--flop": ["1e9", "0", "-1", "nan", "1e999", "1 GB", ""], "--bytes": ["1e9", "0", "1 TFLOP"],
                           "--machine": _MACHINES, "--dtype": _DTYPES, "--svg": _BAD_OUTPUTS},
    ("model", GPT2): {"--batch": _NUMS, "--context": _NUMS, "--prompt": _NUMS, "--phase": ["prefill", "decode", "x"],
                      "--tp": _NUMS, "--pp": _NUMS, "--dp": _NUMS, "--ep": _NUMS, "--devices": _NUMS,
                      "--kv-dtype": _DTYPES, "--weights-dtype": _DTYPES, "--machine": _MACHINES,
                      "--memory-utilization": _SHARES, "--fusion": ["none", "flash", "fused", "x"],
                      "--set": ["n_head=0", "n_layer=2", "foo", "n_embd=1e999"], "--csv": _BAD_OUTPUTS},
    ("sweep", GPT2): {"--batch": ["1,2", "1:4", "0:4", "", ",", "8:1"], "--context": ["128,256", "1k:2k", "0"],
                      "--tp": ["1,2", "1,5", ""], "--kv-dtype": _DTYPES, "--machine": ["h100,b200", ",", "nosuch"],
                      "--format": ["table", "csv", "json", "xml"], "--output": _BAD_OUTPUTS},
    ("serve", GPT2, "--prompt", "16", "--output", "16", "--batch", "4"): {
        "--itl-slo": _TIMES, "--ttft-slo": _TIMES, "--tp": _NUMS, "--machine": _MACHINES,
        "--efficiency-comm": _SHARES, "--step-overhead": ["20us:50us", "50us:20us", "-1us:2us"],
        "--chunk": _NUMS, "--disaggregate": ["2:2", "0:4", "5:5", "4"], "--price-per-device-hour": _SHARES,
        "--calibration": ["cal.json", "empty.json", "list.json", "missing.json", ""], "--csv": _BAD_OUTPUTS},
    ("plan", GPT2): {"--batch": _NUMS, "--context": _NUMS, "--latency-target": _TIMES, "--devices": _NUMS,
                     "--objective": ["time", "throughput", "latency", "x"], "--machine": _MACHINES,
                     "--csv": _BAD_OUTPUTS},
    ("machines",): {"--dtype": _DTYPES, "--png": _BAD_OUTPUTS, "--systems": []},
    ("collective", "all-reduce", "1MiB"): {"--machine": _MACHINES, "--devices": _NUMS, "--json": [],
                                          "--algorithm": ["auto", "ring", "tree", "nvls", "one-shot", "two-shot",
                                                          "x", ""]},
    ("compare", GPT2, "llama-3-8b"): {"--batch": ["1,8", "0", "8:1", ""], "--context": ["1k,2k", "0", "x"],
                                      "--kv-dtype": _DTYPES, "--machine": ["h100,b200", "nosuch", ","],
                                      "--tp": ["1,2", "3", ""], "--output": _BAD_OUTPUTS},
    ("import", "trace.json"): {"--machine": _MACHINES, "--dtype": _DTYPES, "--top": ["0", "-1", "5", "x"],
                               "--against": ["gpt2", "nosuch", "trunc.json", ""],
                               "--ncu": ["bad.csv", "missing.csv", "", "bin.dat"], "--csv": _BAD_OUTPUTS,
                               "--png": _BAD_OUTPUTS, "--json": []},
    ("diff", "trace.json", "--config", GPT2): {"--config": ["llama-3-8b", "nosuch", "trunc.json", "", "folder"],
                                               "--phase": ["prefill", "decode", "x"], "--batch": _NUMS,
                                               "--seq": _NUMS, "--step": _NUMS, "--json": []},
}


def _argv() -> st.SearchStrategy[list[str]]:
    def build(base: tuple[str, ...], picks: list[tuple[str, str]]) -> list[str]:
        argv = list(base)
        for flag, value in picks:
            argv += [flag] if not _GRAMMAR[base][flag] else [flag, value]
        return argv

    def for_base(base: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
        options = _GRAMMAR[base]
        pick = st.sampled_from(sorted(options)).flatmap(
            lambda flag: st.tuples(st.just(flag), st.sampled_from(options[flag] or [""])))
        return st.lists(pick, min_size=1, max_size=4).map(lambda picks: build(base, picks))

    return st.sampled_from(sorted(_GRAMMAR)).flatmap(for_base)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=_argv())
def test_any_mix_of_hostile_options_ends_clean(argv: list[str], arena: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # whatever the mix: exit 0 with only warnings on stderr, or exit 2 with one error line; never a
    # traceback, and no file in the folder touched (the outputs offered are all unwritable)
    monkeypatch.chdir(arena)
    before = snapshot(arena)
    code = main(argv)
    _, err = capsys.readouterr()
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        one_line(err, "roofline: error: ")
    else:
        assert "Traceback" not in err
        assert all(line.startswith("roofline: warning: ") for line in err.splitlines()), (argv, err)
    assert snapshot(arena) == before, argv
