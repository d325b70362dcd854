"""The pages against hostile names and nondeterminism: one-pass templates, a hash-based
Content-Security-Policy, and the same bytes from the same command whatever the hash seed.

A model's name is its config folder's name, so a user can name a model "@@PLOTLY@@": the page must
keep it as text (chained `.replace()` would splice 4.8 MB of plotly.js into the data and the title,
and the page would never render). The browser side (no CSP violation, the chart renders) is in
tests/test_browser_page.py.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.report.page.roofline import csp, fill

HOSTILE = "@@PLOTLY@@ @@DATA@@ @@SCRIPT@@ @@CSP@@ @@TITLE@@ @MEMORY@ <b>x"
# a small Llama-shaped config: 2 layers of 256, so that the commands run in a fraction of a second
CONFIG = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048,
          "torch_dtype": "bfloat16"}


@pytest.fixture(scope="module")
def hostile_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models") / HOSTILE
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    return folder


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def _data(text: str, element_id: str) -> dict:
    match = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', text, re.S)
    assert match is not None
    return dict(json.loads(match.group(1)))


def _inline_scripts(text: str) -> list[str]:
    """The bodies of the executable inline scripts (not the JSON data block)."""
    return re.findall(r"<script>(.*?)</script>", text, re.S)


def _policy(text: str) -> dict[str, list[str]]:
    match = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', text)
    assert match is not None
    out: dict[str, list[str]] = {}
    for part in match.group(1).split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def _sha256(body: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"


def test_fill_replaces_each_placeholder_once_and_never_rescans_a_value() -> None:
    # a value that is itself a placeholder stays as it is: one pass over the template only
    assert fill("<h1>@@TITLE@@</h1>@@DATA@@", {"TITLE": "@@DATA@@", "DATA": "[1]"}) == "<h1>@@DATA@@</h1>[1]"
    assert fill("a @X@ b @X@", {"X": "@X@@Y@"}, marker="@") == "a @X@@Y@ b @X@@Y@"
    with pytest.raises(KeyError, match="@@NOPE@@"):
        fill("@@NOPE@@", {})


@pytest.mark.parametrize("command", ["model", "serve"])
def test_a_model_named_like_a_placeholder_stays_text(command: str, hostile_model: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"{command}.html"
    extra = ["--prompt", "128", "--output", "16"] if command == "serve" else []
    code = main([command, str(hostile_model), *extra, "--html", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    assert text.count(_plotly_js()) == 1  # plotly.js once, in its own script, nowhere else
    assert len(_inline_scripts(text)) == 2  # plotly.js and the page's own script
    data = _data(text, "roofline-data" if command == "model" else "serve-data")
    assert HOSTILE in data["title"]  # the name, verbatim, in the data
    title = re.search(r"<title>(.*?)</title>", text, re.S)
    assert title is not None and html.escape(HOSTILE) in title.group(1)  # and escaped in <title>


@pytest.mark.parametrize("command", ["model", "serve"])
def test_policy_names_each_inline_script_by_its_hash(command: str, hostile_model: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"{command}.html"
    extra = ["--prompt", "128", "--output", "16"] if command == "serve" else []
    assert main([command, str(hostile_model), *extra, "--html", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text(encoding="utf-8")
    policy = _policy(text)
    scripts = _inline_scripts(text)
    # exactly the hashes of the two scripts the page runs; no 'unsafe-inline' or 'unsafe-eval' for scripts
    assert sorted(policy["script-src"]) == sorted(_sha256(s) for s in scripts)
    assert policy["default-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"] and policy["form-action"] == ["'none'"]
    assert policy["style-src"] == ["'unsafe-inline'"]  # plotly writes style attributes as it draws
    assert csp(["x"]).count("sha256-") == 1


def _cli_bytes(args: list[str], out: Path, seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-c", "from roofline.cli import main; raise SystemExit(main())", *args,
                           "--html", str(out)], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    return out.read_bytes()


@pytest.mark.parametrize("args", [
    ["model", "llama-3-70b", "--machine", "h100", "--tp", "8", "--phase", "decode", "--batch", "64",
     "--context", "8192"],
    ["model", "mixtral-8x7b", "--machine", "h200", "--phase", "prefill", "--batch", "2", "--prompt", "512"],
    ["serve", "llama-3-70b", "--machine", "dgx-h100", "--tp", "8", "--prompt", "2048", "--output", "256"],
], ids=["model-tp8", "model-moe-prefill", "serve"])
def test_same_command_same_bytes_under_any_hash_seed(args: list[str], tmp_path: Path) -> None:
    # set and dict orders that followed str hashes would differ between seeds 1 and 2
    first = _cli_bytes(args, tmp_path / "a.html", "1")
    second = _cli_bytes(args, tmp_path / "b.html", "2")
    assert len(first) > 4_000_000  # a whole page: plotly.js alone is about 4.8 MB
    assert first == second
