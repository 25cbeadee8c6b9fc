"""examples/ext_policy: a package outside rlpipe, installed and loaded only through
RLPIPE_EXT_MODULE, trains through the real train flow (Prefect API, local Ray workers,
MLflow), evaluates, and converts to a standalone model directory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient

from tests.integration.conftest import ROOT, find_run, run_process, run_train, train_cmd

pytestmark = pytest.mark.integration
CONFIG = "examples/ext_policy/ppo_catch_cnn.yaml"
FIXTURE_MODULES = ROOT / "tests" / "fixtures" / "ext_modules"


@pytest.fixture(scope="module")
def ext_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package installed with pip into its own folder (not on sys.path)."""
    source = tmp_path_factory.mktemp("ext-src") / "ext_policy"
    shutil.copytree(ROOT / "examples" / "ext_policy", source)
    target = tmp_path_factory.mktemp("ext-site")
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
            *("--no-deps", "--no-build-isolation", "--no-index", "--target", str(target)),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    assert (target / "ext_policy" / "__init__.py").is_file()
    return target


def _run(cmd: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, str]:
    proc = run_process(cmd, env, timeout)
    return proc.returncode, proc.stdout + proc.stderr


def test_example_package_trains_evaluates_and_converts(
    tmp_path: Path, train_env: dict[str, str], ext_site: Path, clean_registries, monkeypatch
) -> None:
    env = {**train_env, "RLPIPE_EXT_MODULE": "ext_policy", "PYTHONPATH": str(ext_site)}
    out = run_train(tmp_path, env, "--config", CONFIG)
    assert "loaded extension module ext_policy" in out

    # Learning: every part of this run (env, CNN policy, reward, advantage) came from the
    # package, in the env, rollout and trainer workers and in the Ray evaluation tasks.
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = find_run(client, "catch-cnn")
    assert client.get_experiment(run.info.experiment_id).name == "catch-cnn_actor_critic"
    evals = sorted(
        client.get_metric_history(run.info.run_id, "eval/return_mean"), key=lambda m: m.step
    )
    assert evals[0].value < 0.0, evals  # a fresh policy misses most balls
    assert max(m.value for m in evals) >= 0.8, evals
    assert run.data.params["model.model_type"] == '"cnn_actor_critic"'

    # Standalone evaluation of the latest checkpoint reproduces the last in-run evaluation.
    code, text = _run(
        [sys.executable, "flows/evaluate.py", "--run-name", "catch-cnn"]
        + ["--output-dir", str(tmp_path), "--episodes", "20"],
        env,
    )
    assert code == 0, text[-4000:]
    summary = json.loads(text[text.index("{") : text.rindex("}") + 1])
    assert summary["eval/return_mean"] == pytest.approx(evals[-1].value)

    # The converter needs the extension module too, and says so.
    convert = [sys.executable, "-m", "infra.checkpoint.convert", "--run-name", "catch-cnn"]
    convert += ["--output-dir", str(tmp_path), "--out", str(tmp_path / "model")]
    without = {k: v for k, v in env.items() if k != "RLPIPE_EXT_MODULE"}
    code, text = _run(convert, without)
    assert code == 2 and "unknown model type 'cnn_actor_critic'" in text, text[-3000:]
    assert "RLPIPE_EXT_MODULE" in text and not (tmp_path / "model").exists()
    code, text = _run(convert, env)
    assert code == 0, text[-3000:]

    # Round trip: the converted model acts exactly like the checkpointed policy.
    monkeypatch.syspath_prepend(str(ext_site))
    monkeypatch.setenv("RLPIPE_EXT_MODULE", "ext_policy")
    from infra.checkpoint.export import load_exported_policy, policy_from_checkpoint
    from infra.checkpoint.reader import locate_checkpoint
    from rl_core.envs import VectorEnvAdapter

    exported, meta = load_exported_policy(tmp_path / "model")
    assert meta["policy_class"] == "ext_policy.cnn_policy.CNNActorCritic"
    ckpt_policy, config, _ = policy_from_checkpoint(
        locate_checkpoint(tmp_path / "catch-cnn" / "checkpoints")
    )
    from rl_core.config import validate_config

    envs = VectorEnvAdapter(validate_config(config).env, 64, seed=123)
    obs = envs.observation()
    assert obs["main_images"].shape == (64, 7, 7, 1)
    for mode in ("eval", "train"):
        a, ra = exported.predict_action_batch(obs, mode, generator=torch.Generator().manual_seed(0))
        b, rb = ckpt_policy.predict_action_batch(
            obs, mode, generator=torch.Generator().manual_seed(0)
        )
        np.testing.assert_array_equal(a, b)
        assert torch.equal(ra["prev_logprobs"], rb["prev_logprobs"])
    envs.close()


def test_example_config_without_ext_module_fails_before_starting(
    tmp_path: Path, train_env: dict[str, str], ext_site: Path
) -> None:
    # The package is installed (importable) but not named in RLPIPE_EXT_MODULE.
    env = {**train_env, "PYTHONPATH": str(ext_site)}
    env.pop("RLPIPE_EXT_MODULE", None)
    cmd = train_cmd(tmp_path / "out", "--config", CONFIG, seed_store=False)
    code, text = _run(cmd, env)
    assert code == 2, text[-3000:]
    assert "env.env_type = 'catch': unknown env type 'catch'; known: gym" in text
    assert "model.model_type = 'cnn_actor_critic': unknown model type" in text
    assert "set RLPIPE_EXT_MODULE to the module that registers it" in text
    assert not (tmp_path / "out").exists()  # no server, cluster or MLflow store was started


def test_module_failing_inside_workers_stops_the_run_clearly(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    env = {
        **train_env,
        "RLPIPE_EXT_MODULE": "ext_fails_in_workers",
        "PYTHONPATH": str(FIXTURE_MODULES),
    }
    code, text = _run(train_cmd(tmp_path, "run.max_iterations=2"), env)
    assert code == 2, text[-3000:]
    assert (
        "error: env worker 0 failed to start: infra.extensions.ExtensionError: RLPIPE_EXT_MODULE "
        "module 'ext_fails_in_workers' failed to load: ImportError: this module cannot load "
        "inside Ray workers"
    ) in text
    assert not (tmp_path / "ppo-cartpole" / "checkpoints" / "latest.json").exists()
    # the terminal: rlpipe's few start-up lines and the error with the log's path; the dead
    # worker's traceback, abort stack and module list are in the run's log only
    log = tmp_path / "ppo-cartpole" / "rlpipe.log"
    lines = text.strip().splitlines()
    assert len(lines) <= 10 and f"(full log: {log})" in lines[-1], text[-3000:]
    assert "(EnvWorker pid=" not in text, text[-3000:]
    logged = log.read_text()
    assert "(EnvWorker pid=" in logged and "Extension modules:" in logged, logged[-4000:]
