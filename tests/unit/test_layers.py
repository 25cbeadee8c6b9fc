"""The layering rules, read from the source (no imports).

The floors, bottom up: ``rl_core`` (pure RL code: no Prefect, Ray, MLflow or boto3),
``infra`` (the cluster code every kind shares), ``kinds`` (one package per kind of
training), ``tasks``, ``flows``. A floor imports only the floors below it; ``rl_core`` does
not even name a module above it in a string; no module of ``rl_core`` imports itself
through others; no folder of ``infra`` or ``kinds`` imports itself through other folders;
across the project import circles are few and small.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "rl_core": {
        "prefect",
        "prefect_ray",
        "ray",
        "mlflow",
        "boto3",
        "botocore",
        "infra",
        "kinds",
        "tasks",
        "flows",
    },
    "infra": {"kinds", "tasks", "flows"},
    "kinds": {"tasks", "flows"},
    "tasks": {"flows"},
}
#: The project's floors, bottom up.
FLOORS = ("rl_core", "infra", "kinds", "tasks", "flows")


def imported_packages(path: Path) -> set[str]:
    """Top-level names of the modules ``path`` imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_its_layer_allows(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {package}/"
    bad = {
        str(f.relative_to(ROOT)): sorted(imported_packages(f) & FORBIDDEN[package]) for f in files
    }
    assert not {f: names for f, names in bad.items() if names}


def test_the_scan_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    import ray.util\n    from mlflow import log_metric\n")
    assert imported_packages(sample) == {"ray", "mlflow"}


def runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` outside ``if TYPE_CHECKING:`` blocks (imports only for types)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        checking = isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
        checking = checking or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        if isinstance(node, ast.If) and checking:
            skipped.update(id(inner) for part in node.body for inner in ast.walk(part))
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def test_imports_for_types_only_are_not_edges() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ray\n")
    imported = [n for n in runtime_nodes(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [n.module for n in imported if isinstance(n, ast.ImportFrom)] == ["typing"]
    assert not [n for n in imported if isinstance(n, ast.Import)]


def module_graph(*packages: str) -> dict[str, set[str]]:
    """Module → the modules of ``packages`` it imports (imports inside functions included)."""
    paths = {}
    for path in (p for package in packages for p in (ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in runtime_nodes(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for target in filter(None, map(resolve, targets)):
                # A submodule's import of its own package is how Python imports it anyway.
                if target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (empty when there is none)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_rl_core_has_no_import_cycles() -> None:
    cycle = find_cycle(module_graph("rl_core"))
    assert not cycle, " -> ".join(cycle)


def test_the_cycle_scan_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected parts of two modules or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


#: At most this many import circles across the project, each of at most two modules.
MAX_CIRCLES, MAX_CIRCLE_SIZE = 2, 2


def test_the_project_has_few_small_import_circles() -> None:
    found = circles(module_graph(*FLOORS))
    described = "; ".join(" <-> ".join(part) for part in found)
    assert len(found) <= MAX_CIRCLES, described
    assert all(len(part) <= MAX_CIRCLE_SIZE for part in found), described


def test_the_circle_scan_finds_every_circle() -> None:
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": {"d"}, "d": {"c"}, "e": {"a"}}
    assert circles(graph) == [["a", "b"], ["c", "d"]]


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Folder (package directory) → the other folders its modules import.

    A folder's import of a folder above or below it in the same tree (``infra`` and
    ``infra.llm``) does not count: a package's ``__init__`` and its submodules are one unit.
    """

    def folder(module: str) -> str:
        parts = module.split(".")
        return module if (ROOT.joinpath(*parts)).is_dir() else ".".join(parts[:-1])

    folders: dict[str, set[str]] = {}
    for source, targets in graph.items():
        mine = folders.setdefault(folder(source), set())
        for target in map(folder, targets):
            folders.setdefault(target, set())
            nested = target.startswith(folder(source) + ".") or folder(source).startswith(
                target + "."
            )
            if target != folder(source) and not nested:
                mine.add(target)
    return folders


@pytest.mark.parametrize("package", ["infra", "kinds"])
def test_no_folder_imports_itself_through_other_folders(package: str) -> None:
    found = circles(folder_graph(module_graph(package)))
    assert not found, "; ".join(" <-> ".join(part) for part in found)


def test_the_folder_graph_joins_modules_by_folder() -> None:
    graph = {
        "infra.driver.session": {"infra.cluster.devices"},
        "infra.cluster.devices": {"infra.driver.faults"},
        "infra.driver.faults": set(),
    }
    assert circles(folder_graph(graph)) == [["infra.cluster", "infra.driver"]]


def module_strings(path: Path) -> list[str]:
    """The string constants of ``path`` that are not docstrings."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_rl_core_names_no_module_above_it_in_a_string() -> None:
    above = tuple(f"{floor}." for floor in FLOORS[1:])
    found = {
        str(path.relative_to(ROOT)): named
        for path in sorted((ROOT / "rl_core").rglob("*.py"))
        if (named := [s for s in module_strings(path) if s.strip().startswith(above)])
    }
    assert not found


def test_the_string_scan_sees_strings_but_not_docstrings(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text('"""infra.x is named here."""\nX = "infra.llm.engines:HFEngine"\n')
    assert module_strings(sample) == ["infra.llm.engines:HFEngine"]
