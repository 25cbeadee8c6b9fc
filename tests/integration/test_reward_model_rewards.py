"""Reward models as rewards: GRPO runs scored by reward-model workers on a real Ray cluster.

A tiny reward model (the tiny LM's backbone with a seeded head) scores through its own
workers, placed apart from the trainer or collocated with it; a tiny LM as a judge, whose
replies only sometimes hold a score, has its failures counted and those rows left out;
and raised and killed reward-model workers leave runs bit-identical to a fault-free one
(``benchmarks/chaos.py``, preset ``reward_model``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from rl_core.models.reward_model import create_tiny_reward_model
from rl_core.models.tiny_lm import create_tiny_lm
from tests.integration.conftest import ROOT, run_evaluate, run_train
from tests.integration.test_exactly_once import run_matrix

pytestmark = pytest.mark.integration
SHORT = (
    "--config",
    "grpo_arith",
    "run.warm_start=null",
    "run.max_iterations=2",
    "run.eval_interval=2",
    "run.checkpoint_interval=2",
    "data.prompts_per_batch=4",
    "data.eval_size=8",
    "algorithm.group_size=4",
    "eval.pass_k=1",
    "tracking.registered_model_name=null",
    "tracking.system_metrics=false",
)


def metrics(output_dir: Path, key: str) -> list[float]:
    """Values of ``key`` logged by the run under ``output_dir``, by step."""
    with sqlite3.connect(output_dir / "mlflow.db") as db:
        rows = db.execute("select value from metrics where key = ? order by step", (key,))
        return [r[0] for r in rows]


def test_classifier_on_separate_workers_combined_with_a_rule(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    lm = tmp_path / "tiny"
    rm = create_tiny_reward_model(tmp_path / "tiny-rm", lm)
    run_train(
        tmp_path,
        train_env,
        *SHORT,
        f"model.model_path={lm}",
        "model.tiny_init=true",
        "reward.reward_type=composite",
        "reward.components={math_verify: 1.0, reward_model: 0.5}",
        f"reward.model.uri={rm}",
        "reward.model.placement=separate",
        "reward.model.num_workers=2",
        'cluster.component_placement={"env,rollout,actor": 0, reward: 1}',
    )
    assert len(metrics(tmp_path, "reward/rm_score_mean")) == 2
    assert metrics(tmp_path, "reward/rm_failures") == [0.0, 0.0]
    assert len(metrics(tmp_path, "reward/rule_math_verify_mean")) == 2
    assert metrics(tmp_path, "rollout/unscored_fraction") == [0.0, 0.0]
    # flows/evaluate.py scores the checkpoint with the same reward model, in its own process
    trained = {key: metrics(tmp_path, key) for key in ("eval/accuracy", "eval/return_mean")}
    out = run_evaluate("grpo-arith", tmp_path, train_env)
    summary = json.loads(out[out.index("{") :])
    assert summary["eval/accuracy"] == pytest.approx(trained["eval/accuracy"][-1])
    assert summary["eval/return_mean"] == pytest.approx(trained["eval/return_mean"][-1], abs=1e-4)


def test_judge_failures_are_counted_and_left_out(tmp_path: Path, train_env: dict[str, str]) -> None:
    lm = tmp_path / "tiny"
    create_tiny_lm(str(lm), seed=0)  # the judge: checked before the run creates its model
    fixtures = str(ROOT / "tests" / "fixtures" / "ext_modules")
    env = {
        **train_env,
        "RLPIPE_EXT_MODULE": "ext_judge_parser",
        "PYTHONPATH": os.pathsep.join(p for p in (fixtures, train_env.get("PYTHONPATH")) if p),
    }
    run_train(
        tmp_path,
        env,
        *SHORT,
        f"model.model_path={lm}",
        "model.tiny_init=true",
        "reward.reward_type=reward_model",
        "reward.model.kind=judge",
        f"reward.model.uri={lm}",
        "reward.model.template='{response} {prompt}'",
        "reward.model.parser=every_other",
        "reward.model.max_new_tokens=2",
        "reward.model.placement=collocated",
    )
    failures = metrics(tmp_path, "reward/rm_failures")
    fractions = metrics(tmp_path, "rollout/unscored_fraction")
    assert len(failures) == 2 and sum(failures) > 0, failures
    # every row without a score is left out of training (16 rows per iteration)
    assert [f / 16 for f in failures] == fractions
    assert all(f < 1.0 for f in fractions)


def test_reward_model_worker_faults_end_bit_identical(
    tmp_path: Path, train_env: dict[str, str]
) -> None:
    """A raised and a killed reward-model worker: retried (respawned) without a rewind."""
    rows = run_matrix(
        tmp_path, train_env, "--presets=reward_model", "--cases=raise:reward@1+kill:reward@2"
    )
    assert [r["fault"] for r in rows] == ["raise:reward@1,kill:reward@2"]
