"""The serving what-ifs (`roofline serve --chunk`, `--disaggregate`, `--draft`): derived by hand.

Llama 3 70B under TP 8 on an H100 node: 8 query heads and one KV head of 128 per device, 80 layers.
Under TP 4 a device holds two KV heads: 2 · 2 · 128 · 80 · 2 B = 81,920 B of KV cache per token.
"""

from __future__ import annotations

import json
import math

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware.system_file import get_system
from roofline.parallel import Split
from roofline.serving import ServingReport, serve_model
from roofline.serving.speculative import expected_tokens

TP8 = Split(tp=8)
P, O = 2048, 256


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel)


@pytest.fixture(scope="module")
def whatif() -> ServingReport:
    return serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, chunk=512, disaggregate_devices="4:4",
                 draft="llama-3-8b", draft_tokens=4, acceptance=0.8)


def test_the_core_numbers_do_not_move(whatif: ServingReport) -> None:
    plain = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O)
    assert whatif.ttft == plain.ttft and whatif.itl_mean == plain.itl_mean and whatif.curve == plain.curve
    assert plain.chunked is None and plain.disaggregated is None and plain.speculative is None
    assert not {"chunked", "disaggregated", "speculative"} & set(plain.to_dict())


# --- speculative decoding ---------------------------------------------------------------------------

def test_expected_tokens_per_step_by_hand() -> None:
    assert close(expected_tokens(0.8, 4), (1 - 0.8**5) / (1 - 0.8))
    assert close(expected_tokens(0.8, 4), 3.3616)
    assert expected_tokens(1.0, 4) == 5.0
    assert close(expected_tokens(0.999999, 4), 5.0, 1e-5)  # the limit a -> 1 is k + 1


def test_net_itl_is_draft_and_verify_over_expected_tokens(whatif: ServingReport) -> None:
    s = whatif.speculative
    assert s is not None
    draft = serve_model("llama-3-8b", "dgx-h100", TP8, prompt=P, output=O, batch=whatif.batch)
    assert s.draft_step == draft.itl_mean
    assert close(s.net_itl.floor, (4 * draft.itl_mean.floor + s.verify_step.floor) / 3.3616)
    assert close(s.net_itl.high, (4 * draft.itl_mean.high + s.verify_step.high) / 3.3616)
    # the verify step: 5 tokens a sequence against the middle context prompt + output / 2
    assert s.verify.tokens == 5 and s.verify.earlier == P + O // 2
    assert s.target_itl == whatif.itl_mean
    assert close(s.throughput.ceiling, whatif.batch / s.net_itl.floor)
    assert s.net_itl.floor < s.target_itl.floor  # at a = 0.8 the draft pays off at batch 1


def test_draft_memory_counts_both_models_by_hand(whatif: ServingReport) -> None:
    s = whatif.speculative
    assert s is not None
    # KV a token per device under TP 8 (one KV head of 128 each): 2 (K and V) · 128 · layers · 2 B
    kv_70b = 2 * 128 * 80 * 2 * (P + O)  # Llama 3 70B, 80 layers: 40,960 B a token
    kv_8b = 2 * 128 * 32 * 2 * (P + O)  # Llama 3 8B, 32 layers: 16,384 B a token
    assert s.draft_kv_bytes_per_sequence == kv_8b and whatif.kv_bytes_per_sequence == kv_70b
    draft = serve_model("llama-3-8b", "dgx-h100", TP8, prompt=P, output=O)
    assert s.draft_weights_bytes == draft.weights_bytes
    usable = 80 * 2**30 * 0.9  # the H100 SXM's 80 GiB (the catalog reads vendors' GB of HBM as GiB) at 0.9
    assert close(whatif.usable_bytes or 0, usable)
    room = usable - whatif.weights_bytes - draft.weights_bytes - max(whatif.workspace_bytes, draft.workspace_bytes)
    assert s.max_batch_memory == int(room // (kv_70b + kv_8b))
    # the draft takes room: fewer sequences fit than for the target alone
    assert s.max_batch_memory is not None and whatif.max_batch_memory is not None
    assert s.max_batch_memory < whatif.max_batch_memory
    assert s.fits is (whatif.batch <= s.max_batch_memory)


@pytest.mark.parametrize(("k", "a", "says"), [(4, 0.0, "acceptance"), (4, 1.5, "acceptance"),
                                              (4, -0.2, "acceptance"), (0, 0.8, "draft_tokens")])
def test_bad_speculative_inputs_are_one_line(k: int, a: float, says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        serve_model("llama-3-8b", "h100", prompt=128, output=16, draft="llama-3-8b", draft_tokens=k, acceptance=a)


def test_acceptance_one_is_the_limit() -> None:
    r = serve_model("llama-3-8b", "h100", prompt=128, output=16, draft="llama-3-8b", draft_tokens=3, acceptance=1)
    assert r.speculative is not None and r.speculative.expected_tokens == 4


# --- disaggregation ---------------------------------------------------------------------------------

def test_kv_transfer_and_ttft_by_hand(whatif: ServingReport) -> None:
    d = whatif.disaggregated
    assert d is not None
    _, link = get_system("dgx-h100").link(2, False)
    kv_token = 2 * 2 * 128 * 80 * 2  # two KV heads per device under TP 4
    assert d.kv_bytes_per_token_device == kv_token == 81_920
    assert close(d.transfer.floor, link.latency_s + P * kv_token / link.bytes_per_s)
    pre = serve_model("llama-3-70b", "dgx-h100", Split(tp=4), prompt=P, output=O, batch=1)
    assert d.prefill == pre.ttft
    assert close(d.ttft.floor, pre.ttft.floor + d.transfer.floor)
    assert d.itl_mean == pre.itl_mean  # the decode group is TP 4 too, at the same batch
    assert close(d.prefill_rps.ceiling, 1 / pre.ttft.floor)
    assert close(d.decode_rps.ceiling, 1 / (O * pre.itl_mean.floor))
    b = d.balanced
    assert b is not None and b.rps is not None
    assert all(b.imbalance <= p.imbalance + 1e-9 for p in d.pairs if p.rps is not None)
    assert any(p.rps is None and "exceed" in p.reason for p in d.pairs)  # TP 1 does not hold 70B


def test_bad_ratio_is_one_line() -> None:
    for text in ("4-4", "0:4", "a:b", "1:2:3"):
        with pytest.raises(RooflineError, match="disaggregate_devices"):  # the library's name; the CLI's flag
            serve_model("llama-3-8b", "h100", prompt=128, output=16, disaggregate_devices=text)


# --- chunked prefill --------------------------------------------------------------------------------

def test_one_chunk_is_the_unchunked_ttft() -> None:
    for c in (P, 4096):
        r = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=P, output=O, chunk=c)
        assert r.chunked is not None and r.chunked.chunks == 1
        assert r.chunked.ttft == r.ttft


def test_chunked_ttft_by_hand(whatif: ServingReport) -> None:
    c = whatif.chunked
    assert c is not None and c.chunks == 4
    assert [(s.tokens, s.earlier) for s in c.steps] == [(512, 0), (512, 512), (512, 1024), (512, 1536)]
    one = serve_model("llama-3-70b", "dgx-h100", TP8, prompt=512, output=O)
    assert all(s.prefill == one.ttft for s in c.steps)  # each chunk's prefill: the prefill step of 512 tokens
    # the attention to the earlier tokens: 8 heads, 512 queries × s keys, d = 128, 80 layers
    for s in c.steps[1:]:
        pairs = 512 * s.earlier
        assert close(s.earlier_attention_flop, 80 * (4 * 8 * pairs * 128 + 5 * 8 * pairs))
        kv = 2 * s.earlier * 128 * 2  # one KV head: keys and values of the earlier tokens
        qo = 2 * 8 * 512 * 128 * 2  # the chunk's queries and output
        assert close(s.earlier_attention_bytes, 80 * (kv + qo))
    work = sum(s.time.floor for s in c.steps)
    assert close(c.ttft.floor, work + 3 * whatif.itl_mean.floor)
    assert close(c.itl_with_chunk.floor, whatif.itl_mean.floor + work / 4)
    assert close(c.itl_steady.floor, whatif.itl_mean.floor + whatif.batch / O * work)
    assert c.itl_with_chunk.floor < c.itl_unchunked_stall.floor


# --- the command line -------------------------------------------------------------------------------

def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


BASE = ("serve", "llama-3-8b", "--machine", "h100", "--prompt", "256", "--output", "32")


@pytest.mark.parametrize("extra", [("--chunk", "0"), ("--disaggregate", "4-4"), ("--acceptance", "0.5"),
                                   ("--draft", "llama-3-8b", "--acceptance", "0"),
                                   ("--draft", "llama-3-8b", "--acceptance", "1.2"),
                                   ("--draft", "llama-3-8b", "--draft-tokens", "0", "--acceptance", "0.8"),
                                   ("--draft", "llama-3-8b")])
def test_bad_inputs_exit_2_in_one_line(capsys: pytest.CaptureFixture[str], extra: tuple[str, ...]) -> None:
    code, _, err = run(capsys, *BASE, *extra)
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_cli_json_text_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    args = (*BASE, "--chunk", "64", "--disaggregate", "1:1", "--draft", "llama-3-8b", "--acceptance", "0.7")
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0
    d = json.loads(out)
    for key, times in (("chunked", ("ttft_s", "itl_steady_state_s")), ("disaggregated", ("ttft_s", "prefill_s")),
                       ("speculative", ("net_itl_s", "draft_step_s", "verify_step_s"))):
        for t in times:
            assert set(d[key][t]) == {"floor", "expected"}
            assert d[key][t]["floor"] <= d[key][t]["expected"]["low"] <= d[key][t]["expected"]["high"]
    assert d["disaggregated"]["kv_transfer"]["time_s"]["floor"] > 0
    code, out, _ = run(capsys, *args)
    assert code == 0 and "what-if: chunked prefill" in out and "what-if: speculative decoding" in out
    assert "what-if: prefill on 1 device" in out
    code, out, _ = run(capsys, *args, "--explain")
    assert code == 0 and "(1 − a^(k+1)) / (1 − a)" in out and "α + bytes / BW" in out and "⌈256 / 64⌉ = 4" in out


def test_disaggregate_with_a_group_the_model_cannot_split_names_the_group(
        capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    code = main(["serve", "llama-3-8b", "--machine", "h100", "--prompt", "1024", "--output", "128",
                 "--disaggregate", "3:4"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "--disaggregate 3:4: the prefill group runs TP 3" in err and "does not divide" in err  # 32 heads


# --- disaggregation over more than a node -----------------------------------------------------------

def test_a_group_over_nodes_is_tp_inside_and_pp_across() -> None:
    from roofline.serving.disaggregate import group_split
    assert group_split(4, 8) == Split(tp=4)
    assert group_split(16, 8) == Split(tp=8, pp=2)  # two DGX H100 nodes: TP 8 inside, PP 2 across
    with pytest.raises(RooflineError, match="multiple of 8"):
        group_split(12, 8)


def test_sixteen_by_sixteen_kv_transfer_by_hand() -> None:
    r = serve_model("llama-3.1-405b", "dgx-h100", Split(tp=8, pp=2), prompt=4096, output=512, batch=32,
              disaggregate_devices="16:16")
    d = r.disaggregated
    assert d is not None and d.prefill_split == Split(tp=8, pp=2) and d.decode_split == Split(tp=8, pp=2)
    # 405B: 8 KV heads of 128, 126 layers; a prefill device holds 1 KV head (8 / TP 8) of 63 layers (126 / PP 2)
    assert d.kv_bytes_per_token_device == 2 * 1 * 128 * 63 * 2  # K and V, BF16: 32,256 B
    assert d.link_level == "network"  # 32 devices span four nodes of 8
    assert close(d.transfer.floor, d.link_latency_s + 4096 * 32_256 / d.link_bytes_per_s)
    # the prefill group's step is serve's TTFT on that split at batch 1
    alone = serve_model("llama-3.1-405b", "dgx-h100", Split(tp=8, pp=2), prompt=4096, output=512, batch=1)
    assert d.prefill == alone.ttft


def test_balance_prefers_requests_per_device_among_balanced_pairs() -> None:
    from roofline.serving.disaggregate import BALANCE_TOLERANCE
    r = serve_model("llama-3.1-405b", "dgx-h100", Split(tp=8, pp=2), prompt=4096, output=512, batch=32,
              disaggregate_devices="16:16")
    d = r.disaggregated
    assert d is not None and d.balanced is not None
    running = [q for q in d.pairs if q.rps is not None]

    def per_device(q):  # type: ignore[no-untyped-def]
        return q.rps.ceiling / (q.prefill_devices + q.decode_devices)

    within = [q for q in running if abs(math.log(q.prefill_rps.ceiling / q.decode_rps.ceiling)) <= math.log(1.1)]
    assert BALANCE_TOLERANCE == math.log(1.1) and within
    assert d.balanced in within
    assert per_device(d.balanced) == max(per_device(q) for q in within)
    # a pair that idles devices is no answer: 16:32 is about as balanced as 16:16 but has half the rate per device
    assert (d.balanced.prefill_devices, d.balanced.decode_devices) != (16, 32)


def test_chunked_approximation_is_stated_in_text_json_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["serve", "llama-3-8b", "--machine", "h100", "--prompt", "1024", "--output", "64", "--chunk", "256"]
    phrase = "two passes, each reading the weights"
    assert main(args) == 0
    assert phrase in capsys.readouterr().out
    assert main([*args, "--explain"]) == 0
    assert phrase in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    assert phrase in json.loads(capsys.readouterr().out)["chunked"]["approximation"]


def test_a_draft_the_split_cannot_hold_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    # GPT-2's 12 query heads do not divide by the target's TP 8
    code = main(["serve", "llama-3-8b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "256", "--output", "32",
                 "--draft", "gpt2", "--acceptance", "0.8"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("roofline: error: --draft gpt2 runs beside the target on TP 8, and --tp 8 does not divide")


def test_a_draft_with_another_vocabulary_is_flagged() -> None:
    r = serve_model("llama-3-8b", "h100", prompt=256, output=32, draft="gpt2", acceptance=0.8)
    assert any("gpt2's vocabulary (50,257 tokens) is not llama-3-8b's (128,256)" in w for w in r.warnings)
    same = serve_model("llama-3-8b", "h100", prompt=256, output=32, draft="llama-3-8b", acceptance=0.8)
    assert not any("vocabulary" in w for w in same.warnings)
