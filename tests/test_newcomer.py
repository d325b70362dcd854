"""A newcomer's afternoon (issue 13): the words, tables and derivations a first user reads.

User-facing text never calls the source article "the seed"; the model table labels what is per run
and what is summed over runs; tables fit the terminal without cutting a number; --explain cites each
source once; compare says each warning once; `roofline models` lists the presets; a length the phase
ignores is said; a tight memory fit shows its headroom; scripts/test.sh says which python it uses.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import tokenize
from pathlib import Path

import click
import pytest

from roofline.cli import cli, main
from roofline.explain.model import TIGHT_HEADROOM, fit_words
from roofline.models import analyze_model
from roofline.models.config import preset_names
from roofline.units import format_flop, format_time

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30
BOX = ("┏", "┃", "┡", "│", "├", "└")  # the lines of a rich table (its title and notes are prose)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output to a pipe: no $COLUMNS, stdout not a terminal (as under capsys): every table at full width."""
    monkeypatch.delenv("COLUMNS", raising=False)


# ---- 1. "seed" in nothing a user reads ------------------------------------------------------------

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
    for name, command in group.commands.items():
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


# ---- 2. the model table: per run, all runs, one total row -------------------------------------------

def _row(out: str, name: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.startswith(f"│ {name} "))
    return [c.strip() for c in line.strip("│").split("│")]


def test_model_table_labels_per_run_and_all_runs(capsys: pytest.CaptureFixture[str], wide: None) -> None:
    code, out, _ = run(capsys, "model", "llama-3-8b", "--batch", "1", "--context", "4096")
    assert code == 0
    header = next(ln for ln in out.splitlines() if ln.startswith("┃ kernel"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == [
        "kernel", "×", "FLOPs/run", "bytes/run", "FLOP/B", "bound", "time, × runs", "share"]
    assert "× = runs per step (the layers that run it); FLOPs and bytes per run" in out
    qkv = _row(out, "qkv_proj")
    assert qkv[1] == "32"  # Llama 3 8B: 32 layers
    # one run: 2·M·N·K = 2 · 1 token · (32 + 2·8 heads)·128 · 4096 = 50,331,648 FLOP
    assert qkv[2] == format_flop(2 * 1 * (32 + 2 * 8) * 128 * 4096)
    a = analyze_model("llama-3-8b", "h100", "decode", 1, 4096)
    p = next(p for p in a.placements if p.name == "qkv_proj")
    assert qkv[6] == format_time(32 * p.time_s)  # the time column is the 32 runs'
    total = _row(out, "total (Σ × runs)")
    # the last row sums every kernel × its runs: the step's FLOPs and its time floor, all of the time
    assert total[2] == format_flop(sum(q.flop * q.count for q in a.placements)) == format_flop(a.flop)
    assert total[6] == format_time(a.time_s) and total[7] == "100.0%"
    assert "step total (every kernel × its runs)" in out


# ---- 2. tables fit the terminal ---------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ("model", "llama-3-70b", "--machine", "h100", "--tp", "8", "--batch", "64", "--context", "8192"),
    ("compare", "llama-3-70b", "qwen2.5-72b", "--machine", "h100,b200", "--batch", "8"),
    ("sweep", "llama-3-8b", "--batch", "1:64", "--context", "4096"),
    ("machines",),
    ("models",),
    ("plan", "llama-3-70b", "--machine", "dgx-h100", "--batch", "64", "--context", "8192"),
])
def test_tables_fit_80_columns_without_cutting_a_number(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        argv: tuple[str, ...]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    rows = [ln for ln in out.splitlines() if ln.startswith(BOX)]
    assert rows and max(len(ln) for ln in rows) <= 80
    assert "…" not in out  # nothing cut short
    monkeypatch.delenv("COLUMNS")
    _, full, _ = run(capsys, *argv)
    assert "leaves out" not in full  # a pipe: every column
    if "leaves out" in out:
        dropped = re.search(r"this table leaves out: ([^;]+);", out)
        assert dropped is not None
        full_header = next(ln for ln in full.splitlines() if ln.startswith("┃"))
        for column in dropped.group(1).split(", "):
            assert column in full_header and column not in next(ln for ln in out.splitlines() if ln.startswith("┃"))


def test_a_wide_terminal_keeps_every_column(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    _, out, _ = run(capsys, "model", "llama-3-8b")
    assert "share" in out and "leaves out" not in out
    full = max(len(ln) for ln in out.splitlines() if ln.startswith(BOX))
    monkeypatch.setenv("COLUMNS", str(full - 1))
    _, narrow, _ = run(capsys, "model", "llama-3-8b")
    # one column short: the least important column, share ("│ 100.0% " and its borders), goes, and the
    # note says so; the FLOPs and bytes of one run stay
    assert f"to fit {full - 1} columns this table leaves out: share;" in narrow and "FLOPs/run" in narrow
    assert max(len(ln) for ln in narrow.splitlines() if ln.startswith(BOX)) == full - len("│ 100.0% ") + 1 - 1


# ---- 2. --explain: each source once -----------------------------------------------------------------

def test_model_explain_cites_each_source_once(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model", "llama-3-70b", "--batch", "64", "--context", "8192", "--explain")
    assert code == 0
    datasheet = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
    sources = out[out.index("\nsources\n"):]
    body = out[:out.index("\nsources\n")]
    assert datasheet not in body  # the kernels cite [n]; 16 kernels used to repeat it 36 times
    listed = re.findall(r"^    \[(\d+)\] ", sources, flags=re.MULTILINE)
    assert listed == [str(n) for n in range(1, len(listed) + 1)] and len(listed) >= 2  # peak and DRAM at least
    assert len(re.findall(r"^    \[\d+\] .*", sources, flags=re.MULTILINE)) == len(set(
        re.findall(r"^    \[\d+\] (.*)", sources, flags=re.MULTILINE)))  # no source listed twice
    assert "DRAM bandwidth         = 3.35 TB/s   [2]" in body or "DRAM bandwidth         = 3.35 TB/s   [1]" in body


def test_embedding_explains_zero_flop_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "model", "llama-3-8b", "--explain")
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("embedding:"))
    assert line.endswith("= 0 FLOP (no arithmetic: it only moves bytes)") and "( units)" not in out


def test_kernel_explain_with_three_kernels_lists_sources_once(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "kernel", "attention", "--seq", "8192", "--head-dim", "128", "--fusion", "none",
                    "--explain")
    assert out.count("https://www.nvidia.com/en-us/data-center/h100/") == 1  # 3 kernels, one citation
    assert out.rstrip().splitlines()[-1].startswith("    [")


# ---- 2. compare: each warning once ------------------------------------------------------------------

def test_compare_groups_identical_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "compare", "llama-3-70b", "mistral-7b", "--machine", "h100,b200", "--batch", "64",
                       "--context", "32768")
    assert code == 0
    lines = err.strip().splitlines()
    # one line for the context past Llama 3's 8192 positions, naming both machines' rows
    beyond = [ln for ln in lines if "max_position_embeddings (8192)" in ln]
    assert len(beyond) == 1 and beyond[0].endswith("(llama-3-70b on h100-sxm, llama-3-70b on b200)")
    # Llama 3 70B at batch 64 × 32768 tokens: KV 64·32768·327,680 B = 640 GiB + 131 GiB of weights: TP 8
    # leaves 96 GiB a device over H100's 72 GiB usable (TP 8 × PP 2: 16 devices), under B200's 162 (8);
    # Mistral 7B keeps a 4096-token window: 64·4096·131,072 B = 32 GiB + 13.5 GiB fits one H100 and one B200
    fit = [ln for ln in lines if "do not fit" in ln]
    assert len(fit) == 1 and "2 of 4 rows" in fit[0]
    assert "llama-3-70b on h100-sxm (16 devices), llama-3-70b on b200 (8 devices)" in fit[0]
    assert len(lines) == 2


# ---- 3. roofline models -----------------------------------------------------------------------------

def test_models_lists_every_preset(capsys: pytest.CaptureFixture[str], wide: None) -> None:
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0
    rows = {r["id"]: r for r in json.loads(out)}
    assert sorted(rows) == preset_names() and len(rows) == 14
    llama = rows["llama-3-70b"]
    assert (llama["family"], llama["layers"], llama["attention"]) == ("llama", 80, "GQA 64/8")
    assert llama["params_total"] == 70_553_706_496  # Meta's "70B"
    assert rows["deepseek-v3"]["attention"] == "MLA 128 heads (latent 512 + 64)"  # kv_lora_rank + rope dims
    assert rows["mixtral-8x7b"]["experts"] == "2 of 8"
    assert rows["gemma-2-9b"]["attention"] == "GQA 16/8, window 4,096 on 21 of 42 layers"  # every other layer
    assert rows["gpt2"]["attention"] == "MHA 12"
    assert rows["llama-3-8b"]["default_dtypes"] == "bf16 / bf16 / bf16"
    code, text, _ = run(capsys, "models")
    assert code == 0 and all(f"│ {name} " in text for name in rows)


# ---- 3. a length the phase does not use -------------------------------------------------------------

def test_prefill_warns_that_it_ignores_context(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "model", "llama-3-8b", "--phase", "prefill", "--prompt", "1024", "--context",
                         "8192", "--json")
    assert code == 0 and json.loads(out)["prompt"] == 1024
    assert err.strip().splitlines() == [
        "roofline: warning: --context 8192 ignored: a prefill step's length is its prompt (--prompt 1024); "
        "--context is decode's"]
    code, out, err = run(capsys, "model", "llama-3-8b", "--phase", "prefill", "--context", "8192")
    assert code == 2 and out == ""
    assert err.startswith("roofline: error: prefill takes --prompt") and "write --prompt 8192" in err


def main_help(capsys: pytest.CaptureFixture[str]) -> str:
    main(["model", "--help"])
    return capsys.readouterr().out


def test_model_help_says_what_prefill_does_with_context(capsys: pytest.CaptureFixture[str]) -> None:
    words = " ".join(main_help(capsys).split())
    assert "Prefill refuses it alone and warns that it ignores it beside --prompt." in words
    assert f"under {TIGHT_HEADROOM:.0%} of the usable memory free is reported as tight" in words


# ---- 3. memory headroom -----------------------------------------------------------------------------

def test_fit_words_names_the_headroom_and_a_tight_fit() -> None:
    assert TIGHT_HEADROOM == 0.05
    # 140.2 of 141 GiB usable: 0.8 GiB = 0.57% left
    assert fit_words(140.2 * GiB, 141 * GiB) == "fits, tight (<5% headroom): 819 MiB (0.6%) left"
    # 36 of 72 GiB: half left
    assert fit_words(36 * GiB, 72 * GiB) == "fits, 36 GiB (50%) headroom"
    # exactly 5% left (68.4 of 72 GiB) is not tight; a byte less is
    assert fit_words(0.95 * 72 * GiB, 72 * GiB).startswith("fits, 3.6 GiB (5%) headroom")
    assert fit_words(0.95 * 72 * GiB + 2**20, 72 * GiB).startswith("fits, tight")


def test_model_reports_a_tight_fit(capsys: pytest.CaptureFixture[str], wide: None) -> None:
    # Llama 3 8B on one H100, batch 55 × 8192 tokens: KV 55·8192·131,072 B = 55 GiB, weights
    # 8.03e9 · 2 B = 15 GiB, workspace 13.9 MiB: 70 GiB of 0.9 · 80 = 72 GiB usable, 2.03 GiB (2.8%) left
    _, out, _ = run(capsys, "model", "llama-3-8b", "--batch", "55", "--context", "8192")
    assert "fits, tight (<5% headroom): 2.03 GiB (2.8%) left on one h100-sxm" in out
    _, out, _ = run(capsys, "model", "llama-3-8b", "--batch", "1", "--context", "8192")
    # batch 1: 1 GiB of KV; 72 − 15 − 1 − workspace = 56 GiB (78%) left
    assert re.search(r"fits, 56 GiB \(78%\) headroom on one h100-sxm", out)


# ---- 4. scripts/test.sh -----------------------------------------------------------------------------

def _fake(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)
    return path


def test_test_sh_names_its_python_and_uses_it_for_everything(tmp_path: Path) -> None:
    log = tmp_path / "log"
    python = _fake(tmp_path, "python-under-test", f'if [[ "$1" == -c ]]; then echo "{tmp_path}/python-under-test '
                                                  f'3.11.9"; exit 0; fi\necho "$*" >> {log}\n')
    _fake(tmp_path, "apt-get", f'echo "apt-get $*" >> {log}\n')
    env = {**os.environ, "PYTHON": str(python), "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh"), "-k", "nothing"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (f"scripts/test.sh: installing into and testing with "
                                           f"{tmp_path}/python-under-test 3.11.9")
    calls = [ln for ln in log.read_text().splitlines() if not ln.startswith("apt-get")]
    assert calls == ["-m pip install -q --disable-pip-version-check -e .[test,torch,calibration]",
                     "-m ruff check src tests bench", "-m mypy", "-m pytest -q -k nothing"]
    missing = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh")], capture_output=True, text=True,
                             env={**os.environ, "PYTHON": "no-such-python"}, timeout=60)
    assert missing.returncode == 1 and "no 'no-such-python' on PATH" in missing.stderr
    assert 'PYTHON="${PYTHON:-python3}"' in (ROOT / "scripts" / "test.sh").read_text()


def test_test_sh_waits_for_the_apt_lock(tmp_path: Path) -> None:
    # the script's apt_get, with apt-get failing on a held lock twice, then succeeding; sleep stubbed out
    script = (ROOT / "scripts" / "test.sh").read_text()
    function = script[script.index("  apt_get() {"):script.index("\n  }\n") + 4]
    assert "DPkg::Lock::Timeout=" in function and "SECONDS + 300" in function  # bounded: about 5 minutes
    count = tmp_path / "count"
    _fake(tmp_path, "apt-get", f'n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}\n'
                               'if ((n < 2)); then echo "E: Could not get lock /var/lib/apt/lists/lock. It is held '
                               'by process 7 (apt-get)" >&2; exit 100; fi\n')
    body = f"sleep() {{ :; }}\n{function}\napt_get update -qq\n"
    done = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert done.returncode == 0 and count.read_text().strip() == "3"  # two refusals, then it ran
    assert done.stderr.count("apt is busy") == 2
    # another failure (no network) is not waited on: one try, its message, exit 1
    count.unlink()
    _fake(tmp_path, "apt-get", f'echo 1 >> {count}; echo "E: Failed to fetch" >&2; exit 100\n')
    done = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert done.returncode == 1 and "Failed to fetch" in done.stderr and count.read_text() == "1\n"


def test_machine_cites_each_source_once_under_its_table(capsys: pytest.CaptureFixture[str], wide: None) -> None:
    code, out, _ = run(capsys, "machine", "h100")
    assert code == 0
    table, listed = out.split("\nsources\n")
    cited = set(re.findall(r"│ \[(\d+)\] +│", table))
    numbers = re.findall(r"^    \[(\d+)\] ", listed, flags=re.MULTILINE)
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)] and cited == set(numbers)
    # the H100 datasheet's page is named once per figure it gives, never in the table itself
    assert "https://" not in table
    assert "(H100 SXM: GPU memory 80GB, GPU memory bandwidth 3.35TB/s)" in listed


def test_models_names_what_the_checkpoint_stores(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main
    assert main(["models", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    # DeepSeek-V3's config.json: quantization_config {quant_method: fp8, fmt: e4m3, weight_block_size: [128, 128]}
    assert rows["deepseek-v3"]["checkpoint_dtype"] == "fp8 e4m3"
    assert rows["llama-3-8b"]["checkpoint_dtype"] == "bfloat16"  # no quantization_config: its torch_dtype
