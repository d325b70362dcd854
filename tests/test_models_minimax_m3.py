"""MiniMax-M3 refused naming its block-sparse attention (issue 22): never read as MiniMax-M2, whose every
layer attends the whole context and caches no index key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import config_from_dict, load_config

M3 = Path(__file__).parent / "fixtures" / "configs" / "MiniMax-M3"


def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((M3 / "config.json").read_text())
    return data


def test_minimax_m3_is_refused_naming_its_sparse_attention() -> None:
    # sparse_attention_freq: 0 on the first 3 layers, 1 on the other 57; blocks of 128 keys, top 16 kept
    with pytest.raises(RooflineError, match="field 'sparse_attention_config' \\(block-sparse attention on 57 "
                                            "layers: index keys scoring blocks of 128 tokens, the top 16 blocks"):
        load_config(str(M3))


def test_the_multimodal_export_is_refused_alike() -> None:
    # nvidia/MiniMax-M3-NVFP4 (minimax_m3_vl): the language model in text_config
    vl = {"model_type": "minimax_m3_vl", "text_config": {**raw(), "model_type": "minimax_m3_vl_text"}}
    with pytest.raises(RooflineError, match="text_config: field 'sparse_attention_config'"):
        config_from_dict(vl)
    with pytest.raises(RooflineError, match="field 'text_config' must be an object"):
        config_from_dict({"model_type": "minimax_m3_vl", "text_config": [1]})


@pytest.mark.parametrize("value, match", [
    (None, "field 'sparse_attention_config' must be an object"),
    ({"sparse_block_size": "x" * 5000}, "blocks of 'xxxx.*\\.\\.\\. tokens"),  # a hostile value shown short
])
def test_hostile_sparse_attention_config(value: Any, match: str) -> None:
    with pytest.raises(RooflineError, match=match):
        config_from_dict({**raw(), "sparse_attention_config": value})


def test_the_cli_refuses_it_in_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "roofline.cli", "model", str(M3)], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "sparse_attention_config" in out.stderr and len(out.stderr) < 400
