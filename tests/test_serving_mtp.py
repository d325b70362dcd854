"""`serve --mtp k --acceptance a`: the model's own multi-token-prediction layer as the draft of speculative
decoding (roofline.serving.speculative.mtp_draft, roofline.models.draft), by hand from DeepSeek-V3's config."""

from __future__ import annotations

import pytest

from roofline.errors import RooflineError
from roofline.models import build_graph, load_config
from roofline.parallel import Split
from roofline.serving import serve_model as serve
from roofline.serving.speculative import expected_tokens, mtp_draft
from roofline.vocab import Unit

H, V = 7168, 129_280  # DeepSeek-V3


def test_expected_tokens_by_the_speculative_formula() -> None:
    # Leviathan et al. 2023: (1 − a^(k+1)) / (1 − a); DeepSeek-V3 (arXiv 2412.19437 §5.4.3) accepts its MTP
    # module's second token 85–90% of the time: k = 1, a = 0.85 gives 1.85 tokens a step
    assert expected_tokens(0.85, 1) == pytest.approx(1.85, rel=1e-12)
    assert expected_tokens(0.8, 3) == pytest.approx((1 - 0.8 ** 4) / 0.2, rel=1e-12)


def test_the_draft_is_one_mtp_module() -> None:
    # the drafted token's embedding and the target's hidden state, normed and joined, eh_proj 2h -> h, one
    # MoE layer of MLA, the model's head: at batch 4, context 4096
    cfg = load_config("deepseek-v3")
    draft, k = mtp_draft(cfg, 2, None, None, 0.8)
    assert k == 2 and draft.num_layers == 1 and draft.moe_layers == 1 and draft.mtp_layers == 0
    ops = {op.name: op for op in build_graph(draft, "decode", 4, 4096).graph.ops}
    assert ops["mtp.eh_proj"].flop_by_unit[Unit.MATRIX] == 2 * 4 * (2 * H) * H
    assert ops["mtp.eh_proj"].count == 1 and ops["attn.qk"].count == 1
    assert ops["lm_head"].flop_by_unit[Unit.MATRIX] == 2 * 4 * H * V
    # its KV cache is one layer's latent: (512 + 64) · 2 bytes a token
    assert draft.kv_cache_bytes_per_token() == 576 * 2


def test_serve_counts_no_second_copy_of_the_weights() -> None:
    r = serve("deepseek-v3", "dgx-h200", Split(tp=8), prompt=2048, output=256, batch=32, mtp=1, acceptance=0.85)
    s = r.speculative
    assert s is not None and s.shares_weights and s.draft_weights_bytes == 0
    assert s.draft_tokens == 1 and s.expected_tokens == pytest.approx(1.85)
    # the MTP layer's KV cache, per device (MLA's latent is whole on every tp device): 1152 B × 2304 tokens
    assert s.draft_kv_bytes_per_sequence == 576 * 2 * (2048 + 256)
    # the fit: (usable − target weights − larger workspace) / (target KV + draft KV), in the split's batch unit
    assert r.usable_bytes is not None and r.batch_unit == 1
    room = r.usable_bytes - r.weights_bytes - s.workspace_bytes
    assert s.max_batch_memory == int(room // (r.kv_bytes_per_sequence + s.draft_kv_bytes_per_sequence))
    # net ITL = (k × draft step + verify step) / E[tokens a step]
    assert s.net_itl.floor == pytest.approx((s.draft_step.floor + s.verify_step.floor) / 1.85, rel=1e-12)


@pytest.mark.parametrize(("model", "kwargs", "says"), [
    ("llama-3-8b", {"mtp": 2, "acceptance": 0.8}, "llama-3-8b has no multi-token-prediction layers"),
    ("deepseek-v3", {"mtp": 2}, "mtp needs acceptance"),
    ("deepseek-v3", {"mtp": 2, "acceptance": 0.8, "draft": "llama-3-8b"}, "not both"),
    ("deepseek-v3", {"mtp": 0, "acceptance": 0.8}, "mtp must be a positive integer"),
    ("deepseek-v3", {"mtp": 2, "acceptance": 1.5}, "acceptance must be in \\(0, 1\\]"),
])
def test_bad_mtp_input_is_one_line(model: str, kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        serve(model, "dgx-h200", Split(tp=8), prompt=2048, output=256, batch=8, **kwargs)  # type: ignore[arg-type]


def test_qwen3_5_drafts_with_a_full_attention_mtp_layer() -> None:
    # vLLM's qwen3_next_mtp.py: the MTP layers are full-attention decoder layers (layer_type
    # "full_attention"), whatever the main stack's DeltaNet layers: no recurrent state in the draft
    draft, _ = mtp_draft(load_config("qwen3.5-397b-a17b"), 2, None, None, 0.8)
    assert draft.layer_groups() == (("gated full attention", 1), ("MoE", 1))
    assert draft.state_bytes_per_sequence() == 0
    # one layer's K and V: 2 KV heads of 256, K and V, 2 bytes
    assert draft.kv_cache_bytes_per_token() == 2 * 2 * 256 * 2


def test_an_mtp_draft_runs_on_the_last_stage_and_names_what_it_cannot_pin() -> None:
    # GLM-5.2 (tests/fixtures/configs): BF16 on 16 H200 (TP 8 × PP 2); its one MTP layer drafts on the last
    # stage (no stages of its own); index_share_for_mtp_iteration is named, the draft's indexer counted
    from pathlib import Path

    glm = str(Path(__file__).parent / "fixtures" / "configs" / "GLM-5.2")
    r = serve(glm, "dgx-h200", Split(tp=8, pp=2), prompt=2048, output=256, batch=8, mtp=2, acceptance=0.8)
    assert r.speculative is not None and r.speculative.draft == "GLM-5.2 MTP"
    assert any("index_share_for_mtp_iteration" in w and "upper bound" in w for w in r.warnings)
    draft, _ = mtp_draft(load_config(glm), 2, None, None, 0.8)
    assert draft.indexer is not None and draft.indexer_layers == 1


def test_the_verify_step_attends_the_latent_cache_absorbed() -> None:
    # the verify step's k + 1 = 2 queries a sequence attend the cached context as MLA's decode does (issue 22):
    # queries in the latent, q·kᵀ over 512 + 64 and p·v over the 512 latent of one shared row a token, read
    # once; not per-head K and V (128 · (192 + 128) values a token, 71× the bytes: --mtp 1 was ×0.99)
    r = serve("deepseek-v3", "dgx-h200", Split(tp=8), prompt=2048, output=256, batch=32, mtp=1, acceptance=0.85)
    s = r.speculative
    assert s is not None
    v = s.verify
    context, b, heads = 2048 + 256 // 2, 32, 128 // 8  # the generation's middle context; 16 heads a device
    pairs = b * heads * 2 * context
    assert v.earlier == context
    assert v.earlier_attention_flop == 61 * (2 * pairs * 576 + 5 * pairs + 2 * pairs * 512)  # qk, softmax, pv
    # the BF16 latent rows once, the 2 queries and their outputs in the 576-wide latent
    assert v.earlier_attention_bytes == 61 * (b * context * 576 * 2 + 2 * b * heads * 2 * 576 * 2)
    # the published MTP gain (DeepSeek-V3 report §5.4.3: 1.8× TPS at 85–90% acceptance) is above 1
    assert s.to_dict()["speedup"] > 1.3
