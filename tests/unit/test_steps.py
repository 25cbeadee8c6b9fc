"""The Step enum, its derived step lists, the step tasks, and where injected faults strike."""

from __future__ import annotations

from typing import Any

import pytest

import infra.driver.faults as faults_module
from infra.driver.faults import FIRST_FANOUT_JOB, FaultInjector
from infra.driver.step_runtime import Evaluation, FanoutJob, StepResult, StepRuntime, runtime_class
from rl_core.config import load_config
from rl_core.reliability import parse_faults
from rl_core.steps import (
    COST_PHASES,
    FAULT_STEPS,
    ITERATION_STEPS,
    STATEFUL_STEPS,
    Step,
)
from tasks.options import RETRYABLE_STEP_OPTIONS, STEP_OPTIONS
from tasks.steps import RUNTIME_STEPS, step_task


def test_derived_lists_are_the_step_lists_the_pipeline_always_had():
    # written out once: metric, param and log order depends on them
    assert tuple(Step) == (
        "weight_sync",
        "rollout",
        "reward",
        "advantage",
        "update",
        "sft_update",
        "evaluate",
        "checkpoint",
    )
    assert ITERATION_STEPS == (
        "weight_sync",
        "rollout",
        "reward",
        "advantage",
        "update",
        "evaluate",
        "checkpoint",
    )
    assert FAULT_STEPS == ITERATION_STEPS
    assert STATEFUL_STEPS == ("rollout", "update", "sft_update")
    assert COST_PHASES == (
        "weight_sync",
        "rollout",
        "reward",
        "advantage",
        "update",
        "evaluate",
        "checkpoint",
        "sft_update",
        "orchestration",
    )
    assert [s for s in Step if s.retry_safe] == ["weight_sync", "checkpoint"]


def test_a_step_is_its_name():
    assert Step.ROLLOUT == "rollout" and Step("rollout") is Step.ROLLOUT
    assert f"time/{Step.SFT_UPDATE}" == "time/sft_update"
    assert {Step.UPDATE: 1}["update"] == 1 and "update" in STATEFUL_STEPS
    assert ",".join(FAULT_STEPS).startswith("weight_sync,rollout,")


@pytest.mark.parametrize("step", RUNTIME_STEPS)
def test_step_tasks_keep_their_names_and_options(step):
    task = step_task(step)
    assert task.name == step.value
    assert task.task_run_name == f"{step.value}-{{iteration}}"
    assert task.description == step.summary
    expected = RETRYABLE_STEP_OPTIONS if step.retry_safe else STEP_OPTIONS
    assert task.retries == expected.get("retries", 0)
    assert task.persist_result is False and task.log_prints is False
    assert task.cache_policy is STEP_OPTIONS["cache_policy"]
    assert step_task(step.value) is task  # one definition per step


# -- arming: which process fires which fault -------------------------------------------


class Worker:
    """A worker handle that records the faults armed on it."""

    def __init__(self, name: str, armed: list[tuple[str, str, str]]) -> None:
        self.name, self.armed = name, armed
        self.arm_fault = self

    def remote(self, kind: str, name: str) -> None:
        self.armed.append((self.name, kind, name))

    def __repr__(self) -> str:
        return self.name


class Runtime(StepRuntime):
    """Steps that record the order of their calls; faults strike ``targets``."""

    def __init__(self, cfg: Any, targets: dict[Step, Any]) -> None:
        super().__init__(cfg)
        self.targets = targets
        self.calls: list[str] = []

    def fault_target(self, step: Step) -> Any:
        return self.targets.get(step)

    def _step(self, name: str) -> StepResult:
        self.calls.append(name)
        return StepResult(0.0)

    def weight_sync(self, iteration: int) -> StepResult:
        return self._step("weight_sync")

    def rollout(self, iteration: int) -> StepResult:
        return self._step("rollout")

    def reward_jobs(self, iteration: int) -> list[FanoutJob]:
        self.calls.append("reward_jobs")
        return [FanoutJob("score_rewards", dict), FanoutJob("score_rewards", dict)]

    def reward(self, iteration: int, results: list[Any] | None) -> StepResult:
        return self._step("reward")

    def advantage(self, iteration: int) -> StepResult:
        return self._step("advantage")

    def update(self, iteration: int) -> StepResult:
        return self._step("update")

    def sft_step(self, iteration: int) -> StepResult:
        return self._step("sft_step")

    def evaluation_jobs(self, iteration: int) -> list[FanoutJob]:
        self.calls.append("evaluation_jobs")
        return []

    def evaluate(self, iteration: int, results: list[Any] | None) -> Evaluation:
        return Evaluation({"eval/return_mean": 0.0})

    @classmethod
    def evaluate_checkpoint(cls, store_uri, checkpoint, episodes):  # type: ignore[override]
        return {}, [], ""

    def save_checkpoint(self, store_uri: str, step: int) -> dict[str, Any]:
        self.calls.append(f"save_checkpoint:{step}")
        return {"seconds": 0.0, "dir": "step"}

    def load_checkpoint(self, store_uri: str, folder: str, step: int) -> None:
        return None

    def checkpoint_parts(self) -> list[Any]:
        return []

    def snapshot(self, step: str) -> None:
        return None

    def restore(self, step: str) -> None:
        return None

    def repair(self) -> dict[str, list[int]]:
        return {}


@pytest.fixture
def armed(monkeypatch):
    monkeypatch.setattr(faults_module.ray, "get", lambda value: value)
    return []


def _runtime(plan: str, targets: dict[Step, Any]) -> Runtime:
    runtime = Runtime(load_config("ppo_cartpole"), targets)
    runtime.faults = FaultInjector(parse_faults(plan))
    return runtime


def test_run_step_arms_the_steps_worker_before_its_body(armed):
    actor, env = Worker("actor", armed), Worker("env", armed)
    runtime = _runtime("raise:rollout@1,kill:update@1", {Step.ROLLOUT: env, Step.UPDATE: actor})
    runtime.run_step(Step.ROLLOUT, 0)
    runtime.run_step(Step.UPDATE, 0)
    assert armed == []  # another iteration
    runtime.run_step(Step.ROLLOUT, 1)
    assert armed == [("env", "raise", "raise:rollout@1")]
    runtime.run_step(Step.ROLLOUT, 1)  # a retry: the fault fired already
    runtime.run_step(Step.UPDATE, 1)
    runtime.run_step(Step.SFT_UPDATE, 1)
    assert armed[1:] == [("actor", "kill", "kill:update@1")]
    assert runtime.calls == ["rollout", "update", "rollout", "rollout", "update", "sft_step"]


def test_a_step_without_target_leaves_its_fault_pending(armed):
    runtime = _runtime("raise:advantage@0", {})
    runtime.run_step(Step.ADVANTAGE, 0)
    assert armed == [] and [str(f) for f in runtime.faults.plan.pending()] == ["raise:advantage@0"]


def test_fanout_fault_goes_on_the_first_job_with_a_token(armed):
    runtime = _runtime("kill:reward@2", {Step.REWARD: FIRST_FANOUT_JOB})
    jobs = runtime.fanout_jobs(Step.REWARD, 2)
    assert jobs[0].fault is not None and jobs[1].fault is None
    assert jobs[0].fault["kind"] == "kill" and jobs[0].fault["name"] == "kill:reward@2"
    assert runtime.fanout_jobs(Step.REWARD, 2)[0].fault is None  # fires once
    assert armed == []


def test_fanout_steps_arm_a_worker_after_building_their_jobs(armed):
    calls: list[str] = []
    rollout = Worker("rollout", armed)
    runtime = _runtime("hang:evaluate@0", {Step.EVALUATE: rollout})
    runtime.calls = calls
    original = rollout.remote
    rollout.remote = lambda *a: (calls.append("armed"), original(*a))[1]  # type: ignore[method-assign]
    assert runtime.fanout_jobs(Step.EVALUATE, 0) == []
    assert calls == ["evaluation_jobs", "armed"]
    assert armed == [("rollout", "hang", "hang:evaluate@0")]


def test_checkpoint_step_arms_the_iteration_it_commits(armed):
    actor = Worker("actor", armed)
    runtime = _runtime("disk_full:checkpoint@3", {Step.CHECKPOINT: actor})
    runtime.checkpoint_step("store", 3)
    assert armed == []
    runtime.checkpoint_step("store", 4)  # step 4 holds iterations 0..3
    assert armed == [("actor", "disk_full", "disk_full:checkpoint@3")]
    assert runtime.calls == ["save_checkpoint:3", "save_checkpoint:4"]


def test_no_plan_asks_no_target():
    runtime = Runtime(load_config("ppo_cartpole"), {})
    runtime.fault_target = None  # type: ignore[assignment]  # would fail if called
    runtime.run_step(Step.WEIGHT_SYNC, 0)
    assert runtime.fanout_jobs(Step.REWARD, 0)[0].fault is None


# -- each kind's targets: the worker each step calls -------------------------------------

ACTOR, ENV, ROLLOUT, REWARD_MODEL = "actor[0]", "env[0]", "rollout[0]", "reward_model[0]"
#: preset (overrides) → the target of each step that takes faults (None: never fires).
TARGETS: dict[tuple[str, tuple[str, ...]], dict[Step, Any]] = {
    ("ppo_cartpole", ()): {
        Step.WEIGHT_SYNC: ACTOR,
        Step.ROLLOUT: ENV,
        Step.REWARD: ACTOR,
        Step.ADVANTAGE: ACTOR,
        Step.UPDATE: ACTOR,
        Step.EVALUATE: FIRST_FANOUT_JOB,
        Step.CHECKPOINT: ACTOR,
    },
    ("sac_pendulum", ()): {
        Step.WEIGHT_SYNC: ACTOR,
        Step.ROLLOUT: ENV,
        Step.REWARD: ACTOR,
        Step.ADVANTAGE: ACTOR,
        Step.UPDATE: ACTOR,
        Step.EVALUATE: FIRST_FANOUT_JOB,
        Step.CHECKPOINT: ACTOR,
    },
    ("grpo_arith", ()): {
        Step.WEIGHT_SYNC: ACTOR,
        Step.ROLLOUT: ROLLOUT,
        Step.REWARD: FIRST_FANOUT_JOB,
        Step.ADVANTAGE: ACTOR,
        Step.UPDATE: ACTOR,
        Step.EVALUATE: ROLLOUT,
        Step.CHECKPOINT: ACTOR,
    },
    ("grpo_arith_rm", ()): {
        Step.WEIGHT_SYNC: ACTOR,
        Step.ROLLOUT: ROLLOUT,
        Step.REWARD: REWARD_MODEL,
        Step.ADVANTAGE: ACTOR,
        Step.UPDATE: ACTOR,
        Step.EVALUATE: ROLLOUT,
        Step.CHECKPOINT: ACTOR,
    },
    ("online_arith", ()): {
        Step.WEIGHT_SYNC: ACTOR,
        Step.ROLLOUT: ROLLOUT,
        Step.REWARD: None,
        Step.ADVANTAGE: ACTOR,
        Step.UPDATE: ACTOR,
        Step.EVALUATE: ROLLOUT,
        Step.CHECKPOINT: ACTOR,
    },
    ("rm_arith", ()): {
        Step.WEIGHT_SYNC: None,
        Step.ROLLOUT: None,
        Step.REWARD: None,
        Step.ADVANTAGE: None,
        Step.UPDATE: ACTOR,
        Step.EVALUATE: ACTOR,
        Step.CHECKPOINT: ACTOR,
    },
}


@pytest.mark.parametrize(("preset", "overrides"), list(TARGETS))
def test_each_kind_strikes_the_worker_its_step_calls(preset, overrides):
    cfg = load_config(preset, list(overrides))
    cls = runtime_class(cfg)
    runtime = cls.__new__(cls)  # no workers: only the targets are read
    runtime.cfg = cfg
    runtime.actor, runtime.env, runtime.rollout_group = [ACTOR], [ENV], [ROLLOUT]
    reward_model = getattr(cfg.reward, "model", None) is not None
    runtime.model_reward = type("Scorer", (), {"group": [REWARD_MODEL]})() if reward_model else None
    targets = {step: runtime.fault_target(step) for step in FAULT_STEPS}
    assert targets == TARGETS[preset, overrides]
