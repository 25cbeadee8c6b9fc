"""The train CLI on a local cluster announcing one logical GPU (``cluster.num_gpus_per_node=1``):
the run says its placement indices are GPUs, the trainer (with the hybrid engine's rollout
policy) reserves GPU 0 and the env worker none, the GPU-hours of every phase are the
reserved GPU times its wall time. (A placement naming a GPU the cluster lacks is refused
before any worker starts: ``tests/cluster/test_gpu_placement.py``; the CLI exits 2 on it:
``tests/unit/test_cli_exit_codes.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from infra.cluster.devices import ALLOW_LOGICAL_GPUS_VAR
from tests.integration.conftest import find_run, run_train

pytestmark = pytest.mark.integration


def test_a_run_on_one_gpu_places_the_trainer_there_and_bills_gpu_hours(
    tmp_path: Path, train_env
) -> None:
    env = train_env | {ALLOW_LOGICAL_GPUS_VAR: "1"}
    out = run_train(
        tmp_path,
        env,
        "run.name=gpu-run",
        "run.max_iterations=2",
        "run.eval_interval=2",
        "eval.num_episodes=2",
        "cluster.num_gpus_per_node=1",
    )
    assert "placement on GPUs (cluster.device=auto)" in out
    assert "device actor 0" not in out  # per-worker lines go to the log file only
    log = (tmp_path / "gpu-run" / "rlpipe.log").read_text()
    assert "device actor 0: cpu (GPU ids [0] on node" in log
    assert "CUDA_VISIBLE_DEVICES=0," in log
    assert "device env 0: cpu (GPU ids [] on node" in log
    assert "CUDA_VISIBLE_DEVICES=," in log
    assert "placement actor: 1 worker(s) on GPUs 0 (1 GPU" in log
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = find_run(client, "gpu-run")
    for phase in ("rollout", "update"):
        seconds = {
            m.step: m.value for m in client.get_metric_history(run.info.run_id, f"time/{phase}")
        }
        gpu_hours = {
            m.step: m.value
            for m in client.get_metric_history(run.info.run_id, f"cost/gpu_hours_{phase}")
        }
        assert seconds and set(seconds) == set(gpu_hours)
        for step, value in seconds.items():
            assert gpu_hours[step] == pytest.approx(value / 3600 * 1.0)  # one reserved GPU
    assert run.data.metrics["cost/gpu_hours_total"] > 0
