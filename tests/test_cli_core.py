from __future__ import annotations

import json
import subprocess
import sys

import pytest

from roofline.cli import main
from test_cli_model import last_error_line


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_kernel_matmul_json_keys_and_values(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kernel", "matmul", "4096", "4096", "4096", "--machine", "h100", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["flop"] == 2 * 4096**3
    assert d["bytes"] == 3 * 4096**2 * 2
    assert d["flop_per_byte"] == pytest.approx(4096 / 3)  # 1365.3
    assert d["ridge_flop_per_byte"] == pytest.approx(989.4 / 3.35)
    assert d["attainable_flop_per_s"] == pytest.approx(989.4e12)
    assert d["time_s"] == pytest.approx(2 * 4096**3 / 989.4e12)
    assert d["bound_class"] == "compute"
    assert d["bound"] == "matrix"  # the resource whose time is the floor: 139 µs of matrix work vs 30 µs of DRAM


def test_kernel_rmsnorm_human_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kernel", "rmsnorm", "8192", "8192")
    assert code == 0
    assert "80.1 µs" in out  # (2·2·8192² + 2·8192) B / 3.35 TB/s
    assert "memory" in out
    assert "1.4999 FLOP/B" in out


def test_kernel_explain_shows_formulas_with_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kernel", "matmul", "4096", "4096", "4096", "--explain")
    assert code == 0
    assert "2·M·N·K = 2·4096·4096·4096" in out
    assert "I* = peak / BW = 989.4 TFLOP/s / 3.35 TB/s = 295.3 FLOP/B" in out
    assert "compute-bound" in out


def test_kernel_attention_naive_vs_fused(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "kernel", "attention", "--seq", "8192", "--head-dim", "128", "--fusion", "none", "--json")
    naive = json.loads(out)
    _, out, _ = run(capsys, "kernel", "attention", "--seq", "8192", "--head-dim", "128", "--fusion", "flash", "--json")
    fused = json.loads(out)
    assert naive["flop"] == fused["flop"]
    assert naive["bytes"] == 8 * 8192**2 + 8 * 8192 * 128
    assert fused["bytes"] == 8 * 8192 * 128
    assert naive["bound_class"] == "memory" and fused["bound_class"] == "compute"
    assert naive["bound"] == "dram" and fused["bound"] == "matrix"  # a sequence: the resource with the most time


def test_kernel_custom_is_the_seed_kernel_time(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kernel", "custom", "--flop", "6e6", "--bytes", "4 MB", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["flop_per_byte"] == 1.5
    assert d["time_s"] == pytest.approx(4e6 / 3.35e12)


def test_machines_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "machines", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    b200 = rows["b200"]
    assert b200["peak_flop_per_s"]["bf16"] == 2.25e15
    # the physical 7680 bits x 2 x 3996 MHz / 8 (the driver's bus and memory clock, b200.toml)
    assert b200["memory_bytes_per_s"] == 7680 * 2 * 3996e6 / 8
    assert b200["ridge_flop_per_byte"]["fp4"] == 9e15 / (7680 * 2 * 3996e6 / 8)  # 1173


def test_machine_detail_lists_sources(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "machine", "b200")
    assert code == 0
    assert "2.25 PFLOP/s" in out and "7.672 TB/s" in out and "nvidia" in out.lower()


@pytest.mark.parametrize(("argv", "message"), [
    (["kernel", "matmul", "-5", "4", "4"], "M must be a positive integer, got -5"),
    (["kernel", "matmul", "0", "4", "4"], "M must be a positive integer, got 0"),
    (["kernel", "matmul", "abc", "4", "4"], "M must be a positive integer, got 'abc'"),
    (["kernel", "rmsnorm", "8", "8", "--machine", "h10"], "unknown machine 'h10'; did you mean"),
    (["kernel", "matmul", "8", "8", "8", "--machine", "a100", "--dtype", "fp8"],
     "lists no matrix peak for fp8; it has: fp64, tf32, bf16"),
    (["kernel", "matmul", "8", "8", "8", "--dtype", "bf61"], "unknown dtype 'bf61'; did you mean"),
    (["kernel", "custom", "--flop", "-3", "--bytes", "1"], "must be positive"),
    (["kernel", "custom", "--flop", "3 TB/s", "--bytes", "1"], "expected FLOP"),
    (["kernel", "attention", "--seq", "64", "--head-dim", "64", "--heads", "6", "--kv-heads", "4"],
     "must be a multiple of key/value heads"),
    (["machine", "/no/such/file.toml"], "does not exist"),
    (["kernel", "matmul", "8", "8"], "Missing argument"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1 and err.startswith("roofline: error: ")
    assert "Traceback" not in err


def test_malformed_machine_file_via_cli(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "m.toml"
    bad.write_text("id = 'x'\nname = 'x'\n[peak.matrix]\nbf16 = 'lots'\n[memory.dram]\nbandwidth = '1 TB/s'\n")
    code, _, err = run(capsys, "kernel", "add", "1000", "--machine", str(bad))
    assert code == 2 and "cannot read 'lots'" in err and err.count("\n") == 1


def test_console_script_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "roofline.cli", "kernel", "add", "-1"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "roofline: error: N must be a positive integer, got -1 " \
                                  "(see `roofline kernel add --help`)"


def test_machine_explain_derives_each_ridge(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "machine", "b200", "--explain")
    assert code == 0
    # 2.25, 4.5 and 9 PFLOP/s over the physical 7680 bits x 2 x 3996 MHz / 8 = 7.67232 TB/s: 293.26, 586.52,
    # 1173.05 (the seed's 281, 562, 1125 divide by DGX B200's 8 TB/s)
    assert "bf16  I* = peak / BW = 2.25e+15 / 7.67232e+12 = 293.26 FLOP/B" in out
    assert "fp8   I* = peak / BW = 4.5e+15 / 7.67232e+12 = 586.52 FLOP/B" in out
    assert "fp4   I* = peak / BW = 9e+15 / 7.67232e+12 = 1173.05 FLOP/B" in out
    assert "never used by the analyses" in out


def test_old_impl_flag_still_works_and_says_its_new_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "kernel", "attention", "--seq", "8192", "--head-dim", "128", "--impl", "naive",
                         "--json")
    assert code == 0
    assert "--impl naive is now spelled --fusion none" in err
    assert json.loads(out)["bytes"] == 8 * 8192**2 + 8 * 8192 * 128  # naive: 8·N² score bytes + 8·N·d for q, k, v, o
    code, _, err = run(capsys, "kernel", "attention", "--seq", "64", "--head-dim", "8", "--impl", "naive",
                       "--fusion", "flash")
    assert code == 2 and "contradicts --fusion flash" in err


def test_cli_defaults_are_the_librarys() -> None:
    # the CLI spells the models' defaults so that start-up need not load the models room
    from roofline.cli.common import DEFAULT_FUSION, DEFAULT_MEMORY_UTILIZATION, MODEL_FUSIONS
    from roofline.hardware import DEFAULT_MACHINE
    from roofline.models import DEFAULT_PLAN, PLANS
    from roofline.models.memory import DEFAULT_UTILIZATION

    assert DEFAULT_FUSION == DEFAULT_PLAN and MODEL_FUSIONS == tuple(PLANS)
    assert DEFAULT_MEMORY_UTILIZATION == DEFAULT_UTILIZATION == 0.9  # vLLM's gpu_memory_utilization
    assert DEFAULT_MACHINE == "h100"


@pytest.mark.parametrize("argv", [("kernel", "matmul", "64", "64", "64"), ("model", "gpt2"), ("machine", "h100")])
def test_json_and_explain_together_is_an_error(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    # before: --explain was dropped without a word and JSON printed
    code, out, err = run(capsys, *argv, "--json", "--explain")
    assert code == 2 and out == ""
    assert "--json and --explain" in last_error_line(err)


def test_mixed_unit_kernel_ridge_is_not_called_vector(capsys: pytest.CaptureFixture[str]) -> None:
    # fused attention: 4·N²·d = 4·8192²·128 = 34.36 GFLOP on the matrix units, softmax 5·N² = 0.336 GFLOP on
    # the vector units; before, its blended ridge was labelled "(vector units)"
    code, out, _ = run(capsys, "kernel", "attention", "--seq", "8192", "--head-dim", "128")
    assert code == 0
    assert "(matrix and vector units, each at its own peak)" in out and "(vector units)" not in out
    # RMSNorm is all vector work: its ridge is 67 TFLOP/s / 3.35 TB/s = 20 FLOP/B, on the vector units
    code, out, _ = run(capsys, "kernel", "rmsnorm", "8192", "8192")
    assert code == 0 and "20 FLOP/B" in out and "(vector units)" in out


def test_the_group_lists_every_command_its_modules_define() -> None:
    # roofline.cli.COMMANDS is the group's list (name → module, short help): each command module's own
    # COMMANDS must be in it under its module, so a new command cannot be missing from `roofline --help`
    import importlib
    import pkgutil

    import roofline.cli as cli_package
    from roofline.cli import COMMANDS

    defined: dict[str, str] = {}
    for info in pkgutil.iter_modules(cli_package.__path__):
        if info.name == "__main__":  # `python -m roofline.cli`: importing it runs the command
            continue
        module = importlib.import_module(f"roofline.cli.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            defined[command.name] = info.name
    assert defined == {name: module for name, (module, _) in COMMANDS.items()}
    assert all(0 < len(short) <= 60 for _, short in COMMANDS.values())  # one line of an 80-column --help


def test_help_imports_no_command_module() -> None:
    # `roofline --help` lists the commands from the table: none of their modules, nor numpy or rich, loads
    code = ("import sys\nfrom roofline.cli import main\nmain(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.startswith(('roofline.cli.', 'numpy', 'rich', "
            "'roofline.models', 'roofline.hardware'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "['roofline.cli.common']"


def test_the_process_entry_sets_the_collector_for_one_short_process_and_a_caller_keeps_its_own() -> None:
    # main() without argv is the process's command line: a collection every 50,000 new objects instead of
    # 700, and gc.freeze at exit (so the last collection visits nothing); main(argv) leaves the caller's
    # settings (the tests run many commands in one process)
    code = ("import atexit, gc, io, sys, contextlib\nfrom roofline.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['machines'])\nprint(gc.get_threshold())\n"
            "sys.argv = ['roofline', 'machines']\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main()\nprint(gc.get_threshold())\n"
            "atexit.register(lambda: print(gc.get_freeze_count() > 10_000))\n")  # runs before gc.freeze: False
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:3] == ["(700, 10, 10)", "(50000, 10, 10)", "False"]
    code = ("import gc, atexit, io, sys, contextlib\nfrom roofline.cli import main\n"
            "atexit.register(lambda: print(gc.get_freeze_count() > 10_000))\n"  # registered first: runs last
            "sys.argv = ['roofline', 'machines']\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"
