"""The house has floors, and every import points down.

The import statements of every module under src/roofline are read with `ast`, wherever they stand
(top level, inside a function, under TYPE_CHECKING), so a lazy import that climbs fails here too.
A room may import its own modules and the rooms on lower floors; rooms on one floor (models,
measure and tracing) do not import each other; diff, which joins a recorded program with its analytic
model, is the floor above them. The package's `__init__` is the facade above all.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "roofline"

# bottom to top; rooms on one floor are siblings and may not import each other
FLOORS: tuple[tuple[str, ...], ...] = (
    ("frozen",),  # @dataclass(frozen=True) made without compiling five of its six functions (start-up)
    ("errors", "vocab"),
    ("units", "dtypes"),
    ("fileio",),
    ("hardware",),
    ("graph",),
    ("kernels",),
    ("placement",),
    ("expectation",),  # a placed kernel mapped to its expected band (DESIGN.md "Floor, then expectation")
    ("parallel",),
    ("models", "measure", "tracing"),
    ("diff", "calibration"),  # a program against its model; measured tables joined to our kernels, fitted
    ("serving",),
    ("training",),  # a training step: its kernels, memory, communication and MFU (above models, below report)
    ("explain",),
    ("report",),
    ("cli",),
    ("__init__",),
)
FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}
HEAVY = ["torch", "matplotlib", "plotly", "numpy"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, roofline module) for every import statement in the file, lazy or not."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "roofline"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "roofline":
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.append((node.lineno, sub if sub in MODULES else node.module))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__"):
            out.append((node.lineno, _dynamic_target(node)))
    return out


def _dynamic_target(call: ast.Call) -> str:
    """A name-built import's target as far as its text fixes it: `import_module(f"roofline.cli.{x}")` is
    a module of the room roofline.cli ("roofline.cli.*"); `f"roofline.{x}"` some room ("roofline.*"),
    which only the facade, above every room, may import; anything else "<dynamic import>"."""
    arg = call.args[0] if call.args else None
    head = ""
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        head = str(arg.values[0].value)
    parts = head.split(".")
    if len(parts) >= 2 and parts[0] == "roofline":
        return "roofline.*" if parts[1] == "" else f"roofline.{parts[1]}.*"
    return "<dynamic import>"


def edges() -> list[tuple[str, int, str]]:
    return [(mod, line, target) for mod, path in sorted(MODULES.items()) for line, target in imports(path)]


def test_every_room_has_a_floor() -> None:
    missing = sorted({room(m) for m in MODULES} - set(FLOOR))
    assert not missing, f"rooms without a floor in FLOORS: {missing}"


def test_every_import_points_down() -> None:
    climbing = []
    for mod, line, target in edges():
        if target == "<dynamic import>" or (target == "roofline.*" and room(mod) != "__init__"):
            climbing.append(f"{mod}:{line} imports by name at run time (register explicitly instead)")
            continue
        if target == "roofline.*":  # the facade: every room is below it
            continue
        target = target.removesuffix(".*")
        a, b = room(mod), room(target)
        if a == b:
            continue
        if FLOOR[b] >= FLOOR[a]:
            how = "a sibling on its floor" if FLOOR[b] == FLOOR[a] else "a room above it"
            climbing.append(f"{mod}:{line} imports {target}, {how}")
    assert not climbing, "imports that do not point down:\n" + "\n".join(climbing)


def test_no_import_cycle_between_files() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod, _line, target in edges():
        if target in graph and target != mod and not MODULES[mod].name == "__init__.py":
            graph[mod].add(target)
    seen: dict[str, int] = {}  # 1 on the stack, 2 done
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in seen:
                visit(nxt, [*stack, nxt])
        seen[node] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_a_lazy_import_that_climbs(tmp_path: Path) -> None:
    # the rule itself must catch what a module-loading check lets slip: an import inside a function
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from roofline.report.outputs import model_figure\n    return model_figure\n")
    [(line, target)] = imports(src)
    assert (line, room(target)) == (2, "report")
    assert FLOOR[room(target)] > FLOOR["placement"]


def test_the_checker_reads_what_a_name_built_import_fixes(tmp_path: Path) -> None:
    # import_module(f"roofline.cli.{x}") is an import of the room cli; f"roofline.{x}" of any room (only
    # the facade may: every room is below it); a name with no room in its text cannot be checked at all
    src = tmp_path / "m.py"
    src.write_text("import importlib\nimportlib.import_module(f'roofline.cli.{x}')\n"
                   "importlib.import_module(f'roofline.{x}')\nimportlib.import_module(name)\n")
    assert imports(src) == [(2, "roofline.cli.*"), (3, "roofline.*"), (4, "<dynamic import>")]


def _loaded_after(statement: str) -> str:
    code = f"import sys\n{statement}\nbad = [m for m in {HEAVY!r} if m in sys.modules]\nprint(','.join(bad))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_core_models_and_cli_start_import_nothing_heavy() -> None:
    # numpy, torch and the plotting libraries load only inside the functions that need them
    for statement in ("import roofline, roofline.placement, roofline.explain, roofline.kernels",
                      "import roofline.models", "import roofline.cli"):
        assert _loaded_after(statement) == "", statement


def test_notebook_methods_are_drawables_own_and_draw_through_the_declared_entry_point() -> None:
    # Drawable (in placement) draws with the report room, above it, without an import climbing: the
    # package declares the drawing module in pyproject.toml (pandas finds its plotting backend so), and
    # nothing is attached to the class from outside, so importing roofline loads no report module
    import tomllib

    from roofline.placement import NOTEBOOK_ENTRY_POINTS, Drawable

    project = tomllib.loads((SRC.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"][NOTEBOOK_ENTRY_POINTS] == {"draw": "roofline.report.notebook"}
    assert {"plot", "_repr_html_"} <= set(vars(Drawable))
    code = "import sys, roofline\nprint(sorted(m for m in sys.modules if m.startswith('roofline.report')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
