"""The derivations (roofline.explain, `--explain`): each source cited once, a zero written out in
words, the memory fit's headroom named."""

from __future__ import annotations

import re

import pytest

from roofline.cli import main
from roofline.explain.model import TIGHT_HEADROOM, fit_words

GiB = 2**30


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


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


def test_fit_words_names_the_headroom_and_a_tight_fit() -> None:
    assert TIGHT_HEADROOM == 0.05
    # 140.2 of 141 GiB usable: 0.8 GiB = 0.57% left
    assert fit_words(140.2 * GiB, 141 * GiB) == "fits, tight (<5% headroom): 819 MiB (0.6%) left"
    # 36 of 72 GiB: half left
    assert fit_words(36 * GiB, 72 * GiB) == "fits, 36 GiB (50%) headroom"
    # exactly 5% left (68.4 of 72 GiB) is not tight; a byte less is
    assert fit_words(0.95 * 72 * GiB, 72 * GiB).startswith("fits, 3.6 GiB (5%) headroom")
    assert fit_words(0.95 * 72 * GiB + 2**20, 72 * GiB).startswith("fits, tight")


def test_the_expected_roofline_term_names_the_roof_that_sets_it(capsys: pytest.CaptureFixture[str]) -> None:
    # decode on an H200 with an FP8 cache, b2048 h32/2 d192 KV 1 (a row of aiconfigurator-core's tables): DRAM
    # moves only the queries and outputs (5.6 µs), so the term is set by a roof of the shipped fit's, and the line
    # must name it: the term's value is the largest of the parts it lists
    code, out, _ = run(capsys, "kernel", "attention", "--seq", "1", "--kv-seq", "1", "--head-dim", "192",
                       "--batch", "2048", "--heads", "32", "--kv-heads", "2", "--fusion", "flash", "--machine", "h200",
                       "--dtype", "fp8_e4m3", "--explain")
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("roofline term = max("))
    inside, value = line.split("max(", 1)[1].rsplit(") = ", 1)
    parts = [float(v) for v in re.findall(r"([\d.]+(?:e[-+]?\d+)?) µs", inside)]
    term = float(value.split(" µs")[0])
    assert "roof" in inside and term > 5 * parts[0]  # memory (the first part) is not what sets it
    assert max(parts) == pytest.approx(term, rel=1e-3)
