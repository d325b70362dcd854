"""A measured CPU's machine file is used by model, serve and sweep (issue 24, item 5).

`roofline measure --save cpu.toml` writes no [interconnect]: a CPU measured alone has no device-to-device
link. One device needs no link, so a run with no split (or --tp 1) works on it; a split over several such
devices is refused, naming the missing [interconnect]."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.hardware import get_machine, machine_to_toml
from roofline.parallel.deployment import deploy
from roofline.parallel.split import Split


@pytest.fixture
def cpu_file(tmp_path: Path) -> Path:
    """A machine file as `measure --save` writes one: its own id, no aliases, no [interconnect]. Its figures
    are the H100's (any machine's do: only the missing link matters)."""
    h100 = get_machine("h100")
    measured = replace(h100, id="my-cpu", name="my measured CPU", aliases=(), interconnect_bytes_per_s=None,
                       interconnect_name="")
    text = machine_to_toml(measured, header="written by `roofline measure`")
    assert "[interconnect]" not in text
    path = tmp_path / "cpu.toml"
    path.write_text(text)
    return path


def test_one_device_needs_no_link(cpu_file: Path) -> None:
    d = deploy(str(cpu_file))
    assert d.machine.id == "my-cpu" and d.system is None and d.split.devices == 1
    assert deploy(str(cpu_file), Split(tp=1)).machine.interconnect_bytes_per_s is None


@pytest.mark.parametrize("argv", [
    ["model", "gpt2", "--tp", "1", "--json"],
    ["model", "gpt2", "--json"],
    ["serve", "gpt2", "--prompt", "16", "--output", "16", "--json"],
    ["sweep", "gpt2", "--batch", "1,8", "--context", "1024", "--json"],
])
def test_model_serve_and_sweep_run_on_a_measured_cpu(argv: list[str], cpu_file: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*argv, "--machine", str(cpu_file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "cannot be made a node" not in err
    assert "my-cpu" in out  # the measured file's machine, not a catalog one
    json.loads(out)


@pytest.mark.parametrize("argv", [
    ["model", "gpt2", "--tp", "2"],
    ["serve", "gpt2", "--prompt", "16", "--output", "16", "--tp", "2"],
    ["sweep", "gpt2", "--batch", "1", "--tp", "1,2"],
])
def test_a_split_over_a_machine_with_no_link_names_the_missing_interconnect(
        argv: list[str], cpu_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*argv, "--machine", str(cpu_file)])
    _, err = capsys.readouterr()
    assert code == 2
    (line,) = err.splitlines()
    assert line.startswith("roofline: error: the split TP 2 spreads the model over 2 devices, but my-cpu has no "
                           "[interconnect]"), line
