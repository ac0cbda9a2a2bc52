"""The package's folders keep their data paths apart: the chunking core imports no transport, no package imports one
above it in the order docs/architecture.rst gives, no module imports another that imports it back (lazy imports
inside functions count), and scripts stay entry points."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "isaaclab_suspend"


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> set[str]:
    """Every project module ``path`` imports, anywhere in it (``from . import x`` resolved to ``pkg.x`` when that
    is a module, else to ``pkg``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("isaaclab_suspend"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("isaaclab_suspend"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if _exists(sub) else target)
    return found


def _exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}


def test_policies_import_nothing_from_serving():
    graph = _graph()
    offenders = {m: sorted(d for d in deps if d.startswith("isaaclab_suspend.serving"))
                 for m, deps in graph.items() if m.startswith("isaaclab_suspend.chunking")}
    assert not {m: d for m, d in offenders.items() if d}, offenders


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles between modules. An edge between a module and a package it lies in (a package's
    ``__init__`` re-exporting its submodules, which import their siblings through it) closes no cycle."""
    graph = {m: {d for d in deps if not m.startswith(d + ".") and not d.startswith(m + ".")}
             for m, deps in graph.items()}
    state, stack, cycles = {}, [], []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_no_import_cycle_between_modules():
    # the check finds a cycle of two sibling modules imported lazily (the one this package once had) ...
    pkg = "isaaclab_suspend.learning"
    assert _cycles({pkg: {f"{pkg}.a"}, f"{pkg}.a": {f"{pkg}.b"}, f"{pkg}.b": {f"{pkg}.a"}})
    # ... and the package has none
    assert not _cycles(_graph()), _cycles(_graph())


def _layers() -> list[set[str]]:
    """The package order of docs/architecture.rst (the literal block after "The layers import downwards only"),
    lowest first: each layer the set of top-level packages and modules of ``isaaclab_suspend`` in it."""
    text = (ROOT / "docs" / "architecture.rst").read_text()
    block = text.split("The layers import downwards only", 1)[1].split("::\n\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line.strip())
    return [{name.strip() for name in layer.split(",")} for layer in " ".join(lines).split("->")]


def _package(module: str) -> str:
    return module.split(".")[1]


def _back_edges(graph: dict[str, set[str]], layers: list[set[str]]) -> list[str]:
    """``module -> imported module`` for each import of a package in the same layer or above the importer's."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                  if _package(m) != _package(d) and rank[_package(d)] >= rank[_package(m)])


def test_packages_import_downwards_only():
    layers = _layers()
    graph = {m: deps for m, deps in _graph().items() if m != "isaaclab_suspend"}
    placed = {name for layer in layers for name in layer}
    unplaced = sorted({_package(m) for m in graph} - placed)
    assert not unplaced, f"packages not in docs/architecture.rst's layer order: {unplaced}"
    # the check finds an upward import and one within a layer ...
    assert _back_edges({"isaaclab_suspend.suspension.x": {"isaaclab_suspend.envs.y"},
                        "isaaclab_suspend.serving.x": {"isaaclab_suspend.rl.y"}}, layers) == [
        "isaaclab_suspend.serving.x -> isaaclab_suspend.rl.y", "isaaclab_suspend.suspension.x -> isaaclab_suspend.envs.y"]
    # ... and the package has none
    assert not _back_edges(graph, layers), _back_edges(graph, layers)


def test_scripts_stay_entry_points():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "scripts").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > (160 if p.parent.name == "benchmarks" else 120)}
    assert not long, f"scripts over 120 lines (benchmarks 160): {long}"


KIND_ROOTS = {"ChunkModelCfg": "model cfg", "ChunkSchedule": "schedule", "ChunkScheduleCfg": "schedule cfg"}
"""The base classes whose subclasses only their own package may ask for by ``isinstance``: a model source's cfg is
opened through the opener its registration names, a schedule's cfg builds its schedule (``class_type``), a
schedule's parameters are checked by its ``configure``."""


def _classes(sources: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Each class of ``sources`` (path -> text) deriving from a :data:`KIND_ROOTS` class, by name: its kind and the
    top-level package (or script) that defines it."""
    bases, home = {}, {}
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
                home[node.name] = _owner(path)

    def kind(name: str, seen=()) -> str | None:
        if name in KIND_ROOTS:
            return KIND_ROOTS[name]
        return next((k for b in bases.get(name, ()) if b not in seen and (k := kind(b, (*seen, name)))), None)

    return {name: (k, home[name]) for name in bases if (k := kind(name))}


def _owner(path: str) -> str:
    parts = pathlib.PurePath(path).parts
    return parts[1] if parts[0] == "isaaclab_suspend" and len(parts) > 2 else path


def _foreign_isinstances(sources: dict[str, str]) -> list[str]:
    """``path:line`` of each ``isinstance(x, C)`` where ``C`` is a model cfg or a schedule of another package."""
    classes, found = _classes(sources), []
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                target = node.args[1]
                for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                    name = t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", None)
                    if name in classes and classes[name][1] != _owner(path):
                        found.append(f"{path}:{node.lineno} isinstance of the {classes[name][0]} {name}")
    return found


def test_no_isinstance_of_a_model_cfg_or_schedule_outside_its_package():
    # the check finds a run asking which source a cfg is, and a policy asking which schedule it runs ...
    planted = {
        "isaaclab_suspend/chunking/sources.py": "class ChunkModelCfg: pass",
        "isaaclab_suspend/chunking/schedules.py": "class ChunkSchedule: pass\nclass Rtc(ChunkSchedule): pass\n"
                                                  "class ChunkScheduleCfg: pass\nclass RtcCfg(ChunkScheduleCfg): pass",
        "isaaclab_suspend/tasks/embedded.py": "class EmbeddedModelCfg(ChunkModelCfg): pass\nisinstance(c, EmbeddedModelCfg)",
        "isaaclab_suspend/runs/chunk_models.py": "isinstance(cfg, (int, embedded.EmbeddedModelCfg))",
        "isaaclab_suspend/chunking/policy.py": "isinstance(s, Rtc)",
        "isaaclab_suspend/runs/evaluation.py": "isinstance(s, schedules.RtcCfg)",
    }
    assert _foreign_isinstances(planted) == [
        "isaaclab_suspend/runs/chunk_models.py:1 isinstance of the model cfg EmbeddedModelCfg",
        "isaaclab_suspend/runs/evaluation.py:1 isinstance of the schedule cfg RtcCfg"]
    # ... and the package and the scripts have none
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
    sources = {str(p.relative_to(ROOT)): p.read_text() for p in files}
    assert not _foreign_isinstances(sources), _foreign_isinstances(sources)
