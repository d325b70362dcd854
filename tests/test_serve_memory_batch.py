"""serve's largest batch memory allows, as printed and as computed, and a curve that reaches it
(issue 24 item 10: DeepSeek-V3 EP 8 × DP 8 on HGX H200, the curve stopped at 1024 though memory allowed
~1,640, and the printed formula worked out to ~205, the per-device figure, while it printed the total)."""

from __future__ import annotations

import math
import re

import pytest

from roofline.parallel import Split
from roofline.report.text.serve import serve_text
from roofline.serving import ServingReport, serve_model

GIB = 2**30


@pytest.fixture(scope="module")
def report() -> ServingReport:
    return serve_model("deepseek-v3", "hgx-h200", Split(dp=8, ep=8), prompt=1024, output=1024)


def test_the_printed_max_batch_is_its_formula_worked_out(report: ServingReport) -> None:
    # DeepSeek-V3's config.json: 61 layers, MLA's cache of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values a
    # token a layer, BF16 (2 B); with attention data parallel each device keeps its replica's sequences whole
    kv_by_hand = 61 * 576 * 2 * (1024 + 1024)
    assert report.kv_bytes_per_sequence == kv_by_hand  # 143,917,056 B = 137 MiB
    # H200: 141 GiB (NVIDIA's datasheet "141GB", binary as nvidia-smi reports it), 0.9 usable (the default)
    usable = 0.9 * 141 * GIB
    assert report.usable_bytes == pytest.approx(usable, rel=1e-12)
    per_device = math.floor((usable - report.weights_bytes - report.workspace_bytes) / kv_by_hand)
    line = next(x for x in serve_text(report).splitlines() if x.strip().startswith("max batch (memory)"))
    total = int(line.split()[3])
    printed = re.search(r"⌋ = (\d+) per device", line)
    replicas = re.search(r"(\d+) a replica × (\d+) replicas", line)
    assert printed is not None and replicas is not None, line
    # the formula printed works out to the figure printed beside it: per device = per replica, × 8 replicas
    assert int(printed.group(1)) == per_device
    assert (int(replicas.group(1)), int(replicas.group(2))) == (per_device, 8)
    assert total == per_device * 8 == report.max_batch_memory
    assert 1024 < total < 2048  # ~206 a device: the 1024 curve of before stopped short of it


def test_the_curve_reaches_what_memory_allows(report: ServingReport) -> None:
    batches = [p.batch for p in report.curve]
    # the batch unit is dp = 8: 8, 16, ... doubled to 1024, then on to the first doubling past the memory's batch
    assert batches == [8 << k for k in range(9)]  # 8 … 2048
    assert batches[-2] < report.max_batch_memory <= batches[-1]
    assert [p.fits for p in report.curve] == [True] * 8 + [False]


def test_a_curve_within_1024_is_as_before() -> None:
    # Llama 3 8B on one H100 (80 GiB), 1024 + 1024 tokens: 128 KiB of KV a token (32 layers × 8 K/V heads × 128
    # × 2 × 2 B), 256 MiB a sequence, so ~227 fit; the curve stays 1, 2, 4, ... 1024
    r = serve_model("llama-3-8b", "h100", prompt=1024, output=1024)
    assert r.kv_bytes_per_sequence == 32 * 8 * 128 * 2 * 2 * 2048
    assert [p.batch for p in r.curve] == [1 << k for k in range(11)]
