"""The packages that load their names on first use (PEP 562: roofline, roofline.hardware, roofline.models)
give the same object an eager import would, whatever was imported before.

The trap: a lazy name that is also a submodule's name (`roofline.hardware.catalog`, the function, and
the module of the same name) is the module once that submodule has been imported anywhere, because
the import system sets the package's attribute to the module. So no lazy name may be a submodule's,
unless the package's class holds it as a property that ignores that assignment (roofline.models's
`search` and `sweep`, functions named as their modules)."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

LAZY = {"roofline": "_FACADE", "roofline.hardware": "_NAMES", "roofline.models": "_NAMES"}


@pytest.mark.parametrize("package", sorted(LAZY))
def test_no_lazy_name_is_a_submodule(package: str) -> None:
    pkg = importlib.import_module(package)
    names = getattr(pkg, LAZY[package])
    submodules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    guarded = {n for n, v in vars(type(pkg)).items() if isinstance(v, property) and v.fset is not None}
    assert not set(names) & submodules - guarded


@pytest.mark.parametrize("package", sorted(LAZY))
def test_every_lazy_name_is_its_modules_object_after_every_submodule_is_imported(package: str) -> None:
    # in a fresh interpreter: import every submodule first (as a long test run or a program may), then
    # each name must still be the object its module defines, not a module
    code = (f"import importlib, pkgutil, types\nimport {package} as pkg\n"
            "for m in pkgutil.iter_modules(pkg.__path__):\n    importlib.import_module(pkg.__name__ + '.' + m.name)\n"
            f"names = pkg.{LAZY[package]}\n"
            "def own(n, mod):\n    return getattr(importlib.import_module(pkg.__name__ + '.' + mod), n)\n"
            "wrong = [n for n, mod in names.items()\n"
            "         if getattr(pkg, n) is not own(n, mod) or isinstance(getattr(pkg, n), types.ModuleType)]\n"
            "print(wrong)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_kernel_query_loads_no_system_module_and_one_analysis_no_rich() -> None:
    # what the lazy names are for: the start-up of `roofline kernel` and of one `roofline model`. Only what the
    # commands load counts: an interpreter's own start-up may load importlib.resources already (a site .pth that
    # imports certifi does, on the CI's Python), which no command of ours can avoid
    code = ("import sys, io, contextlib\nbefore = set(sys.modules)\nfrom roofline.cli import main\n"
            "def loaded(*heads):\n    return sorted(m for m in set(sys.modules) - before if m.startswith(heads))\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['kernel', 'matmul', '64', '64', '64', '--machine', 'h100']) == 0\n"
            "print(loaded('roofline.hardware.system', 'rich', 'importlib.resources', 'roofline.report.points'))\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['model', 'llama-3-8b', '--phase', 'decode', '--batch', '8', '--context', '2048']) == 0\n"
            "print(loaded('rich', 'roofline.report.points', 'importlib.resources', 'roofline.models.search',\n"
            "             'roofline.models.sweep', 'roofline.models.architectures.deepseek'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "[]"]


def test_a_train_analysis_loads_none_of_the_inference_analysis() -> None:
    # `roofline train` (issue 23's bench) builds its step from the graph builder and the memory and split
    # formulas: the inference analysis, its step model, the split search and the sweeps stay unloaded
    # (roofline.models loads its names on first use), and so do rich and the other families' parsers
    code = ("import sys, io, contextlib\nbefore = set(sys.modules)\nfrom roofline.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['train', 'llama-3-70b', '--machine', 'dgx-h100', '--seq', '8192', '--global-batch',\n"
            "                 '512', '--tp', '8', '--pp', '4', '--dp', '16', '--json']) == 0\n"
            "new = set(sys.modules) - before\n"
            "print(sorted(m for m in new if m.startswith(('rich', 'roofline.models.analysis', 'roofline.models.step',\n"
            "             'roofline.models.search', 'roofline.models.sweep', 'roofline.models.architectures.q'))))\n"
            "print('roofline.training.analysis' in new)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "True"]


def test_a_llama_step_loads_no_other_layer_kinds_ops_and_the_cli_no_model_room() -> None:
    # roofline.models.build imports a layer kind's ops where a step first reaches them (bench_startup's one
    # decode analysis); a Llama decode step under TP 2 (its all-reduces through roofline.parallel) loads
    # none of the eleven modules, a DeepSeek-V3 one (MLA, routed and shared experts over DP 8 × EP 8) its
    # four (mla, with dsa and deltanet's StepBuilder, and experts), and `import roofline.cli` alone loads
    # neither the model room nor roofline.parallel
    kinds = ("attn_res_ops", "compressed_ops", "deltanet", "draft", "dsa", "experts", "kda", "latent", "mamba",
             "mla", "msa")
    code = ("import sys, io, contextlib\nimport roofline.cli\n"
            "print(sorted(m for m in sys.modules if m.startswith(('roofline.models', 'roofline.parallel'))))\n"
            "from roofline.cli import main\n"
            f"kinds = {tuple(f'roofline.models.{k}' for k in kinds)!r}\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['model', 'llama-3-8b', '--phase', 'decode', '--batch', '8', '--context', '2048',\n"
            "                 '--machine', 'dgx-h100', '--tp', '2', '--json']) == 0\n"
            "print(sorted(m for m in kinds if m in sys.modules), 'roofline.parallel' in sys.modules)\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['model', 'deepseek-v3', '--phase', 'decode', '--batch', '64', '--context', '4096',\n"
            "                 '--machine', 'dgx-h100', '--dp', '8', '--ep', '8', '--json']) == 0\n"
            "print(sorted(m for m in kinds if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "[] True", "['roofline.models.deltanet', 'roofline.models.dsa', "
                                "'roofline.models.experts', 'roofline.models.mla']"]
