"""A new built-in kind is one package under ``kinds/`` and one entry-point line.

The test copies the source tree, adds ``kinds/toy/`` (the bandit of
``examples/bandit_category`` as a built-in kind package) and its ``rlpipe.kinds`` entry point
in ``pyproject.toml``, and nothing else; the copy then trains and evaluates the toy kind
through the real train and evaluate flows, with no extension module loaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import QUICK_RUN, ROOT, find_run, run_process, seed_mlflow_store

pytestmark = pytest.mark.integration
EXAMPLE = ROOT / "examples" / "bandit_category" / "bandit_category.py"
ENTRY_POINTS = '[project.entry-points."rlpipe.kinds"]\n'


def tracked_files(root: Path) -> list[str]:
    """The files git tracks under ``root``."""
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    return [name for name in out.decode().split("\0") if name]


def copy_tree(files: list[str], source: Path, target: Path) -> None:
    """Copy ``files`` from ``source`` to ``target`` (links stay links)."""
    for name in files:
        src, dst = source / name, target / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)


def snapshot(root: Path) -> dict[str, bytes]:
    """Path → bytes of every file under ``root`` (links: their target)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(root))] = os.readlink(path).encode()
        elif path.is_file() and "__pycache__" not in path.parts:
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


def add_toy_kind(checkout: Path) -> None:
    """``kinds/toy/``: the bandit example registered as a built-in kind, and its entry point."""
    package = checkout / "kinds" / "toy"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""A toy kind: a softmax policy over bandit arms."""\n\n'
        "from kinds.toy import registration  # noqa: F401  (registers the kind)\n"
    )
    source = EXAMPLE.read_text()
    source = source.replace('name="bandit"', 'name="toy"').replace(
        'kind_name = "bandit"', 'kind_name = "toy"'
    )
    source = source.replace('"bandit_softmax"', '"toy_softmax"').replace(
        "force=True", "force=False"
    )
    (package / "registration.py").write_text(source + "\n\nregister()\n")
    pyproject = checkout / "pyproject.toml"
    text = pyproject.read_text()
    assert ENTRY_POINTS in text
    pyproject.write_text(text.replace(ENTRY_POINTS, ENTRY_POINTS + 'toy = "kinds.toy"\n'))


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source tree with the toy kind added."""
    root = tmp_path_factory.mktemp("checkout")
    copy_tree(tracked_files(ROOT), ROOT, root)
    before = snapshot(root)
    add_toy_kind(root)
    after = snapshot(root)
    changed = {name for name in before if after.get(name) != before[name]}
    added = set(after) - set(before)
    assert changed == {"pyproject.toml"}
    assert added == {"kinds/toy/__init__.py", "kinds/toy/registration.py"}
    return root


def test_a_kind_package_and_its_entry_point_train_and_evaluate(
    tmp_path: Path, train_env: dict[str, str], checkout: Path
) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(
        "run: {name: toy, max_iterations: 6, eval_interval: 3, checkpoint_interval: 3}\n"
        "model: {model_type: toy_softmax}\n"
        "env: {num_envs: 64}\n"
        "actor: {lr: 0.1}\n"
        "tracking: {registered_model_name: null}\n"
    )
    env = {**train_env, "PYTHONPATH": str(checkout)}
    env.pop("RLPIPE_EXT_MODULE", None)
    out_dir = tmp_path / "out"
    seed_mlflow_store(out_dir)
    train = [sys.executable, str(checkout / "flows" / "train.py"), f"run.output_dir={out_dir}"]
    proc = run_process([*train, *QUICK_RUN, "--config", str(config)], env, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "loaded extension module" not in out
    client = MlflowClient(f"sqlite:///{out_dir / 'mlflow.db'}")
    run = find_run(client, "toy")
    assert client.get_experiment(run.info.experiment_id).name == "bandit-3-arms-toy_softmax"
    assert run.data.metrics["eval/return_mean"] in (0.2, 0.5, 0.8)

    evaluate = [sys.executable, str(checkout / "flows" / "evaluate.py"), "--run-name", "toy"]
    proc = run_process([*evaluate, "--output-dir", str(out_dir)], env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert '"eval/return_mean"' in proc.stdout


def test_without_its_entry_point_the_toy_model_has_no_kind(
    tmp_path: Path, train_env: dict[str, str], checkout: Path
) -> None:
    probe = (
        "from rl_core.kind import KINDS, kind_named\n"
        "kind_named('embodied')\n"
        "print(sorted(KINDS.names()))\n"
    )
    env = {**train_env, "PYTHONPATH": str(checkout)}
    listed = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "'toy'" in listed.stdout and "'reasoning'" in listed.stdout
    plain = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert plain.returncode == 0 and "'toy'" not in plain.stdout, plain.stderr[-3000:]
