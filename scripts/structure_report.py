"""Figures of the code's structure, read from the source of a checkout (nothing imported).

Prints: import circles between folders, ``Any``-typed ``cfg``/``runtime``/``session``
parameters, ``getattr(cfg…)`` probes outside config code, ``"module:name"`` strings in
``rl_core`` naming a module above it, worker calls by method-name string, non-test files
over 400 lines, ``sys.path.insert`` in ``flows/`` and ``infra/``, and how often the session
id is passed and looked up.

Usage:
  python scripts/structure_report.py [CHECKOUT]   # default: this checkout
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]).resolve()
FLOORS = [f for f in ("rl_core", "infra", "kinds", "tasks", "flows") if (ROOT / f).is_dir()]
#: Files whose ``session_id`` is an operating-system process session, not a run's.
PROCESS_SESSIONS = ("processes.py", "ray_head.py")
#: ``group.call("update", ...)``, ``call_within(step, t, "update", ...)``, ``call_sync(...)``.
STRING_CALL = r'\.call(?:_within|_sync)?\([^)]*"[a-z_]+"'


def sources(*floors: str) -> dict[Path, str]:
    """Path → text of every ``.py`` file under ``floors``."""
    return {p: p.read_text() for f in floors for p in sorted((ROOT / f).rglob("*.py"))}


def module_graph(code: dict[Path, str]) -> dict[str, set[str]]:
    """Module → the project modules it imports (inside functions too)."""
    paths = {}
    for path in code:
        parts = path.relative_to(ROOT).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.walk(ast.parse(code[path])):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for target in filter(None, map(resolve, targets)):
                if target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Folder → the other folders its modules import (nested folders are one unit)."""

    def folder(module: str) -> str:
        parts = module.split(".")
        return module if ROOT.joinpath(*parts).is_dir() else ".".join(parts[:-1])

    folders: dict[str, set[str]] = {}
    for source, targets in graph.items():
        mine = folders.setdefault(folder(source), set())
        for target in map(folder, targets):
            folders.setdefault(target, set())
            own = folder(source)
            if (
                target != own
                and not target.startswith(own + ".")
                and not own.startswith(target + ".")
            ):
                mine.add(target)
    return folders


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of ``graph`` with two nodes or more."""
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
    return found


def count(code: dict[Path, str], pattern: str, skip: tuple[str, ...] = ()) -> int:
    """Matches of ``pattern`` in ``code``, files whose path contains a ``skip`` part left out."""
    rx = re.compile(pattern)
    return sum(len(rx.findall(t)) for p, t in code.items() if not any(s in str(p) for s in skip))


def main() -> None:
    """Print the figures of :data:`ROOT`."""
    code = sources(*FLOORS)
    print(f"checkout: {ROOT}")
    found = circles(folder_graph(module_graph(code)))
    print(f"folder-level import circles: {len(found)}")
    for part in found:
        print("   ", " <-> ".join(part))
    print(
        "parameters typed Any: cfg",
        count(code, r"\bcfg: Any\b"),
        "/ runtime",
        count(code, r"\bruntime: Any\b"),
        "/ session",
        count(code, r"\bsession: Any\b"),
    )
    probes = count(code, r"getattr\((?:getattr\()?(?:self\.)?cfg\b", skip=("rl_core/config",))
    print(f"getattr(cfg...) probes outside config code: {probes}")
    above = re.compile(r"^(infra|kinds|tasks|flows)\.[\w.]+:\w+$")
    strings = sum(
        1
        for path, text in code.items()
        if path.relative_to(ROOT).parts[0] == "rl_core"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and above.match(node.value)
    )
    print(f'"module:name" strings in rl_core naming a module above it: {strings}')
    string_calls = count(code, STRING_CALL)
    print(f"worker calls by method-name string: {string_calls}")
    scripts = {p: p.read_text() for p in sorted((ROOT / "scripts").rglob("*.py"))}
    long = sorted(
        ((len(t.splitlines()), str(p.relative_to(ROOT))) for p, t in {**code, **scripts}.items()),
        reverse=True,
    )
    print("non-test .py files over 400 lines:", [f"{f} {n}" for n, f in long if n > 400] or "none")
    print(f"largest: {long[0][1]} ({long[0][0]} lines)")
    paths = sources(*(f for f in FLOORS if f in ("flows", "infra")))
    inserts = count(paths, r"sys\.path\.insert")
    print(f"sys.path.insert in flows/ and infra/: {inserts}")
    driver = sources(*(f for f in FLOORS if f != "rl_core"))
    mentions = count(driver, r"session_id", skip=PROCESS_SESSIONS)
    lookups = count(driver, r"(?<!def )get_session\(")
    print(f"session id: {mentions} mentions, {lookups} get_session lookups")


if __name__ == "__main__":
    main()
