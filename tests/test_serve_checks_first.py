"""serve checks every input it can before it computes anything (issue 24 item 6: a draft whose context is
too short for the request failed only after the target's whole report, ~27 s). The order is what is
tested, not a time: the builders are replaced by ones that fail the test if they are reached."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from roofline.cli import main

SERVE = importlib.import_module("roofline.serving.serve")  # the module: roofline.serving.serve is also a function


@pytest.fixture
def nothing_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the prefill analysis, the decode step model or the split search fails the test."""
    from roofline.models.stepmodel import StepModel
    from roofline.serving import splits

    def reached(*_: Any, **__: Any) -> Any:
        raise AssertionError("a step was built before the inputs were checked")

    monkeypatch.setattr(SERVE, "_serve_step", reached)
    monkeypatch.setattr(SERVE, "analyze", reached)
    monkeypatch.setattr(StepModel, "fit", classmethod(reached))
    monkeypatch.setattr(splits, "serve_search", reached)


def _one_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


LONG = ["--prompt", "16000", "--output", "256", "--draft", "llama-3-8b", "--acceptance", "0.8"]


@pytest.mark.usefixtures("nothing_computed")
def test_a_draft_too_short_for_the_request_is_refused_first(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama 3 8B's config.json: max_position_embeddings 8192 (its model card: 8k context); Llama 3.1 405B
    # takes 131,072, so 16,000 + 256 = 16,256 tokens fit the target and not the draft
    err = _one_error(capsys, "serve", "llama-3.1-405b", "--machine", "dgx-h200", "--tp", "8", *LONG)
    assert "--draft llama-3-8b runs beside the target on TP 8" in err
    assert f"{16000 + 256} tokens exceeds llama-3-8b's context of 8192" in err


@pytest.mark.usefixtures("nothing_computed")
def test_the_draft_is_checked_before_the_split_search(capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_error(capsys, "serve", "llama-3.1-405b", "--machine", "dgx-h200", *LONG)
    assert "exceeds llama-3-8b's context of 8192" in err


@pytest.mark.usefixtures("nothing_computed")
def test_draft_tokens_past_the_context_are_refused_first(capsys: pytest.CaptureFixture[str]) -> None:
    # the verify step checks k + 1 tokens at the mid-generation context prompt + output/2 = 100 + 5 = 105
    err = _one_error(capsys, "serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "100",
                     "--output", "10", "--draft", "llama-3-8b", "--draft-tokens", "200", "--acceptance", "0.8")
    assert "k + 1 = 201 tokens at the mid-generation context of 105" in err and "draft at most 104 tokens" in err


@pytest.mark.usefixtures("nothing_computed")
def test_a_disaggregated_group_the_model_cannot_run_is_refused_first(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama 3 70B has 64 query heads (config.json num_attention_heads): TP 3 does not divide them
    err = _one_error(capsys, "serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048",
                     "--output", "256", "--disaggregate", "3:5")
    assert "the prefill group runs TP 3" in err and "does not divide llama-3-70b's 64 query heads" in err
    # 4 + 12 devices: the 12 span a second node of 8 without filling it
    err = _one_error(capsys, "serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048",
                     "--output", "256", "--disaggregate", "4:12")
    assert "a group of 12 devices spans nodes of 8" in err


def test_a_draft_that_fits_is_still_served(capsys: pytest.CaptureFixture[str]) -> None:
    # the checks refuse only what cannot run: 2048 + 256 tokens are within both models' 8192
    assert main(["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output", "256",
                 "--draft", "llama-3-8b", "--acceptance", "0.8"]) == 0
    assert "speculative" in capsys.readouterr().out
