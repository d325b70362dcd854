"""Issue 22's census: every real config.json aiconfigurator-core ships, run as a user would.

For each `*_config.json` in aiconfigurator-core's `model_configs/` (an `X_hf_quant_config.json` beside
it is read as ModelOpt's quantization, as `roofline model` reads it), runs

    roofline model <config.json> --machine h200 --phase decode --batch 8 --context 8192

in this process and prints one line: `OK  <model> | <params line, 50 characters> | weights <dtype>`, or
`REFUSED <model> | <the error line, 200 characters>` (the list of supported architectures left out). A
command that ended without one error line, or with a traceback, is printed `BROKEN`: the issue's bar
is that every config is analysed or refused in one line. Needs the calibration extra
(`pip install -e '.[calibration]'`). Usage: python bench/census_model_configs.py [OUT.txt]
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from importlib import metadata, resources
from pathlib import Path


def run(path: Path) -> str:
    from roofline.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["model", str(path), "--machine", "h200", "--phase", "decode", "--batch", "8",
                     "--context", "8192"])
    name = path.name[: -len("_config.json")]
    errors = [line for line in err.getvalue().splitlines() if line.startswith("roofline: error:")]
    if code == 0:
        text = out.getvalue()
        params = next((line[len("params: "):] for line in text.splitlines() if line.startswith("params: ")), "")
        dtype = re.search(r"weights ([\w.]+)", text)
        return f"OK  {name} | {params[:50]} | weights {dtype.group(1) if dtype else '?'}"
    if code == 2 and len(errors) == 1 and "Traceback" not in err.getvalue():
        line = errors[0].replace(f"{path.parent}/", "").split("; supported:")[0]  # the file's name, not its folder
        return f"REFUSED {name} | {line[:200]}"
    return f"BROKEN {name} | exit {code}: {err.getvalue().strip()[:200]!r}"


def main() -> int:
    folder = Path(str(resources.files("aiconfigurator_core") / "model_configs"))
    configs = sorted(p for p in folder.glob("*_config.json") if not p.name.endswith("_hf_quant_config.json"))
    lines = [run(p) for p in configs]
    ok = sum(line.startswith("OK") for line in lines)
    refused = sum(line.startswith("REFUSED") for line in lines)
    head = (f"# roofline model <config.json> --machine h200 --phase decode --batch 8 --context 8192, for every "
            f"config.json in aiconfigurator-core {metadata.version('aiconfigurator-core')} model_configs/ "
            f"(bench/census_model_configs.py): {ok} analysed, {refused} refused, "
            f"{len(lines) - ok - refused} broken, of {len(lines)}")
    text = "\n".join([head, *lines]) + "\n"
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text)
    print(text, end="")
    return 0 if ok + refused == len(lines) else 1


if __name__ == "__main__":
    sys.exit(main())
