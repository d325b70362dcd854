"""The diff room (roofline.diff, `roofline diff`): a recorded program beside the analytic model of its
own config.json, each difference named with its cost by arithmetic: logits for every position, a
cat-grown KV cache, a masked window computing the full square, MLA re-expanded, the routed experts a
step hit. Tiny Hugging Face models on CPU; the two diffs of the trace tests/test_profile.py records
(`recorded`) stand there, beside the fixture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", minversion="5")
from test_profile import TINY, _errors, _out_and_errors, _tiny_llama  # noqa: E402

pytestmark = pytest.mark.torch


MIXTRAL = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False, num_local_experts=4,
               num_experts_per_tok=2)


_MIXTRAL_SCRIPT = """import torch, transformers
torch.manual_seed(0)
m = transformers.AutoModelForCausalLM.from_config(transformers.MixtralConfig(**{cfg!r})).eval()
for layer in m.model.layers:
    layer.mlp.gate.weight.data.zero_()  # every token's router logits equal: all pick the same 2 experts
print("mixtral prints")
with torch.inference_mode():
    m(torch.randint(0, 256, (1, 16)))
"""


def _mixtral_config() -> Any:
    import transformers

    return transformers.MixtralConfig(**MIXTRAL)


def test_diff_of_a_script_json_is_only_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers", minversion="5")
    script = tmp_path / "m.py"
    script.write_text(_MIXTRAL_SCRIPT.format(cfg=MIXTRAL), encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(_mixtral_config().to_dict()), encoding="utf-8")
    assert main(["diff", str(script), "--config", str(config), "--json"]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert "mixtral prints" in err
    assert "routed experts hit" in [x["name"] for x in d["differences"]]


def test_diff_names_the_routed_experts_a_mixtral_step_hit(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers", minversion="5")
    from roofline.diff import diff_program
    from roofline.models import load_config
    from roofline.tracing import trace

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(_mixtral_config()).eval()
    picks: list[set[int]] = []
    for layer in model.model.layers:
        layer.mlp.gate.weight.data.zero_()  # equal router logits: every token picks the same top-2
        layer.mlp.experts.register_forward_pre_hook(
            lambda _m, args: picks.append(set(args[1].flatten().tolist())))  # (hidden, top_k_index, weights)
    model.config.save_pretrained(tmp_path)
    with torch.inference_mode(), trace(model) as t:
        model(torch.randint(0, 256, (1, 16)))
    assert [len(p) for p in picks] == [2, 2]  # 2 distinct experts per layer, read from the router's own picks
    cfg = load_config(str(tmp_path))
    d = diff_program(t, cfg)
    (x,) = [x for x in d.differences if x.name == "routed experts hit"]
    # uniform routing expects E·(1 − (1 − k/E)^N) = 4·(1 − (1/2)^16) = 3.99994, i.e. all 4 experts
    assert d.model.experts_hit == 4
    # (read − expected)·3·h·f·bytes·layers = (2 − 4)·3·64·128·4·2 = −393,216 B: fewer weights read
    assert x.extra_bytes == (2 - 4) * 3 * 64 * 128 * 4 * 2
    assert x.extra_flop == 0.0
    assert "2 of 4 experts" in x.detail and "less" in x.detail


@pytest.mark.parametrize("name", ["llama", "qwen2", "mixtral", "deepseek-v3"])
def test_hf_prefill_against_the_analytic_model_differs_only_by_what_diff_names(name: str, tmp_path: Path) -> None:
    """A 16-token prefill of each tiny model (tests/test_trace_hf.py's configs) beside roofline.models' graph
    of its own config.json: the matmul FLOPs differ by exactly the named logits difference, the attention
    and expert FLOPs are equal, and the weight bytes differ by the rotary inv_freq buffer alone."""
    transformers = pytest.importorskip("transformers", minversion="5")
    from roofline.diff import diff_program
    from roofline.models import load_config
    from roofline.tracing import trace
    from roofline.tracing.analysis import flop_by_kind
    from roofline.vocab import Role
    from test_trace_hf import CASES, PROMPT, VOCAB

    (case,) = [c for c in CASES if c.name == name]
    torch.manual_seed(0)
    hf = case.config()
    model = transformers.AutoModelForCausalLM.from_config(hf).eval()
    hf.save_pretrained(tmp_path)
    with torch.inference_mode(), trace(model) as t:
        model(torch.randint(0, VOCAB, (1, PROMPT)))
    d = diff_program(t, load_config(str(tmp_path)))
    named = {x.name: x for x in d.differences}
    logits = named["logits for every position instead of the last"]
    assert logits.extra_flop == 2 * (PROMPT - 1) * 64 * VOCAB  # 2·(N − B)·h·V = 2·15·64·256 = 491,520
    matmul = next(r for r in d.rows if r.family == "matmul")
    assert matmul.program_flop - matmul.model_flop == logits.extra_flop
    assert sum(x.extra_flop for x in d.differences) == logits.extra_flop  # the other differences are bytes
    ran, modelled = flop_by_kind(t.graph), flop_by_kind(d.model.graph)
    for kind in ("attention_qk", "attention_pv", "grouped_matmul"):
        assert ran.get(kind) == modelled.get(kind), kind
    # weights: every parameter the step reads, once; the model's graph has no rotary table, the program
    # reads inv_freq (head_dim_rope / 2 fp32 values: 8 for d = 16, 4 for DeepSeek's rope dim 8)
    read = {x.name: x.bytes for op in t.ops for x in op.inputs if x.role is Role.WEIGHT}
    counted = {x.name: x.bytes * op.count for op in d.model.graph.ops for x in op.inputs if x.role is Role.WEIGHT}
    inv_freq = model.model.rotary_emb.inv_freq.numel() * 4
    assert sum(read.values()) - sum(counted.values()) == inv_freq


def test_diff_of_a_program_without_an_embedding_names_the_options_that_exist(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "lin.py"
    script.write_text("import torch\ntorch.nn.Linear(64, 64)(torch.randn(4, 64))\n", encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "vocab_size": 256, "max_position_embeddings": 128}), encoding="utf-8")
    assert main(["diff", str(script), "--config", str(config)]) == 2
    _, errs = _out_and_errors(capsys)
    assert len(errs) == 1 and errs[0].startswith("roofline: error: the program has no embedding gather")
    assert "--batch and --seq" in errs[0]  # diff's own options (it has no --prompt or --context)


def test_diff_names_the_cat_grown_kv_cache_in_decode() -> None:
    from roofline.diff import diff_program
    from roofline.models import config_from_dict
    from roofline.tracing import trace

    model = _tiny_llama()
    with torch.inference_mode():
        out = model(torch.randint(0, 256, (1, 16)), use_cache=True)
        with trace(model) as t:
            model(torch.randint(0, 256, (1, 1)), past_key_values=out.past_key_values, use_cache=True)
    d = diff_program(t, config_from_dict({**TINY, "model_type": "llama"}, "tiny"))
    assert d.model.shape.phase == "decode" and d.model.shape.seq == 17  # 16 cached + the new token
    grown = next(x for x in d.differences if x.name.startswith("cat-grown KV cache"))
    # per layer K and V: cat([1, 2, 16, 16], [1, 2, 1, 16]) -> [1, 2, 17, 16], fp32: read 16 + 1 rows, write 17:
    # (16 + 1 + 17)·2·16·4 bytes, 4 cats; an in-place cache writes the new row only, 2·16·4 bytes per cat
    assert grown.extra_bytes == 4 * ((16 + 1 + 17) * 2 * 16 * 4 - 2 * 16 * 4)


def _traced(model: Any, ids: Any, decode: bool = False) -> Any:
    from roofline.tracing import trace

    with torch.inference_mode():
        if not decode:
            with trace(model) as t:
                model(ids)
            return t
        out = model(ids, use_cache=True)
        with trace(model) as t:
            model(ids[:, :1], past_key_values=out.past_key_values, use_cache=True)
        return t


def test_diff_names_masked_sliding_window_prefill_computing_the_full_square() -> None:
    from roofline.diff import diff_program
    from roofline.models import config_from_dict

    raw = {**TINY, "sliding_window": 8, "model_type": "mistral"}
    torch.manual_seed(0)
    model = transformers.MistralForCausalLM(transformers.MistralConfig(**raw)).eval()
    d = diff_program(_traced(model, torch.randint(0, 256, (1, 32))), config_from_dict(raw, "tiny-mistral"))
    square = next(x for x in d.differences if x.name == "masked sliding-window prefill computing the full square")
    # computed: the whole 32×32 square, 2·B·H·Nq·Nkv·d = 2·1·4·32·32·16 per layer; the model's window of 8:
    # pairs W(W+1)/2 + (N−W)·W = 36 + 24·8 = 228, 2·1·4·228·16 per layer; with p·v (d_v = d) twice the difference
    computed, windowed = 2 * 2 * 4 * 32 * 32 * 16, 2 * 2 * 4 * 228 * 16
    assert square.extra_flop == 2 * (computed - windowed)


def test_diff_names_mla_re_expanded_in_decode() -> None:
    from roofline.diff import diff_program
    from roofline.models import config_from_dict

    raw = {"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256,
           "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
           "q_lora_rank": 32, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
           "n_group": 1, "topk_group": 1, "max_position_embeddings": 128}
    torch.manual_seed(0)
    model = transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(**raw)).eval()
    cfg = config_from_dict(raw, "tiny-deepseek")
    d = diff_program(_traced(model, torch.randint(0, 256, (1, 16)), decode=True), cfg)
    mla = next(x for x in d.differences if x.name == "MLA re-expanded instead of absorbed")
    # HF attends over per-head K (nope 16 + rope 8 = 24 wide), not the latent (kv_lora 32 + rope 8 = 40 wide);
    # its cache holds H·(d_nope + d_rope + d_v) = 4·(16 + 8 + 16) = 160 values per token per layer, not 40
    assert "(24 wide)" in mla.detail and "(40 wide)" in mla.detail and "= 160 values" in mla.detail
    assert mla.extra_bytes > 0


def test_diff_cuts_a_generate_loop_into_its_forward_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "gen.py"
    script.write_text("import torch\nfrom transformers import LlamaConfig, LlamaForCausalLM\ntorch.manual_seed(0)\n"
                      f"m = LlamaForCausalLM(LlamaConfig(**{TINY!r})).eval()\n"
                      "with torch.no_grad():\n"
                      "    m.generate(torch.randint(0, 256, (1, 16)), max_new_tokens=3, do_sample=False, "
                      "pad_token_id=0)\n")
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**TINY, "model_type": "llama"}))
    # 3 new tokens: the prefill, then 2 decode steps; step 3 attends over 16 + 2 = 18 tokens
    assert main(["diff", str(script), "--config", str(folder), "--step", "3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["phase"], d["seq"]) == ("decode", 18)
    names = [x["name"] for x in d["differences"]]
    assert "cat-grown KV cache read and rewritten each step" in names
    assert not any(n.startswith("logits") for n in names)  # generate projects the last position only
    assert main(["diff", str(script), "--config", str(folder), "--step", "4"]) == 2
    assert "ran 3 forward steps" in _errors(capsys)[-1]
