"""The reasoning path end to end through the train CLI: Prefect flows and tasks, FSDP2
trainer ranks and rollout engines on Ray, MLflow metrics and sample tables, checkpoints
that convert to a Hugging Face directory, and a bit-identical resume. (The megatron
trainer's exact resume, also from TP 2 to TP 1, is checked on its ranks in
``tests/cluster/test_megatron_trainer.py``; its CLI runs in ``tests/vllm``.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
    TaskRunFilter,
    TaskRunFilterFlowRunId,
)
from prefect.settings import PREFECT_API_URL, temporary_settings
from safetensors.torch import load_file

from rl_core.models.tiny_lm import create_tiny_lm
from tests.integration.conftest import (
    ROOT,
    find_run,
    run_stopped_at_2_then_resumed,
    run_train,
    training_env,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def preset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small GRPO preset on the tiny model: 2 FSDP2 ranks, patch sync, KL, DAPO sampling."""
    root = tmp_path_factory.mktemp("llm")
    model = create_tiny_lm(root / "tiny", num_hidden_layers=2, num_key_value_heads=2)
    config = {
        "run": {
            "name": "llm-it",
            "max_iterations": 4,
            "eval_interval": 2,
            "checkpoint_interval": 2,
        },
        "model": {"model_type": "hf_causal_lm", "model_path": str(model)},
        "data": {"prompts_per_batch": 4, "eval_size": 8},
        "rollout": {
            "max_new_tokens": 6,
            "weight_sync_mode": "patch",
            "patch_full_sync_interval": 3,
        },
        "algorithm": {
            "adv_type": "grpo",
            "group_size": 4,
            "normalize_advantages": False,
            "kl_coef": 0.01,
            "dynamic_sampling": True,
            "max_num_gen_batches": 2,
        },
        # a digit anywhere scores 1: random completions get mixed rewards, so weights move
        # fanout_min_seconds 0: scoring always runs as score_rewards tasks (checked below)
        "reward": {
            "reward_type": "format",
            "format_pattern": "[0-9]",
            "num_tasks": 2,
            "fanout_min_seconds": 0,
        },
        "actor": {
            "num_workers": 2,
            "num_minibatches": 2,
            "micro_batch_size": 4,
            "update_epochs": 1,
            "lr": 1.0e-3,
        },
        "eval": {"pass_k": 2, "sample_rows": 4, "before_training": True},
    }
    path = root / "grpo_tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def grpo_run(
    tmp_path_factory: pytest.TempPathFactory, prefect_api: str, preset: Path
) -> tuple[Path, str]:
    """The preset trained once, uninterrupted: ``(output dir, CLI output)``.

    The records test reads it, and the FSDP resume test compares against its checkpoints.
    """
    out_dir = tmp_path_factory.mktemp("grpo-run")
    env = training_env(prefect_api, out_dir)
    return out_dir, run_train(out_dir, env, "--config", str(preset))


def test_grpo_run_records_flows_tasks_metrics_and_exports(
    tmp_path: Path, train_env: dict[str, str], prefect_api: str, grpo_run: tuple[Path, str]
) -> None:
    run_dir, out = grpo_run
    assert "accuracy" in out and "MLflow run id" in out
    client = MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")
    run = find_run(client, "llm-it")
    for key in (
        "eval/accuracy",
        "eval/pass_at_2",
        "rollout/weight_sync_bytes",
        "train/kl_loss",
        "rollout/kl_to_ref",
        "rollout/generation_rounds",
        "train/policy_loss",
    ):
        assert key in run.data.metrics, key
    syncs = client.get_metric_history(run.info.run_id, "rollout/weight_sync_full")
    kinds = [m.value for m in sorted(syncs, key=lambda m: m.step)]
    # the evaluations (before training, after iterations 2 and 4) made the full syncs
    # (the first, then every patch_full_sync_interval=3): every iteration sent a patch
    assert kinds == [0.0, 0.0, 0.0, 0.0], kinds
    moved = client.get_metric_history(run.info.run_id, "rollout/weight_sync_bytes")
    by_step = {m.step: m.value for m in moved}
    # iterations 0 and 2 follow an evaluation's sync (nothing new); 1 and 3 follow updates
    assert by_step[0] == by_step[2] == 0 and by_step[1] > 0 and by_step[3] > 0, by_step
    tables = {a.path for a in client.list_artifacts(run.info.run_id, "eval")}
    assert {
        "eval/samples_000000.json",  # eval.before_training
        "eval/samples_000002.json",
        "eval/samples_000004.json",
    } <= tables
    accuracy = client.get_metric_history(run.info.run_id, "eval/accuracy")
    assert sorted(m.step for m in accuracy) == [0, 1, 3]  # before training, iterations 2, 4
    assert "eval before run" in out
    flow_run_id = run.data.tags["prefect.flow_run_id"]
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as api:
        children = api.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])
            )
        )
        assert sorted(c.name for c in children) == [
            "evaluate-before-training",
            *[f"iteration-{i}" for i in range(4)],
        ]
        expected = {
            "score_rewards-0-0",
            "score_rewards-0-1",
            "reward-0",
            "evaluate-1",
            "update-3",
        }
        names: set[str] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not expected <= names:
            runs = api.read_task_runs(
                task_run_filter=TaskRunFilter(
                    flow_run_id=TaskRunFilterFlowRunId(any_=[c.id for c in children])
                )
            )
            names = {t.name for t in runs}
            time.sleep(1)
        assert expected <= names, sorted(expected - names)
    # the converter turns the checkpoint into a from_pretrained directory
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "infra.checkpoint.convert",
            "--run-name",
            "llm-it",
            "--output-dir",
            str(run_dir),
            "--out",
            str(tmp_path / "hf"),
        ],
        cwd=ROOT,
        env=train_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    trained = load_file(
        str(run_dir / "llm-it" / "checkpoints" / "step_000004" / "actor_0" / "model.safetensors")
    )
    for name, value in model.state_dict().items():
        assert (value == trained[f"model.{name}"]).all(), name

    # evaluate-latest on a reasoning run: in-process held-out evaluation of the step-4
    # checkpoint equals the in-training evaluation after iteration 4 (same weights, seeds)
    proc = subprocess.run(
        [
            sys.executable,
            "flows/evaluate.py",
            "--run-name",
            "llm-it",
            "--output-dir",
            str(run_dir),
        ],
        cwd=ROOT,
        env=train_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    (child,) = client.search_runs([run.info.experiment_id], "tags.`rlpipe.kind` = 'evaluation'")
    assert child.data.tags["mlflow.parentRunId"] == run.info.run_id
    trained_eval = {
        key: {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}[3]
        for key in ("eval/accuracy", "eval/pass_at_2", "eval/return_mean")
    }
    assert {k: child.data.metrics[k] for k in trained_eval} == trained_eval
    assert "eval/samples_000004.json" in {
        a.path for a in client.list_artifacts(child.info.run_id, "eval")
    }


def test_interrupted_llm_run_resumes_bit_identical(
    tmp_path: Path,
    train_env: dict[str, str],
    preset: Path,
    grpo_run: tuple[Path, str],
) -> None:
    straight, resumed = grpo_run[0], tmp_path / "resumed"  # the module's uninterrupted run
    run_stopped_at_2_then_resumed(resumed, train_env, "--config", str(preset))
    final = "llm-it/checkpoints/step_000004"
    a = load_file(str(straight / final / "actor_0" / "model.safetensors"))
    b = load_file(str(resumed / final / "actor_0" / "model.safetensors"))
    before = load_file(str(straight / "llm-it/checkpoints/step_000002/actor_0/model.safetensors"))
    assert any(not (a[k] == before[k]).all() for k in a), (
        "weights did not move: the test proves nothing"
    )
    for name in a:
        assert (a[name] == b[name]).all(), name
    state = [
        json.loads((d / final / "reasoning_state.json").read_text()) for d in (straight, resumed)
    ]
    assert state[0] == state[1]
