"""The JSON of every command the README shows, for a before/after comparison of a refactoring.

    python scripts/readme_json.py OUT.json      # writes {command: parsed JSON output}

tests/test_readme_outputs.py runs the same commands and compares them with the copy recorded in
tests/fixtures/readme_outputs.json (taken before the architecture reshaping), key by key.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

COMMANDS: tuple[str, ...] = (
    "model llama-3-70b --machine h100 --phase decode --batch 64 --context 8192",
    "kernel matmul 4096 4096 4096 --machine h100",
    "machines",
    "machine b200",
    "kernel rmsnorm 8192 8192",
    "kernel attention --seq 8192 --head-dim 128 --impl naive",
    "kernel attention --seq 8192 --head-dim 128 --impl fused",
    "kernel matmul 400 28672 8192 --machine b200 --dtype fp8 --storage-dtype bf16",
    "kernel custom --flop 4.4e11 --bytes 268MB --machine mi300x",
    "model llama-3-70b --phase decode --batch 64 --context 8192",
    "model llama-3-70b --phase prefill --batch 1 --prompt 8192 --fusion none",
    "model deepseek-v3 --machine h200 --batch 64 --context 32768 --kv-dtype fp8",
    "sweep llama-3-70b --batch 1:256 --context 8192 --format json",
    "compare llama-3-70b --kv-dtype bf16,fp8,nvfp4 --batch 32 --context 131072 --format json",
)


def run(command: str) -> object:
    from roofline.cli import main

    argv = command.split()
    if "--format" not in argv:
        argv.append("--json")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    if code != 0:
        raise SystemExit(f"`roofline {command}` exited {code}: {err.getvalue().strip()}")
    return json.loads(out.getvalue())


def collect() -> dict[str, object]:
    return {c: run(c) for c in COMMANDS}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python scripts/readme_json.py OUT.json")
    with open(sys.argv[1], "w") as f:
        json.dump(collect(), f, indent=1, sort_keys=True)
