"""`serve` without a split and `plan --output` answer one question, "the cheapest split that serves this
workload within these targets", with one function (roofline.serving.splits) and one answer."""

from __future__ import annotations

import json

import pytest

from roofline.cli import main
from roofline.parallel import Split


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_serve_and_plan_give_the_same_split(capsys: pytest.CaptureFixture[str]) -> None:
    question = ["llama-3-70b", "--machine", "dgx-h100", "--prompt", "2048", "--output", "256", "--itl-slo", "30ms",
                "--price-per-device-hour", "2.5"]
    served = _json(capsys, "serve", *question, "--json")
    planned = _json(capsys, "plan", *question, "--json")
    assert planned["winner"] == served["split_search"]["winner"]
    assert str(Split(**{k: served["parallel"][k] for k in ("tp", "pp", "ep", "dp")})) == planned["winner"]
    # the winner is the cheapest per output token among the layouts that meet 30 ms: devices / tokens/s
    good = [c for c in planned["candidates"] if c["meets_targets"]]
    assert good[0]["device_s_per_output_token"] == min(c["device_s_per_output_token"] for c in good)
    assert served["itl_s"]["mean"]["floor"] <= 0.03
    # 70B in BF16 is 141 GB of weights: one 80 GiB H100 cannot hold it, the closed form refuses it unserved
    one = next(c for c in planned["candidates"] if c["split"] == "one device")
    assert not one["meets_targets"] and one["reason"].startswith("does not fit")


def test_serve_without_a_split_no_longer_fails_on_one_device(capsys: pytest.CaptureFixture[str]) -> None:
    # before: "weights ... exceed the usable ... per device; take a larger split (roofline plan)", exit 2
    d = _json(capsys, "serve", "llama-3-70b", "--machine", "h100", "--prompt", "1024", "--output", "64", "--json")
    assert d["parallel"]["tp"] > 1 and d["split_search"]["winner"] is not None
    # with a split given, serve serves that split (no search)
    d8 = _json(capsys, "serve", "llama-3-70b", "--machine", "h100", "--tp", "8", "--prompt", "1024", "--output", "64",
               "--json")
    assert d8["parallel"]["tp"] == 8 and "split_search" not in d8


def test_no_split_meets_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "llama-3-70b", "--machine", "dgx-h100", "--prompt", "2048", "--output", "64", "--itl-slo",
                 "1ms"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "no split" in err
