"""Every real config.json aiconfigurator-core ships, through `roofline model` (issue 22's census).

For each `X_config.json` in aiconfigurator_core/model_configs (an `X_hf_quant_config.json` beside it is
read with it, not run on its own): `roofline model X_config.json --machine h200 --phase decode --batch 8
--context 8192`. OK: analysed, with the params line's first 50 characters and the weights dtype; REFUSED:
the one error line it exits with (to 200 characters, the list of supported architectures left out).
Anything else (a traceback, an exit code other than 0 or 2, an error of more than one line) is a FAILURE
and makes the script exit 1.

Usage: python bench/census_model_configs.py [--out FILE]   (needs the calibration extra: aiconfigurator-core)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
from pathlib import Path

ARGS = ["--machine", "h200", "--phase", "decode", "--batch", "8", "--context", "8192"]


def configs() -> list[Path]:
    import aiconfigurator_core  # the calibration extra; never imported by the library's core

    folder = Path(aiconfigurator_core.__file__).parent / "model_configs"
    return sorted(p for p in folder.glob("*_config.json") if not p.name.endswith("_hf_quant_config.json"))


def run(path: Path) -> tuple[str, str]:
    """(verdict, detail) of one config."""
    from roofline.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["model", str(path), *ARGS])
        except SystemExit as exc:  # click's standalone exit
            code = int(exc.code or 0)
    errors = [line for line in err.getvalue().splitlines() if line.startswith("roofline: error:")]
    if code == 0:
        text = out.getvalue()
        params = next((line for line in text.splitlines() if line.startswith("params:")), "")
        dtype = re.search(r"weights (\S+),", text)
        return "OK ", f"{params[len('params: '):][:50]} | weights {dtype.group(1) if dtype else '?'}"
    if code == 2 and len(errors) == 1 and "Traceback" not in err.getvalue():
        return "REFUSED", errors[0].split("; supported:")[0].replace(str(path.parent) + "/", "")[:200]
    return "FAILURE", f"exit {code}: {err.getvalue()[-300:]!r}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = [(path.name.removesuffix("_config.json"), *run(path)) for path in configs()]
    counts = {v: sum(1 for _, verdict, _ in rows if verdict == v) for v in ("OK ", "REFUSED", "FAILURE")}
    lines = [f"# roofline model <config.json> {' '.join(ARGS)}, for every config.json in aiconfigurator-core's "
             f"model_configs/ (issue 22; bench/census_model_configs.py): OK = analysed (the params line's first 50 "
             f"characters and the weights dtype), REFUSED = the one error line naming what it cannot read",
             f"# {counts['OK ']} analysed, {counts['REFUSED']} refused, {counts['FAILURE']} failures",
             *(f"{verdict} {name} | {detail}" for name, verdict, detail in rows)]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    sys.stdout.write(text)
    return 1 if counts["FAILURE"] else 0


if __name__ == "__main__":
    sys.exit(main())
