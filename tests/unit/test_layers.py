"""The layering rules, read from the source (no imports): ``rl_core`` is pure RL code (no
Prefect, Ray, MLflow or boto3), ``infra`` never imports ``tasks`` or ``flows``, ``tasks``
never import ``flows``."""

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
        "tasks",
        "flows",
    },
    "infra": {"tasks", "flows"},
    "tasks": {"flows"},
}


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
